#include "handoff/parallel/memory_plan.h"

#include <algorithm>
#include <limits>

#include "handoff/error.h"
#include "handoff/model/mla_attention.h"
#include "handoff/model/model.h"

namespace handoff::parallel {

std::string_view weight_dtype_name(WeightDtype d) {
  switch (d) {
    case WeightDtype::kF32:
      return "f32";
    case WeightDtype::kBF16:
      return "bf16";
    case WeightDtype::kFp8:
      return "fp8";
  }
  return "?";
}

std::string_view cache_dtype_name(CacheDtype d) {
  switch (d) {
    case CacheDtype::kF32:
      return "f32";
    case CacheDtype::kBF16:
      return "bf16";
    case CacheDtype::kFp8:
      return "fp8";
  }
  return "?";
}

std::optional<WeightDtype> parse_weight_dtype(std::string_view text) {
  if (text == "f32") return WeightDtype::kF32;
  if (text == "bf16") return WeightDtype::kBF16;
  if (text == "fp8") return WeightDtype::kFp8;
  return std::nullopt;
}

std::optional<CacheDtype> parse_cache_dtype(std::string_view text) {
  if (text == "f32") return CacheDtype::kF32;
  if (text == "bf16") return CacheDtype::kBF16;
  if (text == "fp8") return CacheDtype::kFp8;
  return std::nullopt;
}

namespace {

constexpr int64_t kF32Bytes = 4;
constexpr int64_t kBF16Bytes = 2;

// Checked: the config bounds each dimension, not their products over 64 ranks of layers.
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    fail_input("memory plan: a byte count overflows int64 ({} x {})", a, b);
  return r;
}

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    fail_input("memory plan: a byte count overflows int64 ({} + {})", a, b);
  return r;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of size b that the index range [begin, end) touches: a slice that starts or ends
// inside a block needs that block's scale too.
int64_t blocks_touched(int64_t begin, int64_t end, int64_t b) {
  return end <= begin ? 0 : ceil_div(end, b) - begin / b;
}

// Bytes of the linear weights one rank holds, in the planned dtype.
class WeightCounter {
 public:
  WeightCounter(WeightDtype dtype, int64_t block_rows, int64_t block_cols)
      : dtype_(dtype), block_rows_(block_rows), block_cols_(block_cols) {}

  // `copies` × rows [r0, r1) × columns [c0, c1) of a quantisable linear weight (FP8 in the
  // published checkpoints): under fp8, one byte each plus the f32 scale of every block the
  // slice touches.
  int64_t linear(int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t copies = 1) {
    const int64_t numel = mul(copies, mul(r1 - r0, c1 - c0));
    switch (dtype_) {
      case WeightDtype::kF32:
        return mul(numel, kF32Bytes);
      case WeightDtype::kBF16:
        return mul(numel, kBF16Bytes);
      case WeightDtype::kFp8: {
        if (numel == 0) return 0;
        const int64_t blocks =
            mul(blocks_touched(r0, r1, block_rows_), blocks_touched(c0, c1, block_cols_));
        const int64_t scales = mul(mul(copies, blocks), kF32Bytes);
        scale_bytes_ = add(scale_bytes_, scales);
        return add(numel, scales);
      }
    }
    return 0;
  }
  int64_t linear(int64_t rows, int64_t cols, int64_t copies = 1) {
    return linear(0, rows, 0, cols, copies);
  }

  // A matrix published in bf16 even in FP8 checkpoints: embedding, lm_head, router,
  // weights_proj.
  int64_t unquantised(int64_t numel) const {
    return mul(numel, dtype_ == WeightDtype::kF32 ? kF32Bytes : kBF16Bytes);
  }

  int64_t scale_bytes() const { return scale_bytes_; }
  bool is_fp8() const { return dtype_ == WeightDtype::kFp8; }

 private:
  WeightDtype dtype_;
  int64_t block_rows_, block_cols_;
  int64_t scale_bytes_ = 0;
};

int64_t f32_bytes(int64_t numel) { return mul(numel, kF32Bytes); }

int64_t cache_row_bytes(CacheDtype dtype, int64_t quantised, int64_t kept) {
  // `quantised` values are e4m3 under fp8; `kept` values stay bf16 there (MLA's k_pe).
  switch (dtype) {
    case CacheDtype::kF32:
      return (quantised + kept) * kF32Bytes;
    case CacheDtype::kBF16:
      return (quantised + kept) * kBF16Bytes;
    case CacheDtype::kFp8:
      return quantised + ceil_div(quantised, kCacheQuantBlock) * kF32Bytes + kept * kBF16Bytes;
  }
  return 0;
}

class RankAccount {
 public:
  explicit RankAccount(RankMemory& rank) : rank_(rank) {}
  void add_to(const char* name, int64_t bytes, bool replicated) {
    for (WeightPart& p : rank_.parts)
      if (p.name == name) {
        p.bytes = add(p.bytes, bytes);
        return;
      }
    rank_.parts.push_back({name, bytes, replicated});
  }

 private:
  RankMemory& rank_;
};

RankMemory rank_memory(const model::ModelConfig& c, const Plan& plan, const MemoryOptions& o,
                       int64_t block_rows, int64_t block_cols, int stage, int tp_rank) {
  const int tp = plan.options.tp;
  const StagePlan& st = plan.stages[static_cast<size_t>(stage)];
  RankMemory rm;
  rm.rank = stage * tp + tp_rank;
  rm.stage = stage;
  rm.tp_rank = tp_rank;
  rm.layers = st.end_layer - st.first_layer;
  WeightCounter w(o.weights, block_rows, block_cols);
  RankAccount acc(rm);
  const int64_t d = c.hidden_size;

  // Vocab-parallel embedding and head: ceil(V / tp) rows per rank, the last ones may hold
  // fewer (Model::load).
  const int64_t vocab_part = ceil_div(c.vocab_size, tp);
  const int64_t v0 = std::min(c.vocab_size, tp_rank * vocab_part);
  const int64_t v1 = std::min(c.vocab_size, v0 + vocab_part);
  if (stage == 0) acc.add_to("embedding", w.unquantised(mul(v1 - v0, d)), false);
  if (stage + 1 == plan.options.pp) {
    acc.add_to("lm_head", w.unquantised(mul(v1 - v0, d)), false);
    acc.add_to("final_norm", f32_bytes(d), true);
  }

  const int64_t heads = c.num_attention_heads / tp;
  const int64_t h0 = tp_rank * heads;
  const int64_t qk = c.qk_head_dim();
  for (int64_t l = st.first_layer; l < st.end_layer; ++l) {
    acc.add_to("layer_norms", f32_bytes(2 * d), true);
    acc.add_to(
        "attention_replicated",
        add(add(w.linear(c.q_lora_rank, d), w.linear(c.kv_lora_rank + c.qk_rope_head_dim, d)),
            f32_bytes(c.q_lora_rank + c.kv_lora_rank)),
        true);
    // kv_b_proj's rows of these heads, split per head into W_UK^T / W_UV: FP8 stays FP8, but
    // a W_UK^T whose qk_nope pads to more bytes than bf16 (MlaAttention::keeps_uk_t_fp8) is
    // held dense.
    const int64_t head_rows = c.qk_nope_head_dim + c.v_head_dim;
    int64_t kv_b = w.linear(h0 * head_rows, (h0 + heads) * head_rows, 0, c.kv_lora_rank);
    if (w.is_fp8())
      for (int64_t h = h0; h < h0 + heads; ++h)
        if (!model::MlaAttention::keeps_uk_t_fp8(h * head_rows, c.qk_nope_head_dim, block_rows,
                                                 kBF16Bytes))
          kv_b = add(kv_b, w.unquantised(mul(c.qk_nope_head_dim, c.kv_lora_rank)) -
                               mul(c.qk_nope_head_dim, c.kv_lora_rank));
    // W_UK[h] once more, for prompt chunks attended per head: not at f32, which the engine runs
    // batch-invariant (model::LoadOptions::per_head_prefill_min_tokens), nor where a DSA
    // model's index_topk leaves the form too few rows.
    if (o.weights != WeightDtype::kF32 && model::MlaAttention::uses_per_head_form(
                                              c, model::LoadOptions{}.per_head_prefill_min_tokens))
      for (int64_t h = h0; h < h0 + heads; ++h)
        kv_b = add(kv_b,
                   w.linear(h * head_rows, h * head_rows + c.qk_nope_head_dim, 0, c.kv_lora_rank));
    acc.add_to("attention_heads",
               add(add(w.linear(h0 * qk, (h0 + heads) * qk, 0, c.q_lora_rank),
                       w.linear(0, d, h0 * c.v_head_dim, (h0 + heads) * c.v_head_dim)),
                   kv_b),
               false);
    if (c.has_indexer)
      acc.add_to("indexer",
                 add(add(w.linear(mul(c.index_n_heads, c.index_head_dim), c.q_lora_rank),
                         w.linear(c.index_head_dim, d)),
                     add(w.unquantised(mul(c.index_n_heads, d)), f32_bytes(2 * c.index_head_dim))),
                 true);
    if (c.is_moe_layer(l)) {
      // Router weight and its f32 e_score_correction_bias (noaux_tc, both families).
      acc.add_to("router",
                 add(w.unquantised(mul(c.n_routed_experts, d)), f32_bytes(c.n_routed_experts)),
                 true);
      const int64_t experts = c.n_routed_experts / tp;
      const int64_t mi = c.moe_intermediate_size;
      acc.add_to("routed_experts", add(w.linear(mi, d, 2 * experts), w.linear(d, mi, experts)),
                 false);
      if (c.n_shared_experts > 0) {
        const int64_t width = mul(mi, c.n_shared_experts);
        const int64_t count = width / tp;
        const int64_t s0 = tp_rank * count;
        acc.add_to("shared_experts",
                   add(w.linear(s0, s0 + count, 0, d, 2), w.linear(0, d, s0, s0 + count)), false);
      }
    } else {
      const int64_t count = c.intermediate_size / tp;
      const int64_t i0 = tp_rank * count;
      acc.add_to("dense_mlp",
                 add(w.linear(i0, i0 + count, 0, d, 2), w.linear(0, d, i0, i0 + count)), false);
    }
  }
  for (const WeightPart& p : rm.parts) rm.weight_bytes = add(rm.weight_bytes, p.bytes);
  rm.scale_bytes = w.scale_bytes();
  return rm;
}

}  // namespace

CacheBytes cache_bytes_per_token_per_layer(const model::ModelConfig& config, CacheDtype latent,
                                           CacheDtype indexer) {
  CacheBytes b;
  b.latent = cache_row_bytes(latent, config.kv_lora_rank, config.qk_rope_head_dim);
  b.indexer = config.has_indexer ? cache_row_bytes(indexer, config.index_head_dim, 0) : 0;
  return b;
}

MemoryPlan plan_memory(const model::ModelConfig& config, const Plan& plan,
                       const MemoryOptions& options) {
  if (config.q_lora_rank <= 0)
    fail_input("memory plan: q_lora_rank = {}: the engine's MLA needs a q LoRA (q_a_proj)",
               config.q_lora_rank);
  MemoryPlan mp;
  mp.options = options;
  if (config.weight_block_rows > 0) {
    mp.block_rows = config.weight_block_rows;
    mp.block_cols = config.weight_block_cols;
  }
  mp.cache = cache_bytes_per_token_per_layer(config, options.kv_cache, options.indexer_cache);
  const int tp = plan.options.tp;
  for (int s = 0; s < plan.options.pp; ++s)
    for (int r = 0; r < tp; ++r) {
      RankMemory rm = rank_memory(config, plan, options, mp.block_rows, mp.block_cols, s, r);
      rm.cache_bytes_per_token = mul(rm.layers, mp.cache.per_layer());
      mp.weight_bytes_all_ranks = add(mp.weight_bytes_all_ranks, rm.weight_bytes);
      mp.min_mem_per_rank = std::max(mp.min_mem_per_rank, add(rm.weight_bytes, options.reserve));
      mp.ranks.push_back(std::move(rm));
    }
  if (!options.mem_per_rank) return mp;
  const int64_t budget = *options.mem_per_rank;
  for (const RankMemory& rm : mp.ranks)
    if (budget < add(rm.weight_bytes, options.reserve))
      fail_input(
          "--mem-per-rank {} B does not hold rank {}'s weights ({} B) plus --mem-reserve ({} B); "
          "this layout needs at least {} B per rank (more ranks, or a smaller --weight-dtype)",
          budget, rm.rank, rm.weight_bytes, options.reserve, mp.min_mem_per_rank);
  int64_t best = std::numeric_limits<int64_t>::max();
  for (RankMemory& rm : mp.ranks) {
    rm.cache_tokens = (budget - rm.weight_bytes - options.reserve) / rm.cache_bytes_per_token;
    if (*rm.cache_tokens < best) {
      best = *rm.cache_tokens;
      mp.limiting_rank = rm.rank;
    }
  }
  mp.max_tokens = best;
  return mp;
}

}  // namespace handoff::parallel
