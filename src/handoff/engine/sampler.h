#pragma once
// Picks the next token from a row of logits: greedy at temperature 0, otherwise softmax at
// the temperature, restricted by top-k and top-p, drawn from a seeded generator.
#include <cstdint>
#include <random>
#include <vector>

namespace handoff::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;
  int64_t top_k = 0;  // 0: no limit
};

// Throws InputError naming the parameter when it is out of range.
void validate(const SamplingParams& params);

// The index of the largest logit (the lowest index among equal maxima).
int32_t argmax(const float* logits, int64_t n);

class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}
  int32_t sample(const float* logits, int64_t n, const SamplingParams& params);

 private:
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace handoff::engine
