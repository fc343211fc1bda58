#pragma once
// /metrics in the Prometheus text format: the engine's counters, gauges and histograms plus the
// HTTP layer's request counts and the model's per-layer communication bytes.
#include <cstdint>
#include <map>
#include <string>

#include "handoff/comm/communicator.h"
#include "handoff/engine/stats.h"

namespace handoff::serve {

struct HttpCounts {
  std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, status) -> count
};

// This process's resident set (/proc/self/statm), in bytes; 0 where it cannot be read.
double process_resident_bytes();

// Every series carries model_name="<served model>" (vLLM's label), first among its labels.
std::string render_metrics(const engine::EngineStats& stats, const HttpCounts& http,
                           const comm::CommCounts& comm, const std::string& model_name);

}  // namespace handoff::serve
