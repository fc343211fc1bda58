#include "handoff/engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "handoff/error.h"
#include "handoff/ops/vector_ops.h"
#include "handoff/tensor/finite_scan.h"

namespace handoff::engine {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    fail_input("temperature must be >= 0, got {}", p.temperature);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail_input("top_p must be in (0, 1], got {}", p.top_p);
  if (p.top_k < 0) fail_input("top_k must be >= 0, got {}", p.top_k);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) fail_input("min_p must be in [0, 1], got {}", p.min_p);
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    fail_input("presence_penalty must be in [-2, 2], got {}", p.presence_penalty);
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    fail_input("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    fail_input("repetition_penalty must be > 0, got {}", p.repetition_penalty);
}

bool has_penalties(const SamplingParams& p) {
  return p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.repetition_penalty != 1.0f;
}

void apply_penalties(float* logits, int64_t n, const SamplingParams& p, const PenaltyState& state) {
  if (p.repetition_penalty != 1.0f) {
    const int64_t m = std::min<int64_t>(n, static_cast<int64_t>(state.seen.size()));
    for (int64_t i = 0; i < m; ++i) {
      if (!state.seen[static_cast<size_t>(i)]) continue;
      logits[i] =
          logits[i] > 0 ? logits[i] / p.repetition_penalty : logits[i] * p.repetition_penalty;
    }
  }
  for (const auto& [id, count] : state.output_counts) {
    if (id < 0 || id >= n) continue;
    logits[id] -= p.frequency_penalty * static_cast<float>(count) + p.presence_penalty;
  }
}

void require_finite_logits(const float* logits, int64_t n) {
  const auto bad = tensor::first_non_finite(tensor::DType::kF32, logits, n);
  if (!bad) return;
  const int64_t i = *bad;
  throw NonFiniteLogitsError(fmt::format(
      "the model produced a non-finite logit ({}) for token id {}: a corrupt weight (loaded "
      "with --no-check-weights?) or a numeric overflow",
      logits[i], i));
}

int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(ops::argmax(logits, n));
}

int32_t Sampler::sample(const float* logits, int64_t n, const SamplingParams& p) {
  if (scripted_ < script_.size()) return script_[scripted_++];
  if (p.temperature == 0.0f || p.top_k == 1) return argmax(logits, n);
  candidates_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    candidates_[static_cast<size_t>(i)] = {logits[i] / p.temperature, static_cast<int32_t>(i)};
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<int64_t>(keep),
                      candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  const float max_logit = candidates_[0].first;
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    candidates_[i].first = std::exp(candidates_[i].first - max_logit);
    total += candidates_[i].first;
  }
  if (p.min_p > 0.0f) {  // candidates are sorted, so the kept ones are a prefix
    const float floor = p.min_p * candidates_[0].first;
    size_t cut = 1;
    while (cut < keep && candidates_[cut].first >= floor) ++cut;
    keep = cut;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += candidates_[i].first;
  }
  if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double mass = 0.0;
    size_t cut = 0;
    while (cut < keep) {
      mass += candidates_[cut].first / total;
      ++cut;
      if (mass >= p.top_p) break;
    }
    keep = cut;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += candidates_[i].first;
  }
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= candidates_[i].first;
    if (r <= 0.0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace handoff::engine
