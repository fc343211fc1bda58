// Hostile sizes and values at the tensor level: shapes whose element count leaves int64 are
// refused (no signed overflow), and the NaN / Inf scan finds the first bad element of every
// float storage type, wherever it lies in the parallel split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <vector>

#include "handoff/error.h"
#include "handoff/tensor/finite_scan.h"
#include "handoff/tensor/mapped_file.h"
#include "handoff/tensor/tensor.h"

namespace handoff::tensor {
namespace {

constexpr int64_t k2p62 = int64_t{1} << 62;

TEST(ShapeTest, NumelIsCheckedAgainstInt64) {
  EXPECT_EQ(checked_numel({3, 4, 5}), 60);
  EXPECT_EQ(checked_numel({}), 1);
  EXPECT_EQ(checked_numel({7, 0}), 0);
  EXPECT_EQ(checked_numel({k2p62, 1}), k2p62);
  EXPECT_FALSE(checked_numel({k2p62, 2}).has_value());
  EXPECT_FALSE(checked_numel({k2p62, 4}).has_value());  // 2^64 wraps to 0 unchecked
  EXPECT_FALSE(checked_numel({int64_t{1} << 32, int64_t{1} << 31, 2}).has_value());
  // No elements, but its strides would still overflow.
  EXPECT_FALSE(checked_numel({0, k2p62, 4}).has_value());
  EXPECT_FALSE(checked_numel({-1, 4}).has_value());
  EXPECT_THROW(shape_numel({k2p62, 4}), Error);
  EXPECT_THROW(Tensor::empty({k2p62, 4}, DType::kF32), Error);
  // Fits int64 as elements, not as bytes.
  EXPECT_THROW(Tensor::empty({k2p62}, DType::kF32), Error);
}

// A tensor of n ones in `dtype` with `bad` written at index `at`.
Tensor ones_with(DType dtype, int64_t n, int64_t at, float bad) {
  std::vector<float> values(static_cast<size_t>(n), 1.0f);
  if (at >= 0) values[static_cast<size_t>(at)] = bad;
  Tensor t = Tensor::empty({n}, dtype);
  convert_from_f32(values.data(), dtype, t.raw(), values.size());
  return t;
}

// A view of a mapped file says so, through slices and reshapes; a copy of it does not.
TEST(TensorTest, ViewsOfAMappedFileAreKnownAsSuch) {
  const auto path = std::filesystem::temp_directory_path() / "handoff_tensor_view_test.bin";
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(values.data(), sizeof(float), values.size(), f), values.size());
  std::fclose(f);
  const Tensor view = Tensor::from_mapping(MappedFile::open(path.string()), 0, {3, 2}, DType::kF32);
  EXPECT_TRUE(view.is_view_of_file());
  EXPECT_TRUE(view.slice(0, 1, 3).is_view_of_file());
  EXPECT_TRUE(view.reshape({6}).is_view_of_file());
  const Tensor copy = view.slice(0, 1, 3).contiguous();
  EXPECT_FALSE(copy.is_view_of_file());
  EXPECT_EQ(copy.data<float>()[0], 3.0f);
  EXPECT_FALSE(view.to(DType::kBF16).is_view_of_file());
  EXPECT_FALSE(Tensor::empty({2}, DType::kF32).is_view_of_file());
  std::filesystem::remove(path);
}

TEST(FiniteScanTest, FindsTheFirstNonFiniteElementOfEveryFloatType) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Sizes around the scan's work item (2^16 elements) and a bad value in several chunks.
  const int64_t n = 300000;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t at : {int64_t{0}, int64_t{65535}, int64_t{65536}, int64_t{299999}}) {
      EXPECT_EQ(first_non_finite(ones_with(dtype, n, at, nan)), at) << dtype_name(dtype);
      EXPECT_EQ(first_non_finite(ones_with(dtype, n, at, -inf)), at) << dtype_name(dtype);
    }
    EXPECT_FALSE(first_non_finite(ones_with(dtype, n, -1, 0)).has_value()) << dtype_name(dtype);
    // Two bad values: the lower index wins, even when a later chunk is scanned first.
    Tensor t = ones_with(dtype, n, 250000, nan);
    convert_from_f32(&nan, dtype, static_cast<uint8_t*>(t.raw()) + 70000 * dtype_size(dtype), 1);
    EXPECT_EQ(first_non_finite(t), 70000) << dtype_name(dtype);
  }
  // Large finite values are finite (bf16's and f16's largest, f32's max).
  EXPECT_FALSE(first_non_finite(ones_with(DType::kF32, 10, 3, 3.4e38f)).has_value());
  EXPECT_FALSE(first_non_finite(ones_with(DType::kF16, 10, 3, 65504.0f)).has_value());
  // e4m3fn has no infinity: 0x7f / 0xff are its NaNs, 0x7e (448) is finite.
  Tensor f8 = Tensor::zeros({5}, DType::kF8E4M3);
  f8.data<uint8_t>()[1] = 0x7e;
  EXPECT_FALSE(first_non_finite(f8).has_value());
  f8.data<uint8_t>()[4] = 0xff;
  EXPECT_EQ(first_non_finite(f8), 4);
  // Integer tensors hold no NaN.
  Tensor ints = Tensor::zeros({4}, DType::kI32);
  ints.data<int32_t>()[2] = 0x7fffffff;
  EXPECT_FALSE(first_non_finite(ints).has_value());
}

// Over a raw row (the engine's logits before sampling): a bad value as the last element, on
// lengths around a vector's width, and nothing read past n.
TEST(FiniteScanTest, ScansARawRow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 7, 15, 16, 17, 33, 100, 257, 1000, 32000}) {
    std::vector<float> x(static_cast<size_t>(n), 1.5f);
    EXPECT_FALSE(first_non_finite(DType::kF32, x.data(), n).has_value()) << "n=" << n;
    for (float bad : {nan, inf, -inf}) {
      x[static_cast<size_t>(n - 1)] = bad;
      EXPECT_EQ(first_non_finite(DType::kF32, x.data(), n), n - 1) << "n=" << n << " bad=" << bad;
      EXPECT_FALSE(first_non_finite(DType::kF32, x.data(), n - 1).has_value()) << "n=" << n;
    }
    x[static_cast<size_t>(n - 1)] = 1.5f;
  }
}

TEST(FiniteScanTest, ScansStridedViews) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor t = Tensor::zeros({4, 6}, DType::kF32);
  t.data<float>()[2 * 6 + 5] = nan;                              // row 2, column 5
  EXPECT_FALSE(first_non_finite(t.slice(1, 0, 5)).has_value());  // the column is not in view
  EXPECT_EQ(first_non_finite(t.slice(1, 1, 6)), 2 * 5 + 4);
}

}  // namespace
}  // namespace handoff::tensor
