#include "handoff/tensor/finite_scan.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "handoff/tensor/thread_pool.h"

namespace handoff::tensor {
namespace {

// Elements per work item: large enough to amortise the pool, small enough to spread a norm
// weight's neighbours (the big matrices) over every core.
constexpr int64_t kChunk = int64_t{1} << 16;

// An element is NaN or Inf when all its exponent bits are set (e4m3fn: exponent and mantissa;
// it has no infinities). Adding the mask's lowest bit to (v & mask) carries into the sign bit
// exactly then, so the loop is plain integer arithmetic the compiler vectorises (a compare
// into a bool did not, at a fifth of the memory bandwidth).
template <typename Bits>
bool any_special(const uint8_t* p, int64_t n, Bits mask) {
  const Bits low = mask & static_cast<Bits>(~mask + 1);
  const Bits sign = static_cast<Bits>(Bits{1} << (8 * sizeof(Bits) - 1));
  Bits acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(Bits)), sizeof v);
    acc |= static_cast<Bits>((v & mask) + low);
  }
  return (acc & sign) != 0;
}

bool any_special(DType dtype, const uint8_t* p, int64_t n) {
  switch (dtype) {
    case DType::kF32:
      return any_special<uint32_t>(p, n, 0x7f800000u);
    case DType::kBF16:
      return any_special<uint16_t>(p, n, 0x7f80u);
    case DType::kF16:
      return any_special<uint16_t>(p, n, 0x7c00u);
    case DType::kF8E4M3:
      return any_special<uint8_t>(p, n, 0x7fu);
    default:
      return false;
  }
}

}  // namespace

std::optional<int64_t> first_non_finite(const Tensor& t) {
  if (t.dtype() == DType::kI32 || t.dtype() == DType::kI64) return std::nullopt;
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  return first_non_finite(c.dtype(), c.raw(), c.numel());
}

std::optional<int64_t> first_non_finite(DType dtype, const void* data, int64_t n) {
  const auto* base = static_cast<const uint8_t*>(data);
  const auto size = static_cast<int64_t>(dtype_size(dtype));
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::atomic<int64_t> first_bad_chunk{chunks};
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t k = c0; k < c1; ++k) {
      const int64_t begin = k * kChunk;
      if (!any_special(dtype, base + begin * size, std::min(kChunk, n - begin))) continue;
      int64_t seen = first_bad_chunk.load();
      while (k < seen && !first_bad_chunk.compare_exchange_weak(seen, k)) {
      }
    }
  });
  const int64_t k = first_bad_chunk.load();
  if (k == chunks) return std::nullopt;
  // Only on failure: find the element inside the first bad chunk.
  for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); ++i)
    if (any_special(dtype, base + i * size, 1)) return i;
  return std::nullopt;  // unreachable: the chunk held one
}

}  // namespace handoff::tensor
