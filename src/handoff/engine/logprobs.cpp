#include "handoff/engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace handoff::engine {

TokenLogprob token_logprob(const float* logits, int64_t n, int32_t token, int top) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = max + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<float>(logits[token] - lse);
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    const auto k = std::min<int64_t>(top, n);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i)
      out.top.push_back({ids[static_cast<size_t>(i)],
                         static_cast<float>(logits[ids[static_cast<size_t>(i)]] - lse)});
  }
  return out;
}

}  // namespace handoff::engine
