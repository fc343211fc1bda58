#include "handoff/model/mla_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "handoff/ops/gemm.h"
#include "handoff/ops/linear.h"
#include "handoff/ops/vector_ops.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::model {

using tensor::DType;
using tensor::Tensor;

namespace {

// Whether for_each_head runs the heads over the threads: on the small-M kernels (decode).
bool heads_in_parallel(const std::vector<ops::LinearWeight>& per_head, int64_t rows) {
  return !per_head.empty() && per_head.front().small_m(rows);
}

// body(h) for h in [0, heads). The per-head W_UK / W_UV products are tiny (kv_rank × nope:
// 32 KiB at bf16); at decode a parallel region per head cost more than the head's work, so the
// heads share one region, each head's product on one thread. Prefill's oneDNN products run one
// after another (oneDNN must not be called from inside a region).
template <typename Body>
void for_each_head(const std::vector<ops::LinearWeight>& per_head, int64_t rows, const Body& body) {
  const auto heads = static_cast<int64_t>(per_head.size());
  if (heads_in_parallel(per_head, rows)) {
    tensor::parallel_for(heads, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) body(h);
    });
  } else {
    for (int64_t h = 0; h < heads; ++h) body(h);
  }
}

}  // namespace

bool MlaAttention::uses_per_head_form(const ModelConfig& config, int64_t min_tokens) {
  return min_tokens > 0 && (!config.has_indexer || config.index_topk >= min_tokens);
}

MlaAttention::MlaAttention(const ModelConfig& config, const WeightLoader& weights, int64_t layer,
                           HeadRange heads, LayerScratch& scratch)
    : hidden_(config.hidden_size),
      heads_(heads.count),
      nope_(config.qk_nope_head_dim),
      rope_dim_(config.qk_rope_head_dim),
      v_dim_(config.v_head_dim),
      kv_rank_(config.kv_lora_rank),
      q_rank_(config.q_lora_rank),
      eps_(static_cast<float>(config.rms_norm_eps)),
      softmax_scale_(static_cast<float>(config.softmax_scale())),
      interleaved_(config.rope_interleave),
      rope_(config.rope_inv_freq()),
      per_head_min_tokens_(uses_per_head_form(config, weights.options().per_head_prefill_min_tokens)
                               ? weights.options().per_head_prefill_min_tokens
                               : 0),
      scratch_(scratch.attention) {
  const std::string p = fmt::format("model.layers.{}.self_attn.", layer);
  const int64_t all_heads = config.num_attention_heads;
  const int64_t qk = nope_ + rope_dim_;
  // Checked (shape_numel): the config bounds heads and dims, but these products size the
  // weights, so an overflow would be an out-of-bounds read rather than a wrong number.
  const int64_t q_rows = tensor::shape_numel({all_heads, qk});
  const int64_t o_cols = tensor::shape_numel({all_heads, v_dim_});
  const int64_t kv_b_rows = tensor::shape_numel({all_heads, nope_ + v_dim_});
  // q_a and kv_a read the same x: one weight, so a step makes one pass over x and one parallel
  // region for both (and their 64-row blocks share out over the threads as one set).
  const int64_t kv_width = kv_rank_ + rope_dim_;
  qkv_a_ = weights.make_linear(
      {weights.matrix_slice(p + "q_a_proj.weight", {q_rank_, hidden_}, 0, 0, q_rank_),
       weights.matrix_slice(p + "kv_a_proj_with_mqa.weight", {kv_width, hidden_}, 0, 0, kv_width)});
  q_a_norm_ = weights.f32(p + "q_a_layernorm.weight", {q_rank_});
  kv_a_norm_ = weights.f32(p + "kv_a_layernorm.weight", {kv_rank_});

  q_b_ = weights.make_linear(weights.matrix_slice(p + "q_b_proj.weight", {q_rows, q_rank_}, 0,
                                                  heads.begin * qk, (heads.begin + heads_) * qk));
  o_proj_ = weights.make_linear(weights.matrix_slice(p + "o_proj.weight", {hidden_, o_cols}, 1,
                                                     heads.begin * v_dim_,
                                                     (heads.begin + heads_) * v_dim_));

  // kv_b_proj rows of head h: [W_UK[h] (nope rows); W_UV[h] (v rows)], each [.., kv_rank]; this
  // rank's heads only. All heads' W_UK, then all W_UV: packed weights are carved one after
  // another, so each set is one stretch of memory and a thread's heads stream as one run (the
  // prefetchers carry on from head to head instead of starting again every 32 KiB).
  const int64_t head_rows = nope_ + v_dim_;
  const std::string kv_b_name = p + "kv_b_proj.weight";
  // W_UK[h]ᵀ from head h's nope rows [nope, kv_rank] (f32, contiguous).
  auto dense_uk_t = [&](const float* rows) {
    Tensor uk_t = Tensor::empty({kv_rank_, nope_}, DType::kF32);
    for (int64_t n = 0; n < nope_; ++n)
      for (int64_t r = 0; r < kv_rank_; ++r)
        uk_t.data<float>()[r * nope_ + n] = rows[n * kv_rank_ + r];
    return weights.make_linear(uk_t);
  };
  if (weights.checkpoint().is_fp8(kv_b_name)) {
    // An FP8 kv_b stays FP8 (the reference and vLLM dequantise it to bf16 first: twice the
    // bytes a decode step reads for it). Each head's part keeps the whole matrix's blocks;
    // W_UK[h]ᵀ is its transpose on the transposed blocks, so no value is rounded. Its K
    // (qk_nope) is padded to whole blocks, though: when that holds more bytes than the compute
    // dtype would (qk_nope 64 in a 128-column block), it is dequantised as the reference does.
    const tensor::Fp8Blocks kv_b = weights.fp8(kv_b_name, {kv_b_rows, kv_rank_});
    const int64_t block = kv_b.block_rows;  // W_UK[h]ᵀ's column blocks
    for (int64_t h = 0; h < heads_; ++h) {
      const int64_t r0 = (heads.begin + h) * head_rows;
      const tensor::Fp8Blocks uk = kv_b.slice(0, r0, r0 + nope_);
      if (keeps_uk_t_fp8(r0, nope_, block,
                         static_cast<int64_t>(tensor::dtype_size(weights.dtype()))))
        w_uk_t_.push_back(weights.make_linear(uk.transposed()));
      else
        w_uk_t_.push_back(dense_uk_t(uk.dequantize().data<float>()));
      if (per_head_min_tokens_ > 0) w_uk_.push_back(weights.make_linear(uk));
    }
    for (int64_t h = 0; h < heads_; ++h) {
      const int64_t r0 = (heads.begin + h) * head_rows + nope_;
      w_uv_.push_back(weights.make_linear(kv_b.slice(0, r0, r0 + v_dim_)));
    }
  } else {
    const Tensor kv_b =
        weights.f32_slice(kv_b_name, {kv_b_rows, kv_rank_}, 0, heads.begin * head_rows,
                          (heads.begin + heads_) * head_rows);
    const Tensor kv_b_c = kv_b.is_contiguous() ? kv_b : kv_b.contiguous();
    // Head h's rows [first, first + rows) of kv_b, as a weight of their own.
    auto head_part = [&](int64_t h, int64_t first, int64_t rows) {
      Tensor part = Tensor::empty({rows, kv_rank_}, DType::kF32);
      std::memcpy(part.data<float>(), kv_b_c.data<float>() + (h * head_rows + first) * kv_rank_,
                  static_cast<size_t>(rows * kv_rank_) * sizeof(float));
      return weights.make_linear(part);
    };
    for (int64_t h = 0; h < heads_; ++h)
      w_uk_t_.push_back(dense_uk_t(kv_b_c.data<float>() + h * head_rows * kv_rank_));
    for (int64_t h = 0; h < heads_; ++h) w_uv_.push_back(head_part(h, nope_, v_dim_));
    if (per_head_min_tokens_ > 0)
      for (int64_t h = 0; h < heads_; ++h) w_uk_.push_back(head_part(h, 0, nope_));
  }
  if (config.has_indexer)
    indexer_ = std::make_unique<Indexer>(config, weights, p + "indexer.", scratch.indexer);
}

bool MlaAttention::keeps_uk_t_fp8(int64_t row0, int64_t nope, int64_t block, int64_t dense_elem) {
  return ops::LinearWeight::fp8_packed_row_bytes(row0, nope, block) < nope * dense_elem;
}

void MlaAttention::forward(const float* x, const StepMeta& meta, cache::PagedCache& cache,
                           int64_t cache_layer, StepTrace* trace, int64_t trace_layer, float* out) {
  const int64_t t_count = meta.num_tokens();
  const int64_t qk = nope_ + rope_dim_;
  const int64_t q_width = heads_ * qk;
  float* qr = scratch_.get(0, static_cast<size_t>(t_count * q_rank_));
  float* q = scratch_.get(1, static_cast<size_t>(t_count * q_width));
  float* q_abs = scratch_.get(3, static_cast<size_t>(t_count * heads_ * kv_rank_));
  float* latent = scratch_.get(4, static_cast<size_t>(t_count * heads_ * kv_rank_));
  float* o = scratch_.get(5, static_cast<size_t>(t_count * heads_ * v_dim_));
  const int64_t pairs = rope_dim_ / 2;
  float* cs = scratch_.get(6, static_cast<size_t>(2 * pairs));

  // Row t of qkv: [q_a (q_rank) | kv_a (c_kv, k_pe)]. q_a's norm writes qr (the query's and the
  // indexer's input); c_kv and k_pe are normed and roped in place and cached from there.
  const int64_t kv_width = kv_rank_ + rope_dim_;
  const int64_t qkv_width = q_rank_ + kv_width;
  float* qkv = scratch_.get(2, static_cast<size_t>(t_count * qkv_width));
  // The products of x, then those of qr, each set in one parallel region: the indexer's own
  // (its 64-row key and 8-row head weights would each run on one thread alone) beside ours.
  of_x_.assign({{&qkv_a_, x, t_count, qkv}});
  of_qr_.assign({{&q_b_, qr, t_count, q}});
  if (indexer_) indexer_->add_products(meta, x, qr, of_x_, of_qr_);
  ops::LinearWeight::forward_group(of_x_);
  for (int64_t t = 0; t < t_count; ++t)
    ops::rms_norm(qkv + t * qkv_width, q_a_norm_.data<float>(), eps_, 1, q_rank_, qr + t * q_rank_);
  ops::LinearWeight::forward_group(of_qr_);
  for (int64_t t = 0; t < t_count; ++t) {
    float* kvt = qkv + t * qkv_width + q_rank_;
    ops::rms_norm(kvt, kv_a_norm_.data<float>(), eps_, 1, kv_rank_, kvt);
    rope_.cos_sin(meta.token_pos[t], cs, cs + pairs);
    ops::rope(kvt + kv_rank_, 1, rope_dim_, rope_dim_, cs, cs + pairs, interleaved_);
    ops::rope(q + t * q_width + nope_, heads_, qk, rope_dim_, cs, cs + pairs, interleaved_);
    cache.write_latent(cache_layer, meta.token_slot[t], kvt, kvt + kv_rank_);
  }

  if (indexer_) {
    indexer_->forward(meta, rope_, cache, cache_layer, selected_);
  } else {
    selected_.assign(static_cast<size_t>(t_count), {});
  }
  if (trace != nullptr && !trace->indexer_topk.empty()) {
    auto& rows = trace->indexer_topk[static_cast<size_t>(trace_layer)];
    rows.resize(static_cast<size_t>(t_count));
    for (int64_t t = 0; t < t_count; ++t) {
      auto& row = rows[static_cast<size_t>(t)];
      row = selected_[static_cast<size_t>(t)];
      if (row.empty())
        for (int32_t j = 0; j <= meta.token_pos[t]; ++j) row.push_back(j);
    }
  }

  // A sequence's leading rows that attend to every earlier key (no selection) take the
  // per-head form when there are enough of them to pay for expanding their keys. The others
  // lie in [lo, hi): a served step puts running sequences' decode rows first and new prompts'
  // chunks last, so the span usually leaves the per-head rows out of the absorbed products.
  per_head_count_.assign(meta.sequences.size(), 0);
  int64_t lo = t_count, hi = 0;
  for (size_t s = 0; s < meta.sequences.size(); ++s) {
    const auto& seq = meta.sequences[s];
    int64_t n = 0;
    if (per_head_min_tokens_ > 0)
      while (n < seq.num_tokens && selected_[static_cast<size_t>(seq.first_token + n)].empty()) ++n;
    if (n < per_head_min_tokens_) n = 0;
    per_head_count_[s] = n;
    if (n < seq.num_tokens) {
      lo = std::min(lo, seq.first_token + n);
      hi = std::max(hi, seq.first_token + seq.num_tokens);
    }
  }

  if (lo < hi) {
    const int64_t rows = hi - lo;
    const float* q_lo = q + lo * q_width;
    float* q_abs_lo = q_abs + lo * heads_ * kv_rank_;
    float* latent_lo = latent + lo * heads_ * kv_rank_;
    float* o_lo = o + lo * heads_ * v_dim_;
    // Absorb W_UK into the query: q_abs[t, h] = W_UK[h]ᵀ q_nope[t, h].
    for_each_head(w_uk_t_, rows, [&](int64_t h) {
      w_uk_t_[static_cast<size_t>(h)].forward(q_lo + h * qk, rows, q_abs_lo + h * kv_rank_, q_width,
                                              heads_ * kv_rank_);
    });
    attend(meta, cache, cache_layer, q, q_abs);
    // At decode each head's merge runs in the W_UV region, beside its product: serial after
    // attention it was ~5 us a layer on the 2-core Zen 5, mostly reading the other core's
    // accumulators. Prefill merges per token over the threads first (its heads run one by one).
    const bool merge_per_head = heads_in_parallel(w_uv_, rows);
    if (!merge_per_head) {
      tensor::parallel_for(rows, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = lo + t0; t < lo + t1; ++t)
          for (int64_t h = 0; h < heads_; ++h) merge(t, h, latent);
      });
    }
    for_each_head(w_uv_, rows, [&](int64_t h) {
      if (merge_per_head)
        for (int64_t t = lo; t < hi; ++t) merge(t, h, latent);
      w_uv_[static_cast<size_t>(h)].forward(latent_lo + h * kv_rank_, rows, o_lo + h * v_dim_,
                                            heads_ * kv_rank_, heads_ * v_dim_);
    });
  }
  if (lo > 0 || hi < t_count) {
    // The absorbed form's work-item buffers at the size all rows would need: the profiling
    // pass (one long prompt, all per head) must still grow them to their peak, so that a later
    // step of as many absorbed rows does not allocate.
    int64_t items = 0;
    for (int64_t t = 0; t < t_count; ++t) items += segments(meta, t);
    item_buffers(items);
  }
  // After the absorbed rows' W_UV, which wrote the per-head rows inside [lo, hi) from empty
  // latents.
  for (size_t s = 0; s < meta.sequences.size(); ++s)
    if (per_head_count_[s] > 0)
      attend_per_head(meta.sequences[s], per_head_count_[s], cache, cache_layer, q, o);
  o_proj_.forward(o, t_count, out);
}

void MlaAttention::attend_per_head(const StepMeta::Sequence& seq, int64_t n,
                                   cache::PagedCache& cache, int64_t cache_layer, const float* q,
                                   float* o) {
  const int64_t pos0 = seq.start_pos;
  const int64_t qk = nope_ + rope_dim_;
  const int64_t q_width = heads_ * qk;
  const int64_t width = kv_rank_ + rope_dim_;  // a key row: c_kv then k_pe
  const int64_t head_rows = nope_ + v_dim_;
  const int64_t ld_kv = heads_ * head_rows;  // expanded key row: per head [k_nope | v]
  const int64_t ldo = heads_ * v_dim_;
  const int64_t keys = pos0 + n;  // the last row attends to all of them
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  float* rows = scratch_.get(11, static_cast<size_t>(kExpandKeys * width));
  float* kv = scratch_.get(12, static_cast<size_t>(kExpandKeys * ld_kv));
  float* keys_t = scratch_.get(13, static_cast<size_t>(heads_ * qk * kExpandKeys));
  float* run_max = scratch_.get(14, static_cast<size_t>(n * heads_));
  float* run_sum = scratch_.get(15, static_cast<size_t>(n * heads_));
  const float* qs = q + seq.first_token * q_width;
  float* os = o + seq.first_token * ldo;
  std::fill(run_max, run_max + n * heads_, -std::numeric_limits<float>::infinity());
  std::fill(run_sum, run_sum + n * heads_, 0.0f);
  for (int64_t r = 0; r < n; ++r) std::fill(os + r * ldo, os + r * ldo + ldo, 0.0f);

  for (int64_t c0 = 0; c0 < keys; c0 += kExpandKeys) {
    const int64_t nc = std::min(kExpandKeys, keys - c0);
    tensor::parallel_for(nc, 16, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j)
        cache.read_latent(cache_layer, seq.key_slots[static_cast<size_t>(c0 + j)],
                          rows + j * width);
    });
    // k_nope[j, h] = W_UK[h] c_kv[j] and v[j, h] = W_UV[h] c_kv[j], all heads in one region.
    expand_.clear();
    for (int64_t h = 0; h < heads_; ++h) {
      expand_.push_back(
          {&w_uk_[static_cast<size_t>(h)], rows, nc, kv + h * head_rows, width, ld_kv});
      expand_.push_back(
          {&w_uv_[static_cast<size_t>(h)], rows, nc, kv + h * head_rows + nope_, width, ld_kv});
    }
    ops::LinearWeight::forward_group(expand_);
    // Head h's keys transposed, [k_nope; k_pe] × nc, so a tile's scores are one product.
    tensor::parallel_for(heads_, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        float* kt = keys_t + h * qk * kExpandKeys;
        ops::transpose(nc, nope_, kv + h * head_rows, ld_kv, kt, kExpandKeys);
        ops::transpose(nc, rope_dim_, rows + kv_rank_, width, kt + nope_ * kExpandKeys,
                       kExpandKeys);
      }
    });
    tensor::parallel_for(heads_ * blocks, 1, [&](int64_t i0, int64_t i1) {
      float* scores = Scratch::thread_local_buffer(5, static_cast<size_t>(kQueryBlock * kTileKeys));
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t h = item / blocks;
        const int64_t b0 = item % blocks * kQueryBlock;
        const int64_t nb = std::min(kQueryBlock, n - b0);
        const int64_t last_pos = pos0 + b0 + nb - 1;
        for (int64_t j0 = c0; j0 < c0 + nc && j0 <= last_pos; j0 += kTileKeys) {
          const int64_t nk = std::min(kTileKeys, c0 + nc - j0);
          ops::gemm(nb, nk, qk, qs + b0 * q_width + h * qk, q_width,
                    keys_t + h * qk * kExpandKeys + (j0 - c0), kExpandKeys, scores, kTileKeys,
                    false);
          for (int64_t r = 0; r < nb; ++r) {
            float* p = scores + r * kTileKeys;
            // Causal: row b0 + r sees keys up to its own position.
            const int64_t visible = std::min(nk, pos0 + b0 + r - j0 + 1);
            if (visible <= 0) {
              std::fill(p, p + nk, 0.0f);  // adds exactly nothing to the row's values
              continue;
            }
            float& m = run_max[(b0 + r) * heads_ + h];
            float& l = run_sum[(b0 + r) * heads_ + h];
            const float new_max = std::max(m, ops::scale_max(p, visible, softmax_scale_));
            const float sum = ops::exp_sum(p, visible, new_max);
            std::fill(p + visible, p + nk, 0.0f);
            if (m != new_max && l != 0.0f) {
              const float correction = std::exp(m - new_max);
              l *= correction;
              float* out = os + (b0 + r) * ldo + h * v_dim_;
              for (int64_t i = 0; i < v_dim_; ++i) out[i] *= correction;
            }
            l += sum;
            m = new_max;
          }
          ops::gemm(nb, v_dim_, nk, scores, kTileKeys,
                    kv + (j0 - c0) * ld_kv + h * head_rows + nope_, ld_kv,
                    os + b0 * ldo + h * v_dim_, ldo, true);
        }
      }
    });
  }
  tensor::parallel_for(n, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t r = t0; r < t1; ++r)
      for (int64_t h = 0; h < heads_; ++h) {
        const float inv = 1.0f / run_sum[r * heads_ + h];
        float* out = os + r * ldo + h * v_dim_;
        for (int64_t i = 0; i < v_dim_; ++i) out[i] *= inv;
      }
  });
}

void MlaAttention::attend(const StepMeta& meta, cache::PagedCache& cache, int64_t cache_layer,
                          const float* q, const float* q_abs) {
  const int64_t t_count = meta.num_tokens();
  const int64_t qk = nope_ + rope_dim_;
  const int64_t width = kv_rank_ + rope_dim_;  // a key row: c_kv then k_pe
  // Work items are (token, segment of its keys), so one decode token still spreads over the
  // threads; each item keeps an online softmax's running max, sum and weighted latent per head,
  // merged per token below in segment order. Segments are fixed by key position and count, so
  // results do not depend on the thread count or on the rest of the batch.
  item_token_.clear();
  token_first_item_.resize(static_cast<size_t>(t_count) + 1);
  for (int64_t t = 0; t < t_count; ++t) {
    token_first_item_[static_cast<size_t>(t)] = static_cast<int64_t>(item_token_.size());
    const auto& owner = meta.sequences[static_cast<size_t>(meta.token_seq[t])];
    if (t - owner.first_token < per_head_count_[static_cast<size_t>(meta.token_seq[t])])
      continue;  // attend_per_head's (no items: merge leaves its latent zero)
    item_token_.insert(item_token_.end(), static_cast<size_t>(segments(meta, t)), t);
  }
  const auto items = static_cast<int64_t>(item_token_.size());
  token_first_item_[static_cast<size_t>(t_count)] = items;
  item_buffers(items);
  float* run_max = run_max_;
  float* run_sum = run_sum_;
  float* run_acc = run_acc_;

  // The query of head h against a key row is [W_UKᵀ q_nope (kv_rank); q_pe (rope)]; keys stay
  // rows, so scoresᵀ = rows · qcatᵀ transposes [n, heads], not [n, width] (each score's sum
  // runs over the same products in the same order either way). qcatᵀ is built straight from
  // q_abs and q: per item, through a copy, it was ~3.5 us, as much as a 64-key tile's scores
  // (bench-moe, Zen 5, docs/performance.md).
  const int64_t qcat_size = width * heads_;
  auto build_qcat_t = [&](int64_t t, float* qcat_t) {
    ops::transpose(heads_, kv_rank_, q_abs + t * heads_ * kv_rank_, kv_rank_, qcat_t, heads_);
    ops::transpose(heads_, rope_dim_, q + t * heads_ * qk + nope_, qk, qcat_t + kv_rank_ * heads_,
                   heads_);
  };
  // A decode step's tokens: every token's qcatᵀ once, before the region (inline for one token).
  // Its chunks are single items there, so a per-chunk memo rebuilt it for every item, 1 us each
  // (2-3 a thread and layer at depth 512, batch 1). Prefill chunks hold many items, and all
  // tokens' copies at once would be large: each chunk builds its tokens' as it meets them.
  float* qcat_all = nullptr;
  if (t_count <= ops::kDecodeRowsMax) {
    qcat_all = scratch_.get(10, static_cast<size_t>(t_count * qcat_size));
    tensor::parallel_for(t_count, 4, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) build_qcat_t(t, qcat_all + t * qcat_size);
    });
  }

  tensor::parallel_for(items, 1, [&](int64_t begin, int64_t end) {
    float* rows = Scratch::thread_local_buffer(1, static_cast<size_t>(kTileKeys * width));
    float* scores_t = Scratch::thread_local_buffer(2, static_cast<size_t>(kTileKeys * heads_));
    float* probs = Scratch::thread_local_buffer(3, static_cast<size_t>(heads_ * kTileKeys));
    float* qcat_own =
        qcat_all ? nullptr : Scratch::thread_local_buffer(4, static_cast<size_t>(qcat_size));
    int64_t qcat_own_token = -1;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item_token_[static_cast<size_t>(item)];
      const int64_t keys = key_count(meta, t), seg = segment_keys(keys);
      const int64_t k0 = (item - token_first_item_[static_cast<size_t>(t)]) * seg;
      const int64_t k1 = std::min(keys, k0 + seg);
      const auto& seq = meta.sequences[static_cast<size_t>(meta.token_seq[t])];
      const auto& sel = selected_[static_cast<size_t>(t)];
      const float* qcat_t = qcat_all ? qcat_all + t * qcat_size : qcat_own;
      if (!qcat_all && t != qcat_own_token) {
        build_qcat_t(t, qcat_own);
        qcat_own_token = t;
      }
      float* m = run_max + item * heads_;
      float* l = run_sum + item * heads_;
      float* acc = run_acc + item * heads_ * kv_rank_;
      std::fill(m, m + heads_, -std::numeric_limits<float>::infinity());
      std::fill(l, l + heads_, 0.0f);
      auto slot_of = [&](int64_t j) {
        const int64_t pos = sel.empty() ? j : sel[static_cast<size_t>(j)];
        return seq.key_slots[static_cast<size_t>(pos)];
      };
      // Rows are requested kPrefetchKeys ahead of their conversion, across tile boundaries.
      for (int64_t j = k0; j < std::min(k1, k0 + kPrefetchKeys); ++j)
        cache.prefetch_latent(cache_layer, slot_of(j));
      for (int64_t j0 = k0; j0 < k1; j0 += kTileKeys) {
        const int64_t n = std::min(kTileKeys, k1 - j0);
        for (int64_t i = 0; i < n; ++i) {
          if (j0 + i + kPrefetchKeys < k1)
            cache.prefetch_latent(cache_layer, slot_of(j0 + i + kPrefetchKeys));
          cache.read_latent(cache_layer, slot_of(j0 + i), rows + i * width);
        }
        ops::gemm(n, heads_, width, rows, width, qcat_t, heads_, scores_t, heads_, false);
        ops::transpose(n, heads_, scores_t, heads_, probs, kTileKeys);
        for (int64_t h = 0; h < heads_; ++h) {
          float* p = probs + h * kTileKeys;
          const float tile_max = ops::scale_max(p, n, softmax_scale_);
          const float new_max = std::max(m[h], tile_max);
          const float sum = ops::exp_sum(p, n, new_max);
          if (m[h] != new_max && l[h] != 0.0f) {
            const float correction = std::exp(m[h] - new_max);
            l[h] *= correction;
            for (int64_t r = 0; r < kv_rank_; ++r) acc[h * kv_rank_ + r] *= correction;
          }
          l[h] += sum;
          m[h] = new_max;
        }
        // Σ_i p[h, i] · c_kv[i]: the latent rows are the first kv_rank columns of `rows`. The
        // item's first tile starts the sums (no correction read acc: l was 0).
        ops::gemm(heads_, kv_rank_, n, probs, kTileKeys, rows, width, acc, kv_rank_, j0 > k0);
      }
    }
  });
}

void MlaAttention::merge(int64_t t, int64_t h, float* latent) const {
  const int64_t first = token_first_item_[static_cast<size_t>(t)];
  const int64_t last = token_first_item_[static_cast<size_t>(t) + 1];
  float top = -std::numeric_limits<float>::infinity();
  for (int64_t i = first; i < last; ++i) top = std::max(top, run_max_[i * heads_ + h]);
  float total = 0.0f;
  for (int64_t i = first; i < last; ++i)
    total += run_sum_[i * heads_ + h] * std::exp(run_max_[i * heads_ + h] - top);
  float* lat = latent + (t * heads_ + h) * kv_rank_;
  std::fill(lat, lat + kv_rank_, 0.0f);
  for (int64_t i = first; i < last; ++i) {
    const float weight = std::exp(run_max_[i * heads_ + h] - top) / total;
    ops::axpy(weight, run_acc_ + (i * heads_ + h) * kv_rank_, lat, kv_rank_);
  }
}

int64_t MlaAttention::segments(const StepMeta& meta, int64_t t) const {
  const int64_t keys = key_count(meta, t), seg = segment_keys(keys);
  return (keys + seg - 1) / seg;
}

void MlaAttention::item_buffers(int64_t items) {
  run_max_ = scratch_.get(7, static_cast<size_t>(items * heads_));
  run_sum_ = scratch_.get(8, static_cast<size_t>(items * heads_));
  run_acc_ = scratch_.get(9, static_cast<size_t>(items * heads_ * kv_rank_));
}

int64_t MlaAttention::segment_keys(int64_t keys) {
  const int64_t even = (keys + kMaxSegments - 1) / kMaxSegments;
  const int64_t whole_tiles = (even + kTileKeys - 1) / kTileKeys * kTileKeys;
  return std::clamp(whole_tiles, kTileKeys, kMaxSegmentKeys);
}

int64_t MlaAttention::key_count(const StepMeta& meta, int64_t t) const {
  const auto& sel = selected_[static_cast<size_t>(t)];
  return sel.empty() ? meta.token_pos[t] + 1 : static_cast<int64_t>(sel.size());
}

}  // namespace handoff::model
