// f32 -> e4m3 (round to nearest even, saturating) against a naive twin written with frexp and
// nearbyint, over a sweep of f32 bit patterns and every tie between adjacent e4m3 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "handoff/tensor/dtype.h"

namespace handoff::tensor {
namespace {

uint8_t naive_f32_to_f8e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fmin(std::fabs(f), 448.0f);
  int exp;
  std::frexp(a, &exp);
  int e = exp - 1;
  if (a == 0 || e < -6) {  // subnormal: units of 2^-9
    const float q = std::nearbyint(std::ldexp(a, 9));
    return sign | static_cast<uint8_t>(q);  // q == 8 is 0x08, the smallest normal
  }
  float q = std::nearbyint(std::ldexp(a, 3 - e));  // 8..16
  if (q >= 16.0f) {
    q = 8.0f;
    ++e;
  }
  return sign | static_cast<uint8_t>(((e + 7) << 3) | (static_cast<uint32_t>(q) - 8u));
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

TEST(Fp8Convert, MatchesNaiveTwinOnASweepOfBitPatterns) {
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 1021) {
    const float f = from_bits(static_cast<uint32_t>(b));
    ASSERT_EQ(f32_to_f8e4m3(f), naive_f32_to_f8e4m3(f)) << "bits 0x" << std::hex << b;
  }
}

TEST(Fp8Convert, RoundTripsEveryCodeAndRoundsEveryTieToEven) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = f8e4m3_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(f32_to_f8e4m3(v), c == 0x80 ? 0x80 : c) << c;
    if ((c & 0x7f) >= 0x7e) continue;
    const float next = f8e4m3_to_f32(static_cast<uint8_t>(c + 1));
    const float mid = (v + next) / 2;  // exact: the two differ in one mantissa unit
    const int even = (c & 1) == 0 ? c : c + 1;
    EXPECT_EQ(f32_to_f8e4m3(mid), even) << "tie between codes " << c << " and " << c + 1;
    EXPECT_EQ(f32_to_f8e4m3(std::nextafter(mid, 0.0f)), c) << c;
    EXPECT_EQ(f32_to_f8e4m3(std::nextafter(mid, std::signbit(v) ? -1e9f : 1e9f)), c + 1) << c;
  }
  EXPECT_EQ(f32_to_f8e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(f32_to_f8e4m3(NAN), 0x7f);
}

}  // namespace
}  // namespace handoff::tensor
