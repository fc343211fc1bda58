#include "handoff/model/decoder_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "handoff/ops/vector_ops.h"

namespace handoff::model {

DecoderLayer::DecoderLayer(const ModelConfig& config, const WeightLoader& weights, int64_t layer,
                           int64_t cache_layer)
    : layer_(layer),
      cache_layer_(cache_layer),
      hidden_size_(config.hidden_size),
      eps_(static_cast<float>(config.rms_norm_eps)) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  input_norm_ = weights.f32(p + "input_layernorm.weight", {hidden_size_});
  post_norm_ = weights.f32(p + "post_attention_layernorm.weight", {hidden_size_});
  attention_ = std::make_unique<MlaAttention>(config, weights, layer,
                                              HeadRange{0, config.num_attention_heads});
  if (config.is_moe_layer(layer)) {
    moe_ = std::make_unique<Moe>(config, weights, layer,
                                 ExpertRange{0, config.n_routed_experts}, true);
  } else {
    mlp_ = std::make_unique<Mlp>(weights, p + "mlp.", hidden_size_, config.intermediate_size);
  }
}

void DecoderLayer::forward(float* hidden, float* residual, bool first, const StepMeta& meta,
                           cache::PagedCache& cache, StepTrace* trace) {
  const int64_t t_count = meta.num_tokens();
  const size_t n = static_cast<size_t>(t_count * hidden_size_);
  float* normed = scratch_.get(0, n);
  if (first) {
    std::memcpy(residual, hidden, n * sizeof(float));
    ops::rms_norm(residual, input_norm_.data<float>(), eps_, t_count, hidden_size_, normed);
  } else {
    ops::add_rms_norm(residual, hidden, input_norm_.data<float>(), eps_, t_count, hidden_size_,
                      normed);
  }
  attention_->forward(normed, meta, cache, cache_layer_, trace, layer_, hidden);
  ops::add_rms_norm(residual, hidden, post_norm_.data<float>(), eps_, t_count, hidden_size_,
                    normed);
  if (moe_) {
    moe_->route(normed, t_count, routing_);
    if (trace != nullptr && !trace->experts.empty()) {
      auto& rows = trace->experts[static_cast<size_t>(layer_)];
      rows.resize(static_cast<size_t>(t_count));
      const int64_t k = moe_->top_k();
      for (int64_t t = 0; t < t_count; ++t) {
        auto& row = rows[static_cast<size_t>(t)];
        row.assign(routing_.experts.begin() + t * k, routing_.experts.begin() + (t + 1) * k);
        std::sort(row.begin(), row.end());
      }
    }
    moe_->forward(normed, t_count, routing_, hidden);
  } else {
    float* tmp = scratch_.get(1, static_cast<size_t>(t_count * 3 * mlp_->intermediate()));
    mlp_->forward(normed, t_count, hidden, tmp);
  }
}

}  // namespace handoff::model
