#pragma once
// Per-rank memory of a parallel plan: the weight bytes each rank holds under the layout (its
// stage's layers, its TP slice of heads, MLP columns, experts and vocab rows, replicated parts
// in full), its cache bytes per token, and how many cache tokens fit in a memory budget.
// It counts what the engine actually holds (model/*.cpp): norms, e_score bias and k_norm are
// f32 whatever the weight dtype; the router and the indexer's weights_proj as the published
// checkpoints store them (bf16; f32 under an f32 plan); the MLA latent and indexer key caches
// are replicated over the TP ranks of a stage (every head reads the one latent).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "handoff/model/config.h"
#include "handoff/parallel/plan.h"

namespace handoff::parallel {

// fp8 = e4m3, one byte per weight plus an f32 scale per (block rows × block cols) block.
enum class WeightDtype { kF32, kBF16, kFp8 };
// fp8 latent: e4m3 c_kv with an f32 scale per 128 values, k_pe kept bf16 (vLLM fp8_ds_mla);
// fp8 indexer key: e4m3 with an f32 scale per 128 values (the reference's act_quant blocks).
enum class CacheDtype { kF32, kBF16, kFp8 };

std::string_view weight_dtype_name(WeightDtype d);
std::string_view cache_dtype_name(CacheDtype d);
// "f32" | "bf16" | "fp8"; nullopt otherwise (the CLI names its flag in the error).
std::optional<WeightDtype> parse_weight_dtype(std::string_view text);
std::optional<CacheDtype> parse_cache_dtype(std::string_view text);

// Values per quantisation block of FP8 caches (MODEL_SPEC §2.5/§2.6).
inline constexpr int64_t kCacheQuantBlock = 128;

struct MemoryOptions {
  WeightDtype weights = WeightDtype::kBF16;
  CacheDtype kv_cache = CacheDtype::kF32;  // the engine's cache is f32 today
  CacheDtype indexer_cache = CacheDtype::kF32;
  std::optional<int64_t> mem_per_rank;  // bytes; no budget: no token counts
  int64_t reserve = 0;                  // bytes per rank kept for activations and scratch
};

// One group of tensors a rank holds (e.g. "routed_experts").
struct WeightPart {
  std::string name;
  int64_t bytes = 0;
  bool replicated = false;  // every TP rank of the stage holds the same bytes
};

struct RankMemory {
  int rank = 0;  // world rank = stage * tp + tp_rank
  int stage = 0;
  int tp_rank = 0;
  int64_t layers = 0;
  std::vector<WeightPart> parts;
  int64_t weight_bytes = 0;  // sum of parts
  int64_t scale_bytes = 0;   // of which FP8 block scales
  int64_t cache_bytes_per_token = 0;
  std::optional<int64_t> cache_tokens;  // with a budget: tokens that fit after weights + reserve
};

struct CacheBytes {
  int64_t latent = 0;   // per token per layer
  int64_t indexer = 0;  // per token per layer (0 without an indexer)
  int64_t per_layer() const { return latent + indexer; }
};

struct MemoryPlan {
  MemoryOptions options;
  int64_t block_rows = 128, block_cols = 128;  // FP8 weight blocks
  CacheBytes cache;
  std::vector<RankMemory> ranks;  // every world rank, in rank order
  int64_t weight_bytes_all_ranks = 0;
  // The smallest budget that holds every rank's weights plus the reserve (zero tokens).
  int64_t min_mem_per_rank = 0;
  std::optional<int64_t> max_tokens;  // with a budget: the minimum over ranks
  int limiting_rank = 0;              // the first rank reaching that minimum
};

CacheBytes cache_bytes_per_token_per_layer(const model::ModelConfig& config, CacheDtype latent,
                                           CacheDtype indexer);

// Throws InputError naming --mem-per-rank when a budget is given that does not hold some
// rank's weights plus the reserve (the message gives the bytes needed), or when a count
// overflows int64.
MemoryPlan plan_memory(const model::ModelConfig& config, const Plan& plan,
                       const MemoryOptions& options);

}  // namespace handoff::parallel
