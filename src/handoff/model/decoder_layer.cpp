#include "handoff/model/decoder_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "handoff/ops/vector_ops.h"
#include "handoff/parallel/scopes.h"
#include "handoff/parallel/token_layout.h"

namespace handoff::model {

using parallel::Layout;
using parallel::MoeMode;

DecoderLayer::DecoderLayer(const ModelConfig& config, const WeightLoader& weights,
                           const parallel::LayerPlan& plan, TensorParallelRank tp,
                           int64_t cache_layer, LayerScratch& scratch)
    : plan_(plan),
      tp_(tp),
      cache_layer_(cache_layer),
      hidden_size_(config.hidden_size),
      eps_(static_cast<float>(config.rms_norm_eps)),
      scratch_(scratch.layer) {
  const int64_t layer = plan.index;
  const std::string p = fmt::format("model.layers.{}.", layer);
  input_norm_ = weights.f32(p + "input_layernorm.weight", {hidden_size_});
  post_norm_ = weights.f32(p + "post_attention_layernorm.weight", {hidden_size_});
  const int64_t heads = config.num_attention_heads / tp.size;
  attention_ = std::make_unique<MlaAttention>(config, weights, layer,
                                              HeadRange{tp.rank * heads, heads}, scratch);
  if (plan.moe) {
    const int64_t experts = config.n_routed_experts / tp.size;
    const int64_t shared = config.moe_intermediate_size * config.n_shared_experts / tp.size;
    moe_ = std::make_unique<Moe>(config, weights, layer, ExpertRange{tp.rank * experts, experts},
                                 scratch.moe, tp.rank * shared, shared);
    top_k_ = moe_->top_k();
  } else {
    const int64_t inter = config.intermediate_size / tp.size;
    mlp_ = std::make_unique<Mlp>(weights, p + "mlp.", hidden_size_, config.intermediate_size,
                                 tp.rank * inter, inter);
  }
}

void DecoderLayer::forward(Activations& io, const StepMeta& meta, cache::PagedCache& cache,
                           StepTrace* trace) {
  if (tp_.comm != nullptr) tp_.comm->set_scope(parallel::layer_scope(plan_.index));
  if (plan_.sp) {
    forward_sequence_parallel(io, meta, cache, trace);
  } else {
    forward_full(io, meta, cache, trace);
  }
}

void DecoderLayer::record_experts(const Routing& routing, int64_t rows, StepTrace* trace) const {
  if (trace == nullptr || trace->experts.empty()) return;
  auto& out = trace->experts[static_cast<size_t>(plan_.index)];
  out.resize(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) {
    auto& row = out[static_cast<size_t>(t)];
    row.assign(routing.experts.begin() + t * top_k_, routing.experts.begin() + (t + 1) * top_k_);
    std::sort(row.begin(), row.end());
  }
}

void DecoderLayer::moe_expert_parallel(const float* x_shard, int64_t n, float* out,
                                       StepTrace* trace) {
  const int tp = tp_.size;
  const int64_t s = (n + tp - 1) / tp;
  const int64_t d = hidden_size_;
  const int64_t width = d + 2 * top_k_;
  moe_->route(x_shard, s, routing_);
  // Rows and their routing travel together: [x | expert ids | weights], ids exact as floats.
  float* packed = scratch_.get(3, static_cast<size_t>(s * width));
  for (int64_t r = 0; r < s; ++r) {
    float* row = packed + r * width;
    std::memcpy(row, x_shard + r * d, static_cast<size_t>(d) * sizeof(float));
    for (int64_t k = 0; k < top_k_; ++k) {
      row[d + k] = static_cast<float>(routing_.experts[static_cast<size_t>(r * top_k_ + k)]);
      row[d + top_k_ + k] = routing_.weights[static_cast<size_t>(r * top_k_ + k)];
    }
  }
  float* gathered = scratch_.get(4, static_cast<size_t>(tp * s * width));
  tp_.comm->all_gather(comm::Group::kTp, packed, gathered, s * width);
  float* x_all = scratch_.get(5, static_cast<size_t>(n * d));
  routing_all_.experts.resize(static_cast<size_t>(n * top_k_));
  routing_all_.weights.resize(static_cast<size_t>(n * top_k_));
  for (int64_t r = 0; r < n; ++r) {  // padding rows (r >= n) are dropped here
    const float* row = gathered + r * width;
    std::memcpy(x_all + r * d, row, static_cast<size_t>(d) * sizeof(float));
    for (int64_t k = 0; k < top_k_; ++k) {
      routing_all_.experts[static_cast<size_t>(r * top_k_ + k)] = static_cast<int32_t>(row[d + k]);
      routing_all_.weights[static_cast<size_t>(r * top_k_ + k)] = row[d + top_k_ + k];
    }
  }
  record_experts(routing_all_, n, trace);
  moe_->forward(x_all, n, routing_all_, out);
  std::memset(out + n * d, 0, static_cast<size_t>((tp * s - n) * d) * sizeof(float));
}

void DecoderLayer::forward_sequence_parallel(Activations& io, const StepMeta& meta,
                                             cache::PagedCache& cache, StepTrace* trace) {
  const int tp = tp_.size;
  const int64_t n = meta.num_tokens();
  const int64_t s = (n + tp - 1) / tp;
  const int64_t d = hidden_size_;
  float* normed_all = scratch_.get(0, static_cast<size_t>(tp * s * d));
  float* normed_shard = scratch_.get(1, static_cast<size_t>(s * d));
  float* partial = scratch_.get(2, static_cast<size_t>(tp * s * d));
  if (io.layout == Layout::kShard) {
    ops::add_rms_norm(io.residual, io.hidden, input_norm_.data<float>(), eps_, s, d, normed_shard);
    tp_.comm->all_gather(comm::Group::kTp, normed_shard, normed_all, s * d);
  } else {
    // Full input (first SP layer after a full boundary): norm every row, no all-gather, then keep
    // only this rank's rows of the residual — a local chunk, no communication.
    ops::add_rms_norm(io.residual, io.hidden, input_norm_.data<float>(), eps_, n, d, normed_all);
    parallel::keep_own_rows(io.residual, n, d, tp_.rank, tp);
  }
  attention_->forward(normed_all, meta, cache, cache_layer_, trace, plan_.index, partial);
  std::memset(partial + n * d, 0, static_cast<size_t>((tp * s - n) * d) * sizeof(float));
  tp_.comm->reduce_scatter(comm::Group::kTp, partial, io.hidden, s * d);
  ops::add_rms_norm(io.residual, io.hidden, post_norm_.data<float>(), eps_, s, d, normed_shard);
  moe_expert_parallel(normed_shard, n, partial, trace);
  tp_.comm->reduce_scatter(comm::Group::kTp, partial, io.hidden, s * d);
  io.layout = Layout::kShard;
}

void DecoderLayer::forward_full(Activations& io, const StepMeta& meta, cache::PagedCache& cache,
                                StepTrace* trace) {
  const int tp = tp_.size;
  const int64_t n = meta.num_tokens();
  const int64_t d = hidden_size_;
  if (io.layout == Layout::kShard) parallel::restore_full(io.hidden, io.residual, n, d, *tp_.comm);
  io.layout = Layout::kFull;
  float* normed = scratch_.get(0, static_cast<size_t>(n * d));
  ops::add_rms_norm(io.residual, io.hidden, input_norm_.data<float>(), eps_, n, d, normed);
  attention_->forward(normed, meta, cache, cache_layer_, trace, plan_.index, io.hidden);
  if (plan_.o_proj_reduce) tp_.comm->all_reduce(comm::Group::kTp, io.hidden, n * d);
  ops::add_rms_norm(io.residual, io.hidden, post_norm_.data<float>(), eps_, n, d, normed);
  switch (plan_.moe_mode) {
    case MoeMode::kDense: {
      float* tmp = scratch_.get(1, static_cast<size_t>(n * 3 * mlp_->intermediate()));
      mlp_->forward(normed, n, io.hidden, tmp);
      if (tp > 1) tp_.comm->all_reduce(comm::Group::kTp, io.hidden, n * d);
      break;
    }
    case MoeMode::kReplicated:
      moe_->route_and_forward(normed, n, routing_, io.hidden);
      record_experts(routing_, n, trace);
      if (tp > 1) tp_.comm->all_reduce(comm::Group::kTp, io.hidden, n * d);
      break;
    case MoeMode::kChunked: {
      // Upstream's PP guard: the MoE takes a local chunk of the full rows, runs expert
      // parallelism on it and all-gathers the result back — SP in name only.
      const int64_t s = (n + tp - 1) / tp;
      float* chunk = scratch_.get(1, static_cast<size_t>(s * d));
      parallel::copy_own_rows(normed, n, d, tp_.rank, tp, chunk);
      float* partial = scratch_.get(2, static_cast<size_t>(tp * s * d));
      moe_expert_parallel(chunk, n, partial, trace);
      tp_.comm->reduce_scatter(comm::Group::kTp, partial, chunk, s * d);
      float* gathered = scratch_.get(6, static_cast<size_t>(tp * s * d));
      tp_.comm->all_gather(comm::Group::kTp, chunk, gathered, s * d);
      std::memcpy(io.hidden, gathered, static_cast<size_t>(n * d) * sizeof(float));
      break;
    }
    case MoeMode::kSequenceParallel:
      fail("layer {}: sequence-parallel MoE in a non-SP layer", plan_.index);
  }
}

}  // namespace handoff::model
