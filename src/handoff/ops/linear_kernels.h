#pragma once
// Internal: the packed weight layout shared by LinearWeight and its small-M kernels.
//
// Rows are grouped in blocks of 64 (N padded with zero rows), K is padded with zeros to a
// multiple of 16 (32 for bf16), and within a block the rows are interleaved so each 64-byte
// load covers 16 output rows (a "lane"), and a block is one contiguous stream in k order:
//   f32:  [N/64][K][64]          (oneDNN's BA16a64b for the K×N matrix Wᵀ)
//   bf16: [N/64][K/2][64][2]     (oneDNN's BA16a64b2a)
// One stream per block matters: separate per-16-row streams a power of two apart ran well
// below the machine's read bandwidth. A bf16 load gives 16 rows × 2 consecutive k; shifting
// each 32-bit lane left by 16 yields the even k in f32, masking off the low half the odd k. The
// small-M kernels broadcast x[m][k] and FMA into 16-row accumulators, so they never need horizontal
// reductions, and each weight byte is read from memory once for all M rows. oneDNN reads the same
// buffer for large M.
//
// FP8 (e4m3 bytes): [N/64][K_pad][64], one 64-byte line per k holding the block's 64 rows (in
// the order fp8_row_offset gives, so one 32-bit lane holds four rows 8 apart), and
// f32 scales [N/64][K_pad / k_block][64], one per row and k block (per row, not per 128 rows, so
// fused parts and tensor-parallel slices need not start on a block boundary). The K axis is the
// quantisation grid's: it starts `k_lead` zero columns before the matrix's first column (a slice
// starting inside a block) and ends padded to whole blocks, so each k block of the layout is one
// scale block. Kernels sum a k block in f32, then add partial · scale.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "handoff/tensor/dtype.h"

namespace handoff::ops::detail {

inline constexpr int64_t kRowBlock = 64;
inline constexpr int64_t kLane = 16;  // rows per 64-byte vector
inline constexpr int64_t kKAlign = 16;

// Byte of row r (of 64) within an FP8 block's line for one k: each 32-row half keeps row
// 8·q + j in byte q of its 32-bit lane j, so the AVX2 kernel widens a lane's four bytes into four
// vectors of 8 consecutive rows with shifts alone.
inline constexpr int64_t fp8_row_offset(int64_t r) {
  return (r / 32) * 32 + (r % 8) * 4 + (r % 32) / 8;
}

struct PackedWeight {
  tensor::DType dtype;
  int64_t n;
  int64_t k_pad;     // multiple of kKAlign (of 2·kKAlign for bf16)
  int64_t n_blocks;  // ceil(n / kRowBlock)
  const void* data;
  // FP8 only.
  const float* scales = nullptr;  // [n_blocks][k_pad / k_block][kRowBlock]
  int64_t k_block = 0;            // columns per scale block; k_pad is a multiple of it
  int64_t k_lead = 0;             // zero columns before the matrix's first one
};

// The 16-row lanes of block b that hold rows of the matrix (the last block may have fewer than 4).
inline int64_t live_lanes(const PackedWeight& w, int64_t b) {
  const int64_t lanes = (w.n - b * kRowBlock + kLane - 1) / kLane;
  return lanes < 4 ? lanes : 4;
}

// y[i, r] for i in [0, m), rows r of blocks [b0, b1). x is [m][k_pad] with zero padding
// (ldx = k_pad; for FP8 the matrix's columns start at k_lead), so the kernels need no K tail
// handling.
using SmallMKernel = void (*)(const PackedWeight& w, const float* x, int64_t m, float* y,
                              int64_t ldy, int64_t b0, int64_t b1);

void linear_small_m_portable(const PackedWeight& w, const float* x, int64_t m, float* y,
                             int64_t ldy, int64_t b0, int64_t b1);

// FP8 weights (the dtype is kF8E4M3); same contract.
void linear_small_m_fp8_portable(const PackedWeight& w, const float* x, int64_t m, float* y,
                                 int64_t ldy, int64_t b0, int64_t b1);

// Rows of x up to which the AVX-512 FP8 kernel converts the weights in registers for every row
// tile; beyond, it widens each block once per chunk for all rows.
inline constexpr int64_t kFp8DirectRowsMax = 4;
namespace avx512 {
// Shared by the AVX-512 FMA kernels (linear_avx512.cpp) and the vdpbf16ps ones
// (linear_avx512bf16.cpp).
// K per chunk when x has more than 4 rows: a 64-row block slice is 128 KiB (bf16) or
// 256 KiB (f32). A multiple of 32, so chunks keep bf16 k pairs whole.
inline constexpr int64_t kKChunk = 1024;
// Software prefetch distance of the bf16/f32 tiles that re-read a K chunk from L2, and (off AMD)
// the L1 prefetch of the FP8 decode tile, which has its own L2 prefetch. It was first the
// distance of every tile: without it the then M = 4 kernel streamed at ~18 GB/s against
// ~25-27 GB/s with it (1 thread); the bf16/f32 tiles that stream from memory now use
// kDecodePrefetchBytes.
inline constexpr int kPrefetchBytes = 1024;
// Tiles that read their weights from memory (decode's, M <= 4, over the whole K; and the first
// row tile of each K chunk when x has more rows): 4 KiB ahead streamed 38-42 GB/s against 36-39
// at 1 KiB (standalone M = 1 tile, 2 threads, Zen 5, 2026-12-04); beside 4 chain sets, 48-52
// against 38. At M = 3 and 4 (a batched step's experts) 1 KiB read 23-24 GB/s against 26-29 at
// 4 KiB, and 8 or 16 KiB no more (BM_ExpertsFromDram, 2 threads, Intel Xeon, 2026-12-05). For
// 6-16 rows (a batched step's other products) 4 KiB in the first tile gave ~1.14x at M = 6,
// ~1.05x at M = 8 and ~1.02x at M = 16 (medians, Zen 5, 2026-12-06, docs/performance.md).
inline constexpr int kDecodePrefetchBytes = 4096;
// FP8 decode reads one 64-byte line per k, a quarter of bf16's bytes per step, so the L1
// prefetch alone kept too few lines in flight: 7.4 GB/s per thread from DRAM against bf16's 13.7
// (BM_ExpertsFromDram, Intel AMX Xeon, 2026-12-02). A second prefetch, into L2 16 KiB ahead, took
// it to 9-11 (2 threads: 17.8 -> 20-24 GB/s); 4 and 64 KiB ahead did less.
inline constexpr int kFp8L2PrefetchBytes = 16384;
// On AMD the FP8 decode tile instead takes one non-temporal prefetch this far ahead (see
// Source): against the L1 + L2 pair, bf16 head aside, FP8 decode steps on bench-moe took
// 1.14-1.21x less time at 8 KiB, 1.16-1.18x at 4, 1.08-1.10x at 2 and 1.10-1.15x at 16
// (alternating blocks of 25 steps in one process, 2-core Zen 5, 2026-12-06).
inline constexpr int kFp8NonTemporalPrefetchBytes = 8192;
// FP8 prefill: columns per widened chunk (whole k blocks), 64 rows × 512 × 2 bytes = 64 KiB.
inline constexpr int64_t kWidenCols = 512;
// Any m (prefill too): rows of x beyond the first four re-read each block from L2.
void linear_small_m(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1);
// FP8, any m; the same sums as the AVX2 kernels, bit for bit.
void linear_small_m_fp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                        int64_t b0, int64_t b1);
}  // namespace avx512
namespace avx512bf16 {
// bf16 weights against x already rounded to bf16: xb is [m][k_pad] bf16, zero past K. Each
// row's dot product sums its k pairs as vdpbf16ps does (k + 1, then k, each as an FMA), not in
// the FMA kernels' order. Needs AVX512_BF16 (bf16_dot_products()).
void linear_bf16_dot(const PackedWeight& w, const uint16_t* xb, int64_t m, float* y, int64_t ldy,
                     int64_t b0, int64_t b1);
// FP8 weights, the same contract (xb's columns on the quantisation grid: k_lead zeros first);
// each k block's sum then y (+)= sum · scale, as the FMA kernels apply the scales.
void linear_fp8_dot(const PackedWeight& w, const uint16_t* xb, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1);
}  // namespace avx512bf16
namespace avx2 {
void linear_small_m(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1);
void linear_small_m_fp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                        int64_t b0, int64_t b1);
// Rows of x per bf16 prefill tile.
inline constexpr int64_t kTallRowsBf16 = 5;
// The bf16 kernels over one 64-row block `w` (bf16 layout, unscaled: the FP8 kernel's e4m3
// values widened) for m rows of x (x's columns start at w's first): each k block of k_block
// columns is summed in one chain per output, then y (+)= partial · scale, the block's row
// scales being `scales` + kb · kRowBlock. Takes all m rows of a whole block and the first
// m - m % 5 of a partial one; returns the rows done, the rest being the caller's.
int64_t linear_tall_bf16_scaled(const PackedWeight& w, const float* x, int64_t ldx, int64_t m,
                                float* y, int64_t ldy, int64_t k_block, const float* scales,
                                bool accumulate);
// Columns [c0, c1) (even) of FP8 block b of w, unscaled, in the bf16 layout [K/2][64][2] at `out`
// (e4m3 values are exact in bf16). The codes are prefetched as the AVX-512 FP8 decode tiles
// prefetch theirs: that took the AMX tiles at 8 and 16 rows of an 8192 x 8192 FP8 matrix from
// DRAM to 1.3-1.4x the GFLOP/s on a 2-core Xeon (without it the widening waited on DRAM); for
// the AVX2 kernels' own chunks it changed nothing measurable (Zen 3, docs/performance.md).
void dequantize_block_bf16(const PackedWeight& w, int64_t b, int64_t c0, int64_t c1, uint16_t* out);
}  // namespace avx2

// FP8 blocks [b0, b1) of w for prefill-sized x, as the AVX-512 paths run them: each block a
// chunk of whole k blocks (about avx512::kWidenCols columns) at a time, widened to bf16 (exact)
// into a per-thread buffer; body(part, c0, row0, scales): `part` the chunk as one bf16 block,
// c0 its first column, row0 the block's first row, `scales` the row scales of its first k block.
template <typename Body>
void for_each_widened_fp8_chunk(const PackedWeight& w, int64_t b0, int64_t b1, const Body& body) {
  const int64_t nkb = w.k_pad / w.k_block;
  const int64_t chunk_cols = w.k_block * std::max<int64_t>(1, avx512::kWidenCols / w.k_block);
  thread_local std::vector<uint16_t> chunk;  // only grows: no allocation in steady state
  chunk.resize(static_cast<size_t>(chunk_cols * kRowBlock));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t row0 = b * kRowBlock;
    for (int64_t c0 = 0; c0 < w.k_pad; c0 += chunk_cols) {
      const int64_t c1 = std::min(w.k_pad, c0 + chunk_cols);
      avx2::dequantize_block_bf16(w, b, c0, c1, chunk.data());
      const PackedWeight part{tensor::DType::kBF16, std::min(kRowBlock, w.n - row0), c1 - c0, 1,
                              chunk.data()};
      body(part, c0, row0, w.scales + (b * nkb + c0 / w.k_block) * kRowBlock);
    }
  }
}
namespace amx {
// Rows of x from which products run on the tiles: fewer would be padded to a 16-row tile, and the
// FMA kernels already read each weight once for them. With one 16-row tile per pass (x as hi +
// lo halves), 16 decode rows streamed bf16 weights at 1.3-2x the FMA kernels' rate on a 2-core
// Xeon, 8 rows about level (docs/performance.md, "A Xeon with AMX").
inline constexpr int64_t kMinRows = kFp8DirectRowsMax + 1;
// Rows of x as the AMX kernels take them: zero-padded to whole 16-row tiles.
int64_t padded_rows(int64_t m);
// x ([m][k_pad] f32, as the SmallMKernels take it) to `parts` bf16 copies of padded_rows(m)
// rows each at xb: 1 = bf16(x); 2 = hi = bf16(x), then lo = bf16(x - hi).
void split_bf16(const float* x, int64_t m, int64_t k_pad, int parts, uint16_t* xb);
// bf16 or FP8 weights (FP8: k_block a multiple of 32), rows of blocks [b0, b1), from
// split_bf16's xb; y as in SmallMKernel. FP8 sums each k block in f32 tiles, then
// y (+)= sum · scale; bf16 sums all of K in the tiles.
void linear(const PackedWeight& w, const uint16_t* xb, int parts, int64_t m, float* y, int64_t ldy,
            int64_t b0, int64_t b1);
}  // namespace amx

}  // namespace handoff::ops::detail
