#include "handoff/tensor/dtype.h"

#include <cmath>
#include <cstring>

#include "handoff/error.h"

namespace handoff::tensor {
namespace {

// Element i of a buffer that may not be aligned for T: a safetensors data section can start at
// any byte (an unpadded header), and a typed load from there is undefined behaviour. memcpy is
// defined for any address and compiles to the same plain load.
template <typename T>
T load_at(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * sizeof(T), sizeof v);
  return v;
}

template <typename T>
void store_at(void* base, size_t i, T v) {
  std::memcpy(static_cast<uint8_t*>(base) + i * sizeof(T), &v, sizeof v);
}

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kF8E4M3:
      return 1;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kF8E4M3:
      return "f8_e4m3";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16") return DType::kF16;
  fail_input("unknown dtype '{}' (expected f32, bf16 or f16)", name);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    value = mant ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -value : value;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7e00u;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00u;
  if (a < std::ldexp(1.0f, -24) * 0.5f) return sign;
  int exp;
  std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  int e = exp - 1;      // a = 1.x * 2^e
  if (e < -14) {        // subnormal: units of 2^-24
    const float q = std::nearbyint(std::ldexp(a, 24));
    return sign | static_cast<uint16_t>(q);
  }
  float q = std::nearbyint(std::ldexp(a, 10 - e));  // 1024..2048
  if (q >= 2048.0f) {
    q = 1024.0f;
    ++e;
  }
  if (e > 15) return sign | 0x7c00u;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<uint32_t>(q) - 1024u));
}

float f8e4m3_to_f32(uint8_t v) {
  const uint32_t sign = v >> 7;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t mant = v & 0x7u;
  float value;
  if (exp == 0xf && mant == 0x7) {
    value = NAN;
  } else if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -9);
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x8u), static_cast<int>(exp) - 10);
  }
  return sign ? -value : value;
}

void convert_to_f32(DType src_dtype, const void* src, float* dst, size_t n) {
  switch (src_dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_at<uint16_t>(src, i));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_at<uint16_t>(src, i));
      return;
    case DType::kF8E4M3: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_f32(s[i]);
      return;
    }
    default:
      fail("convert_to_f32: {} is not a float type", dtype_name(src_dtype));
  }
}

void convert_from_f32(const float* src, DType dst_dtype, void* dst, size_t n) {
  switch (dst_dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) store_at<uint16_t>(dst, i, f32_to_bf16(src[i]));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) store_at<uint16_t>(dst, i, f32_to_f16(src[i]));
      return;
    case DType::kF8E4M3: {
      auto* d = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f8e4m3(src[i]);
      return;
    }
    default:
      fail("convert_from_f32: {} is not a float type", dtype_name(dst_dtype));
  }
}

}  // namespace handoff::tensor
