#include "handoff/model/indexer.h"

#include <algorithm>
#include <cstring>

#include "handoff/ops/vector_ops.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::model {

Indexer::Indexer(const ModelConfig& config, const WeightLoader& weights, const std::string& prefix)
    : heads_(config.index_n_heads),
      head_dim_(config.index_head_dim),
      rope_dim_(config.qk_rope_head_dim),
      topk_(config.index_topk),
      interleaved_(config.indexer_rope_interleave),
      scale_(static_cast<float>(config.indexer_scale())) {
  const int64_t d = config.hidden_size;
  // Checked: the product sizes the weight (the config bounds both factors).
  wq_b_ = weights.linear(prefix + "wq_b.weight",
                         {tensor::shape_numel({heads_, head_dim_}), config.q_lora_rank});
  wk_ = weights.linear(prefix + "wk.weight", {head_dim_, d});
  // The updated reference keeps weights_proj in fp32 (MODEL_SPEC §5).
  weights_proj_ = weights.linear_f32(prefix + "weights_proj.weight", {heads_, d});
  k_norm_weight_ = weights.f32(prefix + "k_norm.weight", {head_dim_});
  k_norm_bias_ = weights.f32(prefix + "k_norm.bias", {head_dim_});
}

void Indexer::forward(const float* x, const float* qr, const StepMeta& meta, const Rope& rope,
                      cache::PagedCache& cache, int64_t cache_layer,
                      std::vector<std::vector<int32_t>>& selected) {
  const int64_t t_count = meta.num_tokens();
  const int64_t qw = heads_ * head_dim_;
  float* q = scratch_.get(0, static_cast<size_t>(t_count * qw));
  float* k = scratch_.get(1, static_cast<size_t>(t_count * head_dim_));
  float* w = scratch_.get(2, static_cast<size_t>(t_count * heads_));
  wq_b_.forward(qr, t_count, q);
  wk_.forward(x, t_count, k);
  weights_proj_.forward(x, t_count, w);
  ops::layer_norm(k, k_norm_weight_.data<float>(), k_norm_bias_.data<float>(), 1e-6f, t_count,
                  head_dim_, k);
  const int64_t pairs = rope_dim_ / 2;
  float* cs = scratch_.get(3, static_cast<size_t>(2 * pairs));
  for (int64_t t = 0; t < t_count; ++t) {
    rope.cos_sin(meta.token_pos[t], cs, cs + pairs);
    ops::rope(q + t * qw, heads_, head_dim_, rope_dim_, cs, cs + pairs, interleaved_);
    ops::rope(k + t * head_dim_, 1, head_dim_, rope_dim_, cs, cs + pairs, interleaved_);
    for (int64_t h = 0; h < heads_; ++h) w[t * heads_ + h] *= scale_;
    std::memcpy(cache.index_key(cache_layer, meta.token_slot[t]), k + t * head_dim_,
                static_cast<size_t>(head_dim_) * sizeof(float));
  }

  selected.resize(static_cast<size_t>(t_count));
  for (int64_t t = 0; t < t_count; ++t) {
    const int64_t keys = meta.token_pos[t] + 1;
    auto& sel = selected[static_cast<size_t>(t)];
    sel.clear();
    if (keys <= topk_) continue;  // every causal key is kept: DSA equals dense here
    const auto& seq = meta.sequences[static_cast<size_t>(meta.token_seq[t])];
    float* scores = scratch_.get(4, static_cast<size_t>(keys));
    const float* qt = q + t * qw;
    const float* wt = w + t * heads_;
    tensor::parallel_for(keys, 64, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const float* kj = cache.index_key(cache_layer, seq.key_slots[static_cast<size_t>(j)]);
        float s = 0.0f;
        for (int64_t h = 0; h < heads_; ++h)
          s += wt[h] * std::max(0.0f, ops::dot(qt + h * head_dim_, kj, head_dim_));
        scores[j] = s;
      }
    });
    sel.resize(static_cast<size_t>(topk_));
    ops::topk(scores, keys, topk_, sel.data());
    std::sort(sel.begin(), sel.end());
  }
}

}  // namespace handoff::model
