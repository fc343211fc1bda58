#include "handoff/parallel/memory_json.h"

namespace handoff::parallel {

using nlohmann::json;

json memory_to_json(const MemoryPlan& mp) {
  const MemoryOptions& o = mp.options;
  json out;
  out["weight_dtype"] = weight_dtype_name(o.weights);
  out["kv_cache_dtype"] = cache_dtype_name(o.kv_cache);
  out["indexer_cache_dtype"] = cache_dtype_name(o.indexer_cache);
  if (o.weights == WeightDtype::kFp8) {
    out["fp8_weight_block"] = {mp.block_rows, mp.block_cols};
    out["note"] =
        "fp8 is what the engine holds for an FP8 checkpoint or under --quantize fp8 (1 byte per "
        "weight), except that it keeps each matrix's scales per row and 128 columns (rows x "
        "ceil(cols/128) x 4 bytes, about 3% of the fp8 bytes) where this counts one per block";
  }
  out["cache_bytes_per_token_per_layer"] = {
      {"latent", mp.cache.latent}, {"indexer", mp.cache.indexer}, {"total", mp.cache.per_layer()}};
  out["mem_per_rank"] = o.mem_per_rank ? json(*o.mem_per_rank) : json(nullptr);
  out["reserve_per_rank"] = o.reserve;
  out["min_mem_per_rank"] = mp.min_mem_per_rank;
  out["weight_bytes_all_ranks"] = mp.weight_bytes_all_ranks;
  out["max_tokens"] = mp.max_tokens ? json(*mp.max_tokens) : json(nullptr);
  out["limiting_rank"] = mp.max_tokens ? json(mp.limiting_rank) : json(nullptr);
  out["ranks"] = json::array();
  for (const RankMemory& r : mp.ranks) {
    json parts = json::object();
    for (const WeightPart& p : r.parts)
      parts[p.name] = {{"bytes", p.bytes}, {"replicated", p.replicated}};
    out["ranks"].push_back(
        {{"rank", r.rank},
         {"stage", r.stage},
         {"tp_rank", r.tp_rank},
         {"layers", r.layers},
         {"weight_bytes", r.weight_bytes},
         {"scale_bytes", r.scale_bytes},
         {"weights", parts},
         {"cache_bytes_per_token", r.cache_bytes_per_token},
         {"cache_tokens", r.cache_tokens ? json(*r.cache_tokens) : json(nullptr)}});
  }
  return out;
}

}  // namespace handoff::parallel
