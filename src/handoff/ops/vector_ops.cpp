// Portable bodies of the row-wise kernels and the run-time switch to the AVX2 / AVX-512 ones.
#include "handoff/ops/vector_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "handoff/error.h"
#include "handoff/ops/cpu_features.h"
#include "handoff/ops/vector_ops_kernels.h"

namespace handoff::ops {

namespace {

namespace portable {

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (float v : acc) s += v;
  return s;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float sum_squares(const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i] * x[i];
  return acc;
}

void scale_mul(const float* x, const float* w, float scale, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * scale);
}

float add_sum_squares(float* residual, const float* x, int64_t n) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    residual[i] += x[i];
    ss += residual[i] * residual[i];
  }
  return ss;
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void softmax(float* x, int64_t n) {
  const float mx = *std::max_element(x, x + n);
  double sum = 0;  // a long f32 running sum would cost ~sqrt(n) ulp
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float exp_sum(float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

float scale_max(float* x, int64_t n, float scale) {
  float top = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= scale;
    top = std::max(top, x[i]);  // a NaN compares false and is passed over
  }
  return top;
}

void widen_bf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &bits, sizeof bits);
  }
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return best < 0 ? 0 : best;
}

const VectorKernels kVectorKernels = {dot,      axpy,    sum_squares, scale_mul, add_sum_squares,
                                      silu_mul, softmax, exp_sum,     scale_max, widen_bf16,
                                      argmax};

}  // namespace portable

const VectorKernels& kernels() {
  switch (kernel_isa()) {
    case Isa::kAmx:
    case Isa::kAvx512:
      return avx512::kVectorKernels;
    case Isa::kAvx2:
      return avx2::kVectorKernels;
    case Isa::kPortable:
      break;
  }
  return portable::kVectorKernels;
}

float rms_scale(float sum_sq, int64_t dim, float eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
}

}  // namespace

void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* out) {
  const VectorKernels& k = kernels();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    k.scale_mul(xr, w, rms_scale(k.sum_squares(xr, dim), dim, eps), out + r * dim, dim);
  }
}

void add_rms_norm(float* residual, const float* x, const float* w, float eps, int64_t rows,
                  int64_t dim, float* out) {
  const VectorKernels& k = kernels();
  for (int64_t r = 0; r < rows; ++r) {
    float* res = residual + r * dim;
    const float* xr = x + r * dim;
    const float ss = k.add_sum_squares(res, xr, dim);
    k.scale_mul(res, w, rms_scale(ss, dim, eps), out + r * dim, dim);
  }
}

void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t rows,
                int64_t dim, float* out) {
  // Two passes (mean, then centred variance) rather than E[x²]−E[x]², which cancels badly.
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float mean = 0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= static_cast<float>(dim);
    float var = 0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<float>(dim);
    const float inv = 1.0f / std::sqrt(var + eps);
    float* o = out + r * dim;
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] - mean) * inv * w[i] + b[i];
  }
}

void rope(float* x, int64_t heads, int64_t head_stride, int64_t rot_dim, const float* cos,
          const float* sin, bool interleaved) {
  if (rot_dim % 2 != 0) fail("rope: rot_dim {} must be even", rot_dim);
  const int64_t half = rot_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
    if (interleaved) {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cos[i] - x1 * sin[i];
        v[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cos[i] - x1 * sin[i];
        v[i + half] = x0 * sin[i] + x1 * cos[i];
      }
    }
  }
}

void softmax(float* x, int64_t n) {
  if (n > 0) kernels().softmax(x, n);
}

float exp_sum(float* x, int64_t n, float shift) {
  return n > 0 ? kernels().exp_sum(x, n, shift) : 0.0f;
}

float scale_max(float* x, int64_t n, float scale) {
  return n > 0 ? kernels().scale_max(x, n, scale) : -std::numeric_limits<float>::infinity();
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  kernels().silu_mul(gate, up, out, n);
}

int64_t argmax(const float* x, int64_t n) {
  if (n < 1) fail("argmax: no values");
  return kernels().argmax(x, n);
}

// Ties go to the lower index so routing is deterministic; NaN ranks below every number.
void topk(const float* x, int64_t n, int64_t k, int32_t* out_idx) {
  if (k < 0 || k > n) fail("topk: k={} out of range for n={}", k, n);
  if (k == 0) return;
  thread_local std::vector<int32_t> idx;
  idx.resize(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [x](int32_t a, int32_t b) {
    const float va = x[a], vb = x[b];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na != nb) return nb;  // the number goes first
    if (!na && va != vb) return va > vb;
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  std::copy(idx.begin(), idx.begin() + k, out_idx);
}

namespace {

// A key that orders as topk orders values: NaN lowest (0), then the numbers by their float order
// (the sign-magnitude bits flipped to two's-complement order), with -0 the same as +0.
uint32_t order_key(float x) {
  const float v = x == 0.0f ? 0.0f : x;
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return std::isnan(v) ? 0u : std::max(ordered, 1u);
}

struct Threshold {
  uint32_t key;      // the k-th largest key
  int64_t equal_in;  // how many keys equal to it are in the top k (the lowest-indexed ones)
};

// Radix select, one digit per pass (11, 11, then 10 bits); each pass counts the digit over the
// keys still tied with the threshold on the digits above. O(n), no sort.
Threshold radix_threshold(const uint32_t* keys, int64_t n, int64_t k) {
  constexpr int kShift[3] = {21, 10, 0};
  constexpr uint32_t kDigits[3] = {2048, 2048, 1024};
  thread_local std::vector<uint32_t> tied;
  std::array<int64_t, 2048> count{};
  for (int64_t i = 0; i < n; ++i) ++count[keys[i] >> kShift[0]];
  uint32_t threshold = 0;
  int64_t need = k;  // the threshold's rank among the keys that share its digits so far
  for (int pass = 0; pass < 3; ++pass) {
    if (pass > 0) {
      const uint32_t high_mask = ~0u << kShift[pass - 1];
      const size_t from_size = pass == 1 ? static_cast<size_t>(n) : tied.size();
      if (pass == 1) tied.resize(from_size);
      const uint32_t* from = pass == 1 ? keys : tied.data();  // in place from pass 2
      size_t kept = 0;
      for (size_t i = 0; i < from_size; ++i)
        if ((from[i] & high_mask) == threshold) tied[kept++] = from[i];
      tied.resize(kept);
      std::fill(count.begin(), count.end(), 0);
      for (uint32_t key : tied) ++count[(key >> kShift[pass]) & (kDigits[pass] - 1)];
    }
    uint32_t digit = kDigits[pass] - 1;
    while (count[digit] < need) need -= count[digit--];
    threshold |= digit << kShift[pass];
  }
  return {threshold, need};
}

// Writes the indices (in ascending order) of the top k of (keys[i], index[i]), i < n, given
// in index order: every key above the threshold, and the first `equal_in` equal to it.
// Branch-free: the taken keys follow no pattern. out < k before each store.
void emit_top(const uint32_t* keys, const int32_t* index, int64_t n, int64_t k, Threshold t,
              int32_t* out_idx) {
  int64_t out = 0, equal_left = t.equal_in;
  for (int64_t i = 0; i < n && out < k; ++i) {
    const bool tie = keys[i] == t.key && equal_left > 0;
    equal_left -= tie ? 1 : 0;
    out_idx[out] = index != nullptr ? index[i] : static_cast<int32_t>(i);
    out += (keys[i] > t.key || tie) ? 1 : 0;
  }
}

}  // namespace

void topk_ascending(const float* x, int64_t n, int64_t k, int32_t* out_idx) {
  if (k < 0 || k > n) fail("topk_ascending: k={} out of range for n={}", k, n);
  if (k == 0) return;
  thread_local std::vector<uint32_t> keys;
  thread_local std::vector<int32_t> index;
  // Long rows (a long context's indexer scores, k = 2048 of 8K and more): a strided sample
  // gives a bound that some ~2.6-2.9k of the n values reach, one branch-free pass of float compares
  // keeps their indices, and the exact select runs on them alone. Every key equal to the threshold
  // is kept (it is >= the bound), so the set and the tie rule are exactly those of the full select,
  // which runs instead when the bound lets fewer than k keys through.
  constexpr int64_t kSample = 1024;
  if (n >= 4 * k && n >= 8 * kSample) {
    std::array<uint32_t, kSample> sample;
    for (int64_t j = 0; j < kSample; ++j)
      sample[static_cast<size_t>(j)] = order_key(x[j * n / kSample]);
    const double expected = static_cast<double>(k) * kSample / static_cast<double>(n);
    const auto rank = static_cast<int64_t>(expected + 4.0 * std::sqrt(expected) + 8.0);
    std::nth_element(sample.begin(), sample.begin() + rank, sample.end(), std::greater<>());
    const uint32_t bound = sample[static_cast<size_t>(rank)];
    if (bound >= 2) {  // a number (NaN keys are 0), so the pass can compare floats
      // The float whose key is `bound`: key(x) >= bound exactly when x >= it (-0 as +0).
      const uint32_t bits = (bound & 0x80000000u) ? bound & 0x7fffffffu : ~bound;
      float bound_value;
      std::memcpy(&bound_value, &bits, sizeof bits);
      index.resize(static_cast<size_t>(n) + 1);
      int64_t kept = 0;
      for (int64_t i = 0; i < n; ++i) {
        index[static_cast<size_t>(kept)] = static_cast<int32_t>(i);
        kept += x[i] >= bound_value ? 1 : 0;
      }
      keys.resize(static_cast<size_t>(kept));
      for (int64_t c = 0; c < kept; ++c)
        keys[static_cast<size_t>(c)] = order_key(x[index[static_cast<size_t>(c)]]);
      if (kept >= k) {
        emit_top(keys.data(), index.data(), kept, k, radix_threshold(keys.data(), kept, k),
                 out_idx);
        return;
      }
    }
  }
  keys.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keys[static_cast<size_t>(i)] = order_key(x[i]);
  emit_top(keys.data(), nullptr, n, k, radix_threshold(keys.data(), n, k), out_idx);
}

void widen_bf16(const uint16_t* src, float* dst, int64_t n) { kernels().widen_bf16(src, dst, n); }

float dot(const float* a, const float* b, int64_t n) { return kernels().dot(a, b, n); }

void axpy(float a, const float* x, float* y, int64_t n) { kernels().axpy(a, x, y, n); }

}  // namespace handoff::ops
