// Portable bodies of the row-wise kernels and the run-time switch to the AVX2 / AVX-512 ones.
#include "handoff/ops/vector_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
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

void widen_bf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &bits, sizeof bits);
  }
}

const VectorKernels kVectorKernels = {dot,      axpy,    sum_squares, scale_mul, add_sum_squares,
                                      silu_mul, softmax, exp_sum,     widen_bf16};

}  // namespace portable

const VectorKernels& kernels() {
  switch (kernel_isa()) {
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

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  kernels().silu_mul(gate, up, out, n);
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

void topk_ascending(const float* x, int64_t n, int64_t k, int32_t* out_idx) {
  if (k < 0 || k > n) fail("topk_ascending: k={} out of range for n={}", k, n);
  if (k == 0) return;
  // Keys that order as topk's values do: NaN lowest (0), then the numbers by their float order
  // (the sign-magnitude bits flipped to two's-complement order), with -0 the same as +0.
  thread_local std::vector<uint32_t> keys, tied;
  keys.resize(static_cast<size_t>(n));
  // The k-th largest key (the threshold) by radix select, one digit per pass: 11, 11, then 10
  // bits. Each pass counts the digit over the keys still tied with the threshold on the digits
  // above, so the work is O(n) and the first pass, over all keys, is a branch-free count.
  constexpr int kShift[3] = {21, 10, 0};
  constexpr uint32_t kDigits[3] = {2048, 2048, 1024};
  std::array<int64_t, 2048> count{};
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] == 0.0f ? 0.0f : x[i];
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const uint32_t ordered = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
    const uint32_t key = std::isnan(v) ? 0u : std::max(ordered, 1u);
    keys[static_cast<size_t>(i)] = key;
    ++count[key >> kShift[0]];
  }
  uint32_t threshold = 0;
  int64_t need = k;  // the threshold's rank among the keys that share its digits so far
  for (int pass = 0; pass < 3; ++pass) {
    if (pass > 0) {
      // The keys tied with the threshold on the digits chosen so far.
      const uint32_t high_mask = ~0u << kShift[pass - 1];
      const size_t from_size = pass == 1 ? keys.size() : tied.size();
      if (pass == 1) tied.resize(from_size);
      const uint32_t* from = pass == 1 ? keys.data() : tied.data();  // in place from pass 2
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
  // Every key above the threshold is in, and of the keys equal to it the lowest indices fill
  // the `need` places left: topk's tie rule.
  // Branch-free: about k of n keys are taken at no regular pattern. out < k before each store.
  int64_t out = 0;
  for (int64_t i = 0; i < n && out < k; ++i) {
    const uint32_t key = keys[static_cast<size_t>(i)];
    const bool tie = key == threshold && need > 0;
    need -= tie ? 1 : 0;
    out_idx[out] = static_cast<int32_t>(i);
    out += (key > threshold || tie) ? 1 : 0;
  }
}

void widen_bf16(const uint16_t* src, float* dst, int64_t n) { kernels().widen_bf16(src, dst, n); }

float dot(const float* a, const float* b, int64_t n) { return kernels().dot(a, b, n); }

void axpy(float a, const float* x, float* y, int64_t n) { kernels().axpy(a, x, y, n); }

}  // namespace handoff::ops
