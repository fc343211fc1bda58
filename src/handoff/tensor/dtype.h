#pragma once
// Element types and their scalar conversions. Activations are always f32; the narrow types
// are storage formats for weights and caches.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace handoff::tensor {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kI32, kI64 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// Parses "f32"/"bf16"/... as used on the command line; throws InputError otherwise.
DType parse_dtype(std::string_view name);

inline float bf16_to_f32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, NaN kept quiet.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float f);
// float8 e4m3fn: bias 7, no infinities, 0x7f/0xff are NaN.
float f8e4m3_to_f32(uint8_t v);
// Rounding to nearest even on the bits; inline, since quantising a checkpoint at load converts
// every weight.
inline uint8_t f32_to_f8e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;  // NaN
  // >= 448 (Inf too): saturate, like torch's e4m3fn cast of clamped values.
  if (a >= 0x43e00000u) return sign | 0x7e;
  if (a < 0x3c800000u) {  // below 2^-6: subnormal, units of 2^-9
    float mag;
    std::memcpy(&mag, &a, sizeof(mag));
    // The product is exact; nearbyint rounds half to even in the default rounding mode.
    const float q = std::nearbyint(mag * 512.0f);  // 0..8; 8 is the smallest normal, 0x08
    return sign | static_cast<uint8_t>(q);
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding half to even, then rebias 127 -> 7.
  const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  const uint32_t code = r - ((127u - 7u) << 3);
  return sign | static_cast<uint8_t>(code > 0x7eu ? 0x7eu : code);
}

// Converts n elements of any float storage type to f32.
void convert_to_f32(DType src_dtype, const void* src, float* dst, size_t n);
// Converts n f32 values into a float storage type (f32, bf16, f16 or f8e4m3).
void convert_from_f32(const float* src, DType dst_dtype, void* dst, size_t n);

}  // namespace handoff::tensor
