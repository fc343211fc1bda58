#pragma once
// --activations of serve, bench offline and generate: how bf16 / FP8 weights take their inputs
// (model::LoadOptions::activations).
#include <CLI/CLI.hpp>
#include <string>

#include "handoff/model/model.h"

namespace handoff::cli {

void add_activations_flag(CLI::App& cmd, std::string& value);
// Sets load.activations from the flag (exact when it was not given); load.dtype must be set.
// InputError when it is given with --dtype f32, whose products are always exact.
void apply_activations_flag(const std::string& value, model::LoadOptions& load);

}  // namespace handoff::cli
