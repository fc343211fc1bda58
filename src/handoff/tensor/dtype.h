#pragma once
// Element types and their scalar conversions. Activations are always f32; the narrow types
// are storage formats for weights and caches.
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
uint8_t f32_to_f8e4m3(float f);

// Converts n elements of any float storage type to f32.
void convert_to_f32(DType src_dtype, const void* src, float* dst, size_t n);
// Converts n f32 values into a float storage type (f32, bf16, f16 or f8e4m3).
void convert_from_f32(const float* src, DType dst_dtype, void* dst, size_t n);

}  // namespace handoff::tensor
