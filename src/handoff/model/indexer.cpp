#include "handoff/model/indexer.h"

#include <algorithm>
#include <cstring>

#include "handoff/ops/fp8_blocks.h"
#include "handoff/ops/gemm.h"
#include "handoff/ops/vector_ops.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::model {

Indexer::Indexer(const ModelConfig& config, const WeightLoader& weights, const std::string& prefix,
                 Scratch& scratch)
    : heads_(config.index_n_heads),
      head_dim_(config.index_head_dim),
      rope_dim_(config.qk_rope_head_dim),
      topk_(config.index_topk),
      interleaved_(config.indexer_rope_interleave),
      scale_(static_cast<float>(config.indexer_scale())),
      scratch_(scratch) {
  const int64_t d = config.hidden_size;
  // Checked: the product sizes the weight (the config bounds both factors).
  wq_b_ = weights.linear(prefix + "wq_b.weight",
                         {tensor::shape_numel({heads_, head_dim_}), config.q_lora_rank});
  wk_ = weights.linear(prefix + "wk.weight", {head_dim_, d});
  // The updated reference multiplies weights_proj in fp32 (MODEL_SPEC §5).
  weights_proj_ = weights.linear_fp32_math(prefix + "weights_proj.weight", {heads_, d});
  k_norm_weight_ = weights.f32(prefix + "k_norm.weight", {head_dim_});
  k_norm_bias_ = weights.f32(prefix + "k_norm.bias", {head_dim_});
}

bool Indexer::selects(const StepMeta& meta) const {
  for (int64_t t = 0; t < meta.num_tokens(); ++t)
    if (selects(meta.token_pos[t] + 1, topk_)) return true;
  return false;
}

void Indexer::add_products(const StepMeta& meta, const float* x, const float* qr,
                           std::vector<ops::LinearProduct>& of_x,
                           std::vector<ops::LinearProduct>& of_qr) {
  const int64_t rows = meta.num_tokens();
  // forward() gets the same buffers back: same index, same size.
  float* q = scratch_.get(0, static_cast<size_t>(rows * heads_ * head_dim_));
  float* k = scratch_.get(1, static_cast<size_t>(rows * head_dim_));
  float* w = scratch_.get(2, static_cast<size_t>(rows * heads_));
  of_x.push_back({&wk_, x, rows, k});
  // Below index_topk keys the queries are not needed: GLM-5 reads 8 MiB of FP8 wq_b and 0.4 MB of
  // bf16 weights_proj a layer less.
  if (!selects(meta)) return;
  of_x.push_back({&weights_proj_, x, rows, w});
  of_qr.push_back({&wq_b_, qr, rows, q});
}

void Indexer::forward(const StepMeta& meta, const Rope& rope, cache::PagedCache& cache,
                      int64_t cache_layer, std::vector<std::vector<int32_t>>& selected) {
  const int64_t t_count = meta.num_tokens();
  const int64_t qw = heads_ * head_dim_;
  float* q = scratch_.get(0, static_cast<size_t>(t_count * qw));
  float* k = scratch_.get(1, static_cast<size_t>(t_count * head_dim_));
  float* w = scratch_.get(2, static_cast<size_t>(t_count * heads_));
  ops::layer_norm(k, k_norm_weight_.data<float>(), k_norm_bias_.data<float>(), 1e-6f, t_count,
                  head_dim_, k);
  const int64_t pairs = rope_dim_ / 2;
  float* cs = scratch_.get(3, static_cast<size_t>(2 * pairs));
  // The FP8 key cache is the reference's FP8 path: query and key rotated by a Hadamard
  // transform, then quantized per block (the key by the cache, the query here). Its scores
  // k_scale · Σ_h w_h · q_scale_h · ReLU(q8_h · k8) equal Σ_h w_h · ReLU(q̂_h · k̂) on the
  // dequantized values, since the scales are positive powers of two.
  const bool fp8 = cache.shape().index_dtype == tensor::DType::kF8E4M3;
  const bool queries = selects(meta);  // q and w computed (add_products)
  for (int64_t t = 0; t < t_count; ++t) {
    rope.cos_sin(meta.token_pos[t], cs, cs + pairs);
    float* qt = q + t * qw;
    float* kt = k + t * head_dim_;
    ops::rope(kt, 1, head_dim_, rope_dim_, cs, cs + pairs, interleaved_);
    if (fp8) ops::hadamard_rotate(kt, 1, head_dim_);
    cache.write_index_key(cache_layer, meta.token_slot[t], kt);
    if (!queries) continue;
    ops::rope(qt, heads_, head_dim_, rope_dim_, cs, cs + pairs, interleaved_);
    if (fp8) {
      ops::hadamard_rotate(qt, heads_, head_dim_);
      for (int64_t h = 0; h < heads_; ++h) ops::round_fp8_row(qt + h * head_dim_, head_dim_);
    }
    for (int64_t h = 0; h < heads_; ++h) w[t * heads_ + h] *= scale_;
  }
  if (!queries) {
    selected.assign(static_cast<size_t>(t_count), {});  // every causal key kept
    return;
  }

  selected.resize(static_cast<size_t>(t_count));
  for (auto& sel : selected) sel.clear();  // empty: every causal key is kept (DSA = dense)
  // Rows that select, in groups of consecutive rows of one sequence: the group's keys are
  // gathered once per tile and scored against all its queries by one matrix product.
  int64_t t = 0;
  while (t < t_count) {
    if (!selects(meta.token_pos[t] + 1, topk_)) {
      ++t;
      continue;
    }
    int64_t end = t + 1;
    while (end < t_count && end - t < kGroupRows && meta.token_seq[end] == meta.token_seq[t] &&
           selects(meta.token_pos[end] + 1, topk_))
      ++end;
    select_group(t, end, q, w, meta, cache, cache_layer, selected);
    t = end;
  }
}

void Indexer::select_group(int64_t t0, int64_t t1, const float* q, const float* w,
                           const StepMeta& meta, cache::PagedCache& cache, int64_t cache_layer,
                           std::vector<std::vector<int32_t>>& selected) {
  const int64_t rows = t1 - t0;
  const int64_t qw = heads_ * head_dim_;
  int64_t keys = 0;
  for (int64_t t = t0; t < t1; ++t) keys = std::max(keys, meta.token_pos[t] + 1);
  const auto& seq = meta.sequences[static_cast<size_t>(meta.token_seq[t0])];
  float* scores = scratch_.get(4, static_cast<size_t>(rows * keys));
  const int64_t tiles = (keys + kTileKeys - 1) / kTileKeys;
  // Few queries (decode: one token's 8 heads, fewer than head_dim): per tile, each key's head
  // dots, ReLU and weighted sum in registers (ops::relu_weighted_scores), so the [keys, heads]
  // dots never go to memory and back; bf16 keys are not even converted first. Many queries
  // (prefill): keys transposed once per tile for one product over all the group's (token, head)
  // queries, then the sum. Both give every dot the same products summed in the same order, and
  // every score the same sum.
  const int64_t queries = rows * heads_;
  const bool few_queries = queries < head_dim_;
  // f(i, slot, run) for the runs of consecutive slots (a cache block's) among keys
  // [j, j + count) of the sequence: rows of a run are converted or scored at once.
  auto for_each_run = [&](int64_t j, int64_t count, const auto& f) {
    const int64_t* slots = seq.key_slots.data() + j;
    for (int64_t i = 0; i < count;) {
      int64_t run = 1;
      while (i + run < count && slots[i + run] == slots[i] + run) ++run;
      f(i, slots[i], run);
      i += run;
    }
  };
  // bf16 keys (the bf16 cache) are scored as stored, widened inside the kernel.
  const bool bf16_keys = cache.shape().index_dtype == tensor::DType::kBF16;
  tensor::parallel_for(tiles, 1, [&](int64_t tile0, int64_t tile1) {
    float* key_rows = Scratch::thread_local_buffer(0, static_cast<size_t>(kTileKeys * head_dim_));
    float* q_t = Scratch::thread_local_buffer(1, static_cast<size_t>(head_dim_ * queries));
    float* key_t =
        few_queries ? nullptr
                    : Scratch::thread_local_buffer(2, static_cast<size_t>(head_dim_ * kTileKeys));
    float* dots = few_queries
                      ? nullptr
                      : Scratch::thread_local_buffer(3, static_cast<size_t>(queries * kTileKeys));
    if (few_queries) ops::transpose(queries, head_dim_, q + t0 * qw, head_dim_, q_t, queries);
    for (int64_t tile = tile0; tile < tile1; ++tile) {
      const int64_t j0 = tile * kTileKeys;
      const int64_t n = std::min(kTileKeys, keys - j0);
      if (few_queries && bf16_keys) {
        for_each_run(j0, n, [&](int64_t i, int64_t slot, int64_t run) {
          const uint16_t* stored = cache.index_keys_bf16(cache_layer, slot);
          for (int64_t r = 0; r < rows; ++r) {
            // Causal: a row whose keys end before these has none among them.
            const int64_t limit = std::clamp<int64_t>(meta.token_pos[t0 + r] + 1 - j0 - i, 0, run);
            ops::relu_weighted_scores_bf16(limit, heads_, head_dim_, stored, head_dim_,
                                           q_t + r * heads_, queries, w + (t0 + r) * heads_,
                                           scores + r * keys + j0 + i);
          }
        });
        continue;
      }
      for_each_run(j0, n, [&](int64_t i, int64_t slot, int64_t run) {
        cache.read_index_keys(cache_layer, slot, run, key_rows + i * head_dim_);
      });
      if (few_queries) {
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t limit = std::clamp<int64_t>(meta.token_pos[t0 + r] + 1 - j0, 0, n);
          ops::relu_weighted_scores(limit, heads_, head_dim_, key_rows, head_dim_, q_t + r * heads_,
                                    queries, w + (t0 + r) * heads_, scores + r * keys + j0);
        }
        continue;
      }
      ops::transpose(n, head_dim_, key_rows, head_dim_, key_t, kTileKeys);
      ops::gemm(queries, n, head_dim_, q + t0 * qw, head_dim_, key_t, kTileKeys, dots, kTileKeys,
                false);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t limit = std::clamp<int64_t>(meta.token_pos[t0 + r] + 1 - j0, 0, n);
        const float* wr = w + (t0 + r) * heads_;
        float* out = scores + r * keys + j0;
        // Heads outer, keys inner: contiguous and vectorized. Each key's sum still runs over
        // the heads in order, so the scores are those of a per-key loop, bit for bit.
        std::fill(out, out + limit, 0.0f);
        for (int64_t h = 0; h < heads_; ++h) {
          const float* d = dots + (r * heads_ + h) * kTileKeys;
          const float wh = wr[h];
          for (int64_t i = 0; i < limit; ++i) out[i] += wh * std::max(0.0f, d[i]);
        }
      }
    }
  });
  tensor::parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      auto& sel = selected[static_cast<size_t>(t0 + r)];
      sel.resize(static_cast<size_t>(topk_));
      ops::topk_ascending(scores + r * keys, meta.token_pos[t0 + r] + 1, topk_, sel.data());
    }
  });
}

}  // namespace handoff::model
