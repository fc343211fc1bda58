#pragma once
// Picks the next token from a row of logits: greedy at temperature 0, otherwise softmax at
// the temperature, restricted by top-k, top-p and min-p, drawn from a seeded generator.
// Penalties (presence, frequency, repetition) rewrite the logits first (apply_penalties).
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "handoff/error.h"

namespace handoff::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;
  int64_t top_k = 0;                // 0: no limit
  float min_p = 0.0f;               // drop tokens below min_p * p(most likely); 0: off
  float presence_penalty = 0.0f;    // OpenAI: subtracted once from every generated token
  float frequency_penalty = 0.0f;   // OpenAI: subtracted per occurrence in the output
  float repetition_penalty = 1.0f;  // CTRL / HF: prompt and output tokens, /p if >0 else *p
};

// Throws InputError naming the parameter when it is out of range.
void validate(const SamplingParams& params);

// A logits row holding NaN or Inf: the forward pass produced garbage (a corrupt weight loaded
// with --no-check-weights, a numeric overflow). Sampling from it would emit meaningless tokens
// (argmax over NaN is token 0), so the request ends with this error instead.
class NonFiniteLogitsError : public Error {
 public:
  using Error::Error;
};
// Throws NonFiniteLogitsError naming the first bad token id when logits[0, n) is not finite.
void require_finite_logits(const float* logits, int64_t n);

// The index of the largest logit (the lowest index among equal maxima).
int32_t argmax(const float* logits, int64_t n);

// Token counts a sequence's penalties look at.
struct PenaltyState {
  std::unordered_map<int32_t, int32_t> output_counts;
  std::vector<bool> seen;  // prompt or output, for the repetition penalty (lazily sized)
};
bool has_penalties(const SamplingParams& params);
// Rewrites `logits` in place (vLLM's order: repetition, then frequency and presence).
void apply_penalties(float* logits, int64_t n, const SamplingParams& params,
                     const PenaltyState& state);

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}
  int32_t sample(const float* logits, int64_t n, const SamplingParams& params);

  // Test-only (builds with HANDOFF_TEST_HOOKS): the next samples are these ids, in order, before
  // sampling resumes, so end-to-end tests can script a model's output while the real
  // detokenizer, stream decoder and output parsers run on it.
  void script(std::vector<int32_t> ids) {
    script_ = std::move(ids);
    scripted_ = 0;
  }
  // The next sample comes from the script (constraints do not apply to it).
  bool scripted() const { return scripted_ < script_.size(); }

 private:
  std::mt19937_64 rng_;
  std::vector<int32_t> script_;
  size_t scripted_ = 0;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace handoff::engine
