#pragma once
// --kv-cache-dtype and --indexer-cache-dtype of serve, bench offline and generate.
#include <CLI/CLI.hpp>
#include <string>

#include "handoff/model/config.h"
#include "handoff/model/model.h"

namespace handoff::cli {

struct CacheDtypeFlags {
  std::string latent;   // empty: as --dtype
  std::string indexer;  // empty: as --dtype
};

void add_cache_dtype_flags(CLI::App& cmd, CacheDtypeFlags& flags);
// Sets load.latent_cache_dtype / index_cache_dtype from the flags (defaults: f32 caches for f32
// weights, so the golden tests stay exact, and bf16 for bf16 weights). InputError naming the flag
// for a value it cannot take or an indexer flag on a model without an indexer.
void apply_cache_dtype_flags(const CacheDtypeFlags& flags, const model::ModelConfig& config,
                             model::LoadOptions& load);

}  // namespace handoff::cli
