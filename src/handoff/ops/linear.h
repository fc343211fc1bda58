#pragma once
// y = x · Wᵀ for a weight W[N, K] stored f32, bf16 or block-quantised FP8 (e4m3 + one f32
// scale per 128 × 128 block, as published checkpoints ship), repacked once at load into the
// layout the kernels want. Small M (decode) runs hand-written kernels that stream each weight
// once for all M rows; large M (prefill) goes to oneDNN where it has a fast matmul for the
// dtype (FP8 never: its kernels run every M). Activations are f32 in and out; accumulation is
// f32. With ActivationPrecision::kBf16, a bf16 or FP8 weight takes a prefill-sized input
// rounded to bf16.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "handoff/tensor/fp8_blocks.h"
#include "handoff/tensor/tensor.h"

namespace handoff::ops {

// A part of a linear weight as read from a checkpoint: a float matrix (any float dtype and
// strides) or a block-quantised FP8 one. Implicit from either, so callers pass what they hold.
class LinearSource {
 public:
  LinearSource(tensor::Tensor dense);      // NOLINT(google-explicit-constructor)
  LinearSource(tensor::Fp8Blocks blocks);  // NOLINT(google-explicit-constructor)
  bool is_fp8() const { return fp8_; }
  int64_t rows() const;
  int64_t cols() const;
  const tensor::Tensor& dense() const { return dense_; }
  const tensor::Fp8Blocks& blocks() const { return blocks_; }
  // Rows [begin, end) along dimension `d` (0: output rows, 1: input columns); a view.
  LinearSource slice(int64_t d, int64_t begin, int64_t end) const;
  // Row r converted (FP8: dequantised) to f32.
  void row_f32(int64_t r, float* out) const;
  // The whole matrix in f32 (FP8: dequantised), contiguous.
  tensor::Tensor to_f32() const;

 private:
  bool fp8_ = false;
  tensor::Tensor dense_;
  tensor::Fp8Blocks blocks_;
};

// How f32 activations enter a product with a bf16 or FP8 weight (f32 weights take them as
// they are). kExact: as f32. kBf16: a product over more than 16 rows of x (prefill) rounds them
// to bf16 first, as GPU engines do; the products stay exact in f32 and the sums f32. On AVX2 /
// AVX-512 CPUs without AMX the FMA kernels run both modes at the same speed, so rounding only
// changes the numbers; where bf16 tiles run (the AMX tiles beyond 4 rows, oneDNN's bf16 matmul
// for prefill at the portable level) exact x is taken as hi + lo bf16 halves, twice the tiles'
// work, and rounded x as one bf16 product. Up to 16 rows (decode) they are never rounded. The count
// is the product's, so in a served step the decode rows that share it with a prefill chunk are
// rounded too.
enum class ActivationPrecision { kExact, kBf16 };

// Up to this many rows of x (decode, batched decode) the hand-written kernels run: they read
// each weight byte once from memory with software prefetch and keep activations in f32.
// Measured on Zen 4 (1 thread, 8192², weights streamed from DRAM) they match or beat oneDNN f32
// up to M≈8-16 (oneDNN's bf16 GEMM was faster from M≈4 in cache, but only on bf16 activations).
inline constexpr int64_t kDecodeRowsMax = 16;

class LinearWeight;

// One product of LinearWeight::forward_group, with forward()'s arguments.
struct LinearProduct {
  const LinearWeight* weight;
  const float* x;
  int64_t m;
  float* y;
  int64_t ldx = -1;
  int64_t ldy = -1;
};

class LinearWeight {
 public:
  LinearWeight();
  // `w` is a 2-d [N, K] matrix (may be a strided row/column view); it is copied and converted
  // to `dtype`: kF32 or kBF16 (an FP8 source is dequantised), or kF8E4M3, which needs an FP8
  // source and keeps its bytes and block scales (1 byte per weight; scales applied in f32 to
  // each block's partial sum).
  // Batch invariance: with `row_independent`, forward() computes each row of x alone through
  // the M = 1 kernel, so a row's result never depends on how many rows share the call (the
  // small-M kernels pick accumulator splits and K chunks by M, and oneDNN blocks by M). Slower
  // for prefill; the serving engine asks for it at --dtype f32 (model::LoadOptions).
  LinearWeight(const LinearSource& w, tensor::DType dtype, bool row_independent = false,
               ActivationPrecision activations = ActivationPrecision::kExact);
  // W = the row-wise concatenation of `parts` (each [N_i, K], same K), packed straight from the
  // parts (fused gate/up projections without an intermediate copy).
  LinearWeight(const std::vector<LinearSource>& parts, tensor::DType dtype,
               bool row_independent = false,
               ActivationPrecision activations = ActivationPrecision::kExact);
  ~LinearWeight();
  LinearWeight(LinearWeight&&) noexcept;
  LinearWeight& operator=(LinearWeight&&) noexcept;

  bool defined() const { return n_ > 0; }
  int64_t out_features() const { return n_; }
  int64_t in_features() const { return k_; }
  tensor::DType dtype() const { return dtype_; }
  // Whether forward() over more than 16 rows rounds x to bf16 (kBf16 with a bf16 or FP8 weight).
  bool rounds_activations() const;
  // Bytes of the weight as held (FP8: 1 per weight plus the f32 block scales), padding aside.
  size_t weight_bytes() const;
  // Bytes one row of an FP8 weight holds as packed, padding included: its `k` columns start
  // `col0` columns into the matrix's blocks of `block_cols`, and K is padded to whole blocks
  // from the start of the first, each with its f32 scale.
  static int64_t fp8_packed_row_bytes(int64_t col0, int64_t k, int64_t block_cols);

  // y[m, :] = x[m, :] · Wᵀ for m in [0, M). Rows of x are `ldx` floats apart (default K),
  // rows of y `ldy` apart (default N); y must not overlap x. Uses the process thread pool.
  void forward(const float* x, int64_t m, float* y, int64_t ldx = -1, int64_t ldy = -1) const;

  // True when forward() with M = m runs the hand-written small-M kernels. Called inside a
  // parallel region those run on the calling thread alone, so a caller with many small
  // products (per-head or per-expert weights) may run them as one region across the weights.
  // Large M goes to oneDNN, whose primitives split work for the thread count they were built
  // for and so must not be called from inside a region.
  bool small_m(int64_t m) const;

  // forward() as 64-row blocks, for callers that share one product's blocks among threads
  // themselves (the decode MoE): forward_blocks computes y's columns of blocks [b0, b1) on the
  // calling thread, bit for bit those of forward(). Needs small_m(m); x rows are K floats
  // apart, y rows N.
  int64_t row_blocks() const;
  void forward_blocks(const float* x, int64_t m, float* y, int64_t b0, int64_t b1) const;

  // Each product as forward() computes it, bit for bit, but all those on the small-M kernels in
  // one parallel region over their 64-row blocks, shared out as one set: for independent
  // products of which some are too small to share out alone (at decode the indexer's 64-row
  // key and 8-row head weights beside the attention's q_a / kv_a). The others (oneDNN's) run
  // first, one after another. forward() is the group of one.
  static void forward_group(std::span<const LinearProduct> products);

 private:
  struct Impl;
  // forward()'s stride defaults and checks.
  void check_strides(int64_t& ldx, int64_t& ldy) const;
  void pack_fp8(const std::vector<LinearSource>& parts, const std::vector<int64_t>& first_row);
  int64_t n_ = 0;
  int64_t k_ = 0;
  tensor::DType dtype_ = tensor::DType::kF32;
  bool row_independent_ = false;
  size_t scale_bytes_ = 0;  // FP8: the f32 block scales as held
  std::unique_ptr<Impl> impl_;
};

}  // namespace handoff::ops
