#include "handoff/model/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "handoff/ops/linear.h"
#include "handoff/ops/vector_ops.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::model {

Moe::Moe(const ModelConfig& config, const WeightLoader& weights, int64_t layer, ExpertRange experts,
         Scratch& scratch, int64_t shared_begin, int64_t shared_count)
    : hidden_(config.hidden_size),
      n_experts_(config.n_routed_experts),
      top_k_(config.num_experts_per_tok),
      n_group_(config.n_group),
      topk_group_(config.topk_group),
      norm_topk_prob_(config.norm_topk_prob),
      routed_scale_(static_cast<float>(config.routed_scaling_factor)),
      range_(experts),
      scratch_(scratch),
      team_(static_cast<size_t>(experts.count) + 1) {
  const std::string p = fmt::format("model.layers.{}.mlp.", layer);
  gate_ = weights.linear_fp32_math(p + "gate.weight", {n_experts_, hidden_});
  const std::string bias_name = p + "gate.e_score_correction_bias";
  if (weights.checkpoint().has(bias_name)) bias_ = weights.f32(bias_name, {n_experts_});
  for (int64_t e = range_.begin; e < range_.begin + range_.count; ++e)
    experts_.emplace_back(weights, fmt::format("{}experts.{}.", p, e), hidden_,
                          config.moe_intermediate_size);
  if (config.n_shared_experts > 0) {
    shared_ =
        Mlp(weights, p + "shared_experts.", hidden_,
            config.moe_intermediate_size * config.n_shared_experts, shared_begin, shared_count);
    has_shared_ = true;
  }
  assigned_.resize(static_cast<size_t>(range_.count));
}

void Moe::route(const float* x, int64_t rows, Routing& routing) {
  float* logits = scratch_.get(0, static_cast<size_t>(rows * n_experts_));
  float* biased = scratch_.get(1, static_cast<size_t>(n_experts_));
  float* group_scores = scratch_.get(2, static_cast<size_t>(n_group_));
  gate_.forward(x, rows, logits);
  routing.experts.resize(static_cast<size_t>(rows * top_k_));
  routing.weights.resize(static_cast<size_t>(rows * top_k_));
  std::vector<int32_t>& order = routing.experts;  // written per row below
  const int64_t per_group = n_experts_ / n_group_;
  const float* bias = bias_.defined() ? bias_.data<float>() : nullptr;
  thread_local std::vector<int32_t> group_idx;
  group_idx.resize(static_cast<size_t>(std::max(topk_group_, n_group_)));
  for (int64_t r = 0; r < rows; ++r) {
    float* s = logits + r * n_experts_;
    for (int64_t e = 0; e < n_experts_; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-s[e]));
      biased[e] = s[e] + (bias ? bias[e] : 0.0f);
    }
    if (n_group_ > 1) {
      for (int64_t g = 0; g < n_group_; ++g) {
        const float* gs = biased + g * per_group;
        if (bias) {  // the reference's group score: sum of the two best biased scores
          float a = -std::numeric_limits<float>::infinity(), b = a;
          for (int64_t i = 0; i < per_group; ++i) {
            if (gs[i] > a) {
              b = a;
              a = gs[i];
            } else if (gs[i] > b) {
              b = gs[i];
            }
          }
          group_scores[g] = a + b;
        } else {
          group_scores[g] = *std::max_element(gs, gs + per_group);
        }
      }
      ops::topk(group_scores, n_group_, topk_group_, group_idx.data());
      for (int64_t g = 0; g < n_group_; ++g) {
        const bool kept = std::find(group_idx.begin(), group_idx.begin() + topk_group_, g) !=
                          group_idx.begin() + topk_group_;
        if (!kept)
          std::fill(biased + g * per_group, biased + (g + 1) * per_group,
                    -std::numeric_limits<float>::infinity());
      }
    }
    int32_t* idx = order.data() + r * top_k_;
    float* w = routing.weights.data() + r * top_k_;
    ops::topk(biased, n_experts_, top_k_, idx);
    float sum = 0.0f;
    for (int64_t k = 0; k < top_k_; ++k) {
      w[k] = s[idx[k]];
      sum += w[k];
    }
    for (int64_t k = 0; k < top_k_; ++k)
      w[k] = (norm_topk_prob_ ? w[k] / sum : w[k]) * routed_scale_;
  }
}

bool Moe::decode_sized(int64_t rows) const {
  // Experts get at most `rows` rows each, and small_m holds for fewer rows if it holds for more.
  return rows <= ops::kDecodeRowsMax && (!has_shared_ || shared_.small_m(rows)) &&
         (experts_.empty() || experts_.front().small_m(rows));
}

int64_t Moe::group_rows(const float* x, int64_t rows, const Routing& routing) {
  for (auto& a : assigned_) a.clear();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < top_k_; ++k) {
      const int64_t e = routing.experts[static_cast<size_t>(r * top_k_ + k)] - range_.begin;
      if (e >= 0 && e < range_.count)
        assigned_[static_cast<size_t>(e)].emplace_back(
            static_cast<int32_t>(r), routing.weights[static_cast<size_t>(r * top_k_ + k)]);
    }
  active_.clear();
  offsets_.clear();
  int64_t total = 0;
  for (int64_t e = 0; e < range_.count; ++e) {
    const auto m = static_cast<int64_t>(assigned_[static_cast<size_t>(e)].size());
    if (m == 0) continue;
    active_.push_back(static_cast<int32_t>(e));
    offsets_.push_back(total);
    total += m;
  }
  float* xin = scratch_.get(4, static_cast<size_t>(total * hidden_));
  for (size_t a = 0; a < active_.size(); ++a) {
    const auto& rows_of = assigned_[static_cast<size_t>(active_[a])];
    for (size_t i = 0; i < rows_of.size(); ++i)
      std::memcpy(xin + (offsets_[a] + static_cast<int64_t>(i)) * hidden_,
                  x + rows_of[i].first * hidden_, static_cast<size_t>(hidden_) * sizeof(float));
  }
  return total;
}

void Moe::add_routed_to_team(int64_t total) {
  const int64_t inter = experts_.empty() ? 0 : experts_.front().intermediate();
  float* xin = scratch_.get(4, static_cast<size_t>(total * hidden_));
  float* yout = scratch_.get(5, static_cast<size_t>(total * hidden_));
  float* tmp = scratch_.get(6, static_cast<size_t>(total * 3 * inter));
  for (size_t a = 0; a < active_.size(); ++a) {
    const auto m = static_cast<int64_t>(assigned_[static_cast<size_t>(active_[a])].size());
    const int64_t off = offsets_[a];
    team_.add(experts_[static_cast<size_t>(active_[a])], xin + off * hidden_, m,
              yout + off * hidden_, tmp + off * 3 * inter);
  }
}

void Moe::start_team(const float* x, int64_t rows, float* out) {
  team_.clear();
  if (has_shared_) {
    team_.add(shared_, x, rows, out,
              scratch_.get(3, static_cast<size_t>(rows * 3 * shared_.intermediate())));
  } else {
    std::memset(out, 0, static_cast<size_t>(rows * hidden_) * sizeof(float));
  }
}

void Moe::add_weighted_outputs(float* out) {
  // Weighted sum in ascending expert order, as a per-expert loop would add them.
  const float* yout = scratch_.get(5, 0);
  for (size_t a = 0; a < active_.size(); ++a) {
    const auto& rows_of = assigned_[static_cast<size_t>(active_[a])];
    for (size_t i = 0; i < rows_of.size(); ++i) {
      const auto [row, weight] = rows_of[i];
      ops::axpy(weight, yout + (offsets_[a] + static_cast<int64_t>(i)) * hidden_,
                out + row * hidden_, hidden_);
    }
  }
}

void Moe::route_and_forward(const float* x, int64_t rows, Routing& routing, float* out) {
  if (!decode_sized(rows)) {
    route(x, rows, routing);
    forward(x, rows, routing, out);
    return;
  }
  // The router (a product on one thread, then the top-k) was the serial gap before the
  // experts' region; inside it, the other threads stream the shared expert meanwhile.
  // The scratch the region's threads use is sized before they start.
  const int64_t inter = experts_.empty() ? 0 : experts_.front().intermediate();
  const int64_t most = rows * top_k_;
  scratch_.get(4, static_cast<size_t>(most * hidden_));
  scratch_.get(5, static_cast<size_t>(most * hidden_));
  scratch_.get(6, static_cast<size_t>(most * 3 * inter));
  start_team(x, rows, out);
  team_.run([&] {
    route(x, rows, routing);
    add_routed_to_team(group_rows(x, rows, routing));
  });
  add_weighted_outputs(out);
}

void Moe::forward(const float* x, int64_t rows, const Routing& routing, float* out) {
  const int64_t total = group_rows(x, rows, routing);
  if (decode_sized(rows)) {
    // Decode: each expert is a few MiB of weights read for a few rows, so a parallel region
    // per product (two per expert) cost more in fork/join and tail imbalance than the split
    // gained. One region instead, each thread streaming whole experts of its share and then
    // helping with the others' last ones block by block (CooperativeMlps); each weight is still
    // read exactly once. The shared expert is in it rather than two regions of its own before.
    start_team(x, rows, out);
    add_routed_to_team(total);
    team_.run();
    add_weighted_outputs(out);
    return;
  }
  const int64_t inter = experts_.empty() ? 0 : experts_.front().intermediate();
  float* xin = scratch_.get(4, static_cast<size_t>(total * hidden_));
  float* yout = scratch_.get(5, static_cast<size_t>(total * hidden_));
  float* tmp = scratch_.get(6, static_cast<size_t>(total * 3 * inter));
  float* shared_tmp = has_shared_
                          ? scratch_.get(3, static_cast<size_t>(rows * 3 * shared_.intermediate()))
                          : nullptr;
  auto run_shared = [&] {
    if (has_shared_) {
      shared_.forward(x, rows, out, shared_tmp);
    } else {
      std::memset(out, 0, static_cast<size_t>(rows * hidden_) * sizeof(float));
    }
  };
  auto run_expert = [&](size_t a) {
    const auto m = static_cast<int64_t>(assigned_[static_cast<size_t>(active_[a])].size());
    const int64_t off = offsets_[a];
    experts_[static_cast<size_t>(active_[a])].forward(xin + off * hidden_, m, yout + off * hidden_,
                                                      tmp + off * 3 * inter);
  };
  bool small = !has_shared_ || shared_.small_m(rows);
  for (const int32_t e : active_) {
    const auto m = static_cast<int64_t>(assigned_[static_cast<size_t>(e)].size());
    small = small && experts_[static_cast<size_t>(e)].small_m(m);
  }
  if (small) {
    // Prefill on the small-M kernels (bound by arithmetic): whole experts, each on one thread,
    // the shared expert first.
    tensor::parallel_for(1 + static_cast<int64_t>(active_.size()), 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        if (i == 0)
          run_shared();
        else
          run_expert(static_cast<size_t>(i - 1));
      }
    });
  } else {
    run_shared();
    for (size_t a = 0; a < active_.size(); ++a) run_expert(a);
  }
  add_weighted_outputs(out);
}

}  // namespace handoff::model
