#pragma once
// Names of the places a collective is attributed to. The plan's predictions and the runtime's
// measurements use the same names, so they compare key by key.
#include <cstdint>
#include <string>

namespace handoff::parallel {

inline std::string layer_scope(int64_t layer) { return "layer " + std::to_string(layer); }
inline std::string stage_entry_scope(int stage) {
  return "stage " + std::to_string(stage) + " entry";
}
inline std::string stage_exit_scope(int stage) {
  return "stage " + std::to_string(stage) + " exit";
}
inline const char* embed_scope() { return "embed"; }
inline const char* head_scope() { return "head"; }
inline const char* sample_scope() { return "sample"; }

}  // namespace handoff::parallel
