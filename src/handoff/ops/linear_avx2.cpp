// AVX2 + FMA small-M kernels over the packed layout described in linear_kernels.h. A 32-byte
// load covers 8 rows (a "lane" here) of one k (f32) or 8 rows × the k pair (bf16), so a 64-row
// block is 8 lanes. With 16 vector registers a tile holds at most 12 accumulators: 8 lanes × 1
// row of x (decode), or 4 lanes × 3 rows, the block then being walked in two lane groups.
// On CPUs where oneDNN has no bf16 matmul (AVX2 only) these kernels also run bf16 prefill.
#include <immintrin.h>

#include <algorithm>

#include "handoff/ops/linear.h"
#include "handoff/ops/linear_kernels.h"

namespace handoff::ops::detail::avx2 {

namespace {

constexpr int64_t kLanes = kRowBlock / 8;
// K per chunk when more than one pass walks a block, for prefill (more than 16 rows of x): the
// chunk's slice of a 64-row block is 128 KiB (bf16) or 256 KiB (f32), so passes after the first
// re-read it from L2, and the next chunk can be prefetched beside it. (Chosen when it also served
// batched decode: routed experts of K = 7168, from DRAM, 2 threads, Zen 3, took 0.92 of the time
// at 2 rows and 0.78 at 3 than with whole-K passes.)
constexpr int64_t kKChunk = 1024;
// Batched decode cuts finer. 2-5 rows (the routed experts of a batch of 16): a 16 KiB slice
// (bf16) whose passes re-read it from L1 while the next one arrives; 6-16 rows (the batch's
// dense products, compute-bound): 64 KiB. With 128 for 2-16 rows the batched step of 16 took
// 0.93-0.97 of its time with kKChunk (bench-moe-dsa, 2 threads, Zen 3, alternating in one
// process; 64 gained nothing), and 512 for 6-16 rows then 0.97-1.01 (median 0.98) of that;
// prefill's hundreds of rows keep kKChunk, to which 128 lost 7-20 %.
constexpr int64_t kKChunkFewRows = 128;
constexpr int64_t kFewRows = 5;
constexpr int64_t kKChunkBatch = 512;
// Software prefetch distance along a lane's weight stream.
constexpr int kPrefetchBytes = 1024;
// Largest unit (one block's k chunk) whose successor is prefetched while several passes walk
// it: the two together stay within half of Zen 3's 512 KiB L2.
constexpr int64_t kRunAheadMaxBytes = 128 << 10;

// When several passes walk one unit (a 64-row block's k chunk: rows of x beyond the first pass,
// lane groups), all but the first find it in L2 and would leave DRAM idle. Instead every k step
// of every pass prefetches a share of the next unit (the memory right after: the next chunk or
// block), so the unit's passes together fetch the next one once, spread over their time.
struct RunAhead {
  const char* next = nullptr;
  int64_t bytes = 0;     // of the next unit
  int64_t pos = 0;       // bytes of it prefetched so far
  int64_t per_step = 0;  // ≤ kLines · 64: unit bytes over all passes' steps (at least two passes)

  // The lines from pos to pos + per_step: one prefetch per 64 bytes of per_step, so that many
  // passes (small per_step) do not prefetch each line many times over.
  template <int kLines>
  void step() {
    if (pos < bytes)
#pragma GCC unroll 4
      for (int l = 0; l < kLines; ++l)
        if (l == 0 || 64 * l < per_step) _mm_prefetch(next + pos + 64 * l, _MM_HINT_T0);
    pos += per_step;
  }
};

__m256i row_mask(int64_t valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(valid, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Store (or add to y when `accumulate`) the 8 rows from row0 of one row of x; with `scale`, as
// y (+)= r · scale in one rounding, the FP8 kernel's epilogue.
inline void store_rows(const PackedWeight& w, float* out, int64_t row0, __m256 r, bool accumulate,
                       const float* scale) {
  const int64_t valid = w.n - row0;
  if (valid <= 0) return;
  const __m256i mask = row_mask(valid);
  const bool full = valid >= 8;
  const __m256 prev = !accumulate ? _mm256_setzero_ps()
                      : full      ? _mm256_loadu_ps(out)
                                  : _mm256_maskload_ps(out, mask);
  if (scale != nullptr) {
    const __m256 s = full ? _mm256_loadu_ps(scale) : _mm256_maskload_ps(scale, mask);
    r = _mm256_fmadd_ps(r, s, prev);
  } else if (accumulate) {
    r = _mm256_add_ps(r, prev);
  }
  if (full)
    _mm256_storeu_ps(out, r);
  else
    _mm256_maskstore_ps(out, mask, r);
}

// Lanes [lane0, lane0 + NB) of block b × MR rows of x, over k in [k0, k1). When NB·MR is small,
// even and odd k go to separate accumulators so enough FMA chains are in flight to hide the
// FMA latency. When `accumulate`, adds to what y holds (a previous k chunk).
template <bool kBF16, bool kAhead, int NB, int MR>
void tile(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
          int64_t lane0, int64_t k0, int64_t k1, bool accumulate, RunAhead& ahead,
          const float* scales = nullptr) {
  constexpr bool kSplit = NB * MR <= 4;
  constexpr int kAcc = kSplit ? 2 : 1;
  // Every loop over acc is unrolled (the pragmas) so its indices are constants early enough for
  // GCC to keep acc in registers: without them it stored all of acc to the stack on every k pair
  // (8 stores per 16 FMAs at NB = 8).
  __m256 acc[kAcc][NB][MR];
#pragma GCC unroll 2
  for (int s = 0; s < kAcc; ++s)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[s][j][i] = _mm256_setzero_ps();

  const int64_t kp = w.k_pad;
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  // A block walked in two lane groups (3 rows of x): the first group also prefetches the
  // second's lines, which it then finds in L2, instead of each group reading half of every k
  // row from DRAM on its own (experts from DRAM, 3 rows: 2-6 % less time, Zen 3).
  const bool fetch_next_group = NB < kLanes && lane0 == 0 && w.n - b * kRowBlock > NB * 8;
  RunAhead a = ahead;  // a local copy stays in registers
  for (int64_t k = k0; k < k1; k += 2) {
    if constexpr (kAhead) a.step<kBF16 ? 2 : 4>();
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) {
      __m256 w0, w1;
      const int64_t lane = lane0 + j;
      if constexpr (kBF16) {
        const auto* p = static_cast<const uint16_t*>(w.data) + (b * kp + k) * kRowBlock + lane * 16;
        if (lane % 2 == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
          if (fetch_next_group)
            _mm_prefetch(reinterpret_cast<const char*>(p + NB * 16) + kPrefetchBytes, _MM_HINT_T0);
        }
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        w0 = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        w1 = _mm256_castsi256_ps(_mm256_and_si256(v, hi_mask));
      } else {
        const auto* p = static_cast<const float*>(w.data) + (b * kp + k) * kRowBlock + lane * 8;
        if (lane % 2 == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(p + kRowBlock) + kPrefetchBytes, _MM_HINT_T0);
          if (fetch_next_group) {
            _mm_prefetch(reinterpret_cast<const char*>(p + NB * 8) + kPrefetchBytes, _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(p + kRowBlock + NB * 8) + kPrefetchBytes,
                         _MM_HINT_T0);
          }
        }
        w0 = _mm256_loadu_ps(p);
        w1 = _mm256_loadu_ps(p + kRowBlock);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        acc[0][j][i] = _mm256_fmadd_ps(w0, _mm256_broadcast_ss(x + i * ldx + k), acc[0][j][i]);
        acc[kAcc - 1][j][i] =
            _mm256_fmadd_ps(w1, _mm256_broadcast_ss(x + i * ldx + k + 1), acc[kAcc - 1][j][i]);
      }
    }
  }
  ahead = a;
#pragma GCC unroll 8
  for (int j = 0; j < NB; ++j) {
    const int64_t row0 = b * kRowBlock + (lane0 + j) * 8;
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      __m256 r = acc[0][j][i];
      if constexpr (kSplit) r = _mm256_add_ps(r, acc[1][j][i]);
      store_rows(w, y + i * ldy + row0, row0, r, accumulate,
                 scales != nullptr ? scales + (lane0 + j) * 8 : nullptr);
    }
  }
}

// Rows of x per tall tile (below). Each weight vector feeds R FMAs (L2 reads per FMA about half
// the 4 × 3 tile's). f32 needs 2R accumulators, two weight vectors and one broadcast (15
// registers at R = 6); bf16 also keeps the two raw loads and the high-half mask live, so it takes
// R = 5 to stay within 16.
template <bool kBF16>
constexpr int kTallRows = kBF16 ? static_cast<int>(kTallRowsBf16) : 6;

// The tall tiles' sums: R rows of x against two lanes, as named variables (written as arrays,
// GCC kept some on the stack and the store-to-load latency ran the loop at ~60 % of the FMA
// peak).
template <int R>
struct TallSums {
  static_assert(R == 5 || R == 6);
  const float *x0, *x1, *x2, *x3, *x4, *x5;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;

  TallSums(const float* x, int64_t ldx)
      : x0(x),
        x1(x + ldx),
        x2(x + 2 * ldx),
        x3(x + 3 * ldx),
        x4(x + 4 * ldx),
        x5(x + (R - 1) * ldx) {}

  // Row r's sums += wa · x_r[k] and wb · x_r[k].
  void step(__m256 wa, __m256 wb, int64_t k) {
    auto row = [&](const float* xr, __m256& a, __m256& b) {
      const __m256 t = _mm256_broadcast_ss(xr + k);
      a = _mm256_fmadd_ps(wa, t, a);
      b = _mm256_fmadd_ps(wb, t, b);
    };
    row(x0, a0, b0);
    row(x1, a1, b1);
    row(x2, a2, b2);
    row(x3, a3, b3);
    row(x4, a4, b4);
    if constexpr (R > 5) row(x5, a5, b5);
  }

  // The k pair (k, k + 1) of the two bf16 lanes at q (each 32-bit lane holds k's weight low,
  // k + 1's high). The odd k's weights are loaded again after the even k's FMAs (an L1 hit):
  // kept from the first load, the two raw vectors pushed accumulators onto the stack.
  void bf16_pair(const __m256i* q, int64_t k) {
    step(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(q), 16)),
         _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(q + 1), 16)), k);
    asm volatile("" ::: "memory");
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    step(_mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(q), hi)),
         _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(q + 1), hi)), k + 1);
  }

  // put(i, row i's sums of the two lanes) for every row.
  template <typename Put>
  void each(const Put& put) const {
    put(0, a0, b0);
    put(1, a1, b1);
    put(2, a2, b2);
    put(3, a3, b3);
    put(4, a4, b4);
    if constexpr (R > 5) put(5, a5, b5);
  }
};

// Lanes lane0, lane0 + 1 of block b × R rows of x over k in [k0, k1): the prefill tile.
template <bool kBF16, bool kAhead, int R>
void tall_tile(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
               int64_t lane0, int64_t k0, int64_t k1, bool accumulate, RunAhead& ahead) {
  TallSums<R> sums(x, ldx);
  const int64_t kp = w.k_pad;
  RunAhead a = ahead;
  for (int64_t k = k0; k < k1; k += 2) {
    if constexpr (kAhead) a.step<kBF16 ? 2 : 4>();
    if constexpr (kBF16) {
      const auto* p = static_cast<const uint16_t*>(w.data) + (b * kp + k) * kRowBlock + lane0 * 16;
      _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
      sums.bf16_pair(reinterpret_cast<const __m256i*>(p), k);
    } else {
      const auto* p = static_cast<const float*>(w.data) + (b * kp + k) * kRowBlock + lane0 * 8;
      _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + kRowBlock) + kPrefetchBytes, _MM_HINT_T0);
      sums.step(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), k);
      sums.step(_mm256_loadu_ps(p + kRowBlock), _mm256_loadu_ps(p + kRowBlock + 8), k + 1);
    }
  }
  ahead = a;
  const int64_t row0 = b * kRowBlock + lane0 * 8;
  // When both lanes hold rows (all but a matrix's last block), store_rows' sums without its
  // masks, the accumulators stored from registers.
  const bool full = w.n - row0 >= 16;
  auto put = [&](int i, __m256 va, __m256 vb) {
    float* out = y + i * ldy + row0;
    if (!full) {
      store_rows(w, out, row0, va, accumulate, nullptr);
      store_rows(w, out + 8, row0 + 8, vb, accumulate, nullptr);
      return;
    }
    if (accumulate) {
      va = _mm256_add_ps(va, _mm256_loadu_ps(out));
      vb = _mm256_add_ps(vb, _mm256_loadu_ps(out + 8));
    }
    _mm256_storeu_ps(out, va);
    _mm256_storeu_ps(out + 8, vb);
  };
  sums.each(put);
}

// The FP8 prefill tile: tall_tile's 2 lanes × 5 rows over a 64-row block widened to unscaled
// bf16 (`w`, a chunk of whole k blocks), each k block of k_block columns summed on its own and
// then y (+)= partial · its row scales (`scales` + kb · kRowBlock). One call walks all k blocks
// of the chunk for its lane pair: one call per k block, with its set-up and a mispredicted loop
// exit each 64 k pairs, took 1.02-1.10 × the time (Zen 3, 1 and 2 threads, prefill shapes).
// Kept out of line: inlined into its caller, GCC reloaded the high-half mask from the stack every
// k pair.
[[gnu::noinline]] void scaled_tall_tile(const PackedWeight& w, const float* x, int64_t ldx,
                                        float* y, int64_t ldy, int64_t lane0, int64_t k_block,
                                        const float* scales, bool accumulate) {
  const int64_t row0 = lane0 * 8;
  const bool full = w.n - row0 >= 16;
  const auto* data = static_cast<const uint16_t*>(w.data) + lane0 * 16;
  for (int64_t k0 = 0; k0 < w.k_pad; k0 += k_block) {
    TallSums<kTallRowsBf16> sums(x, ldx);
    for (int64_t k = k0; k < k0 + k_block; k += 2) {
      const auto* q = reinterpret_cast<const __m256i*>(data + k * kRowBlock);
      // The chunk is in L2; the tile's next lines are asked for into L1 (1.025-1.06 × the
      // GFLOP/s on prefill shapes, Zen 3, alternating in one process).
      _mm_prefetch(reinterpret_cast<const char*>(q) + kPrefetchBytes, _MM_HINT_T0);
      sums.bf16_pair(q, k);
    }
    const float* s = scales + k0 / k_block * kRowBlock + row0;
    const bool acc = accumulate || k0 > 0;
    if (!full) {  // a matrix's last block: store_rows masks the rows past n
      sums.each([&](int i, __m256 va, __m256 vb) {
        store_rows(w, y + i * ldy + row0, row0, va, acc, s);
        store_rows(w, y + i * ldy + row0 + 8, row0 + 8, vb, acc, s + 8);
      });
      continue;
    }
    const __m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
    sums.each([&](int i, __m256 va, __m256 vb) {
      float* out = y + i * ldy + row0;
      const __m256 pa = acc ? _mm256_loadu_ps(out) : _mm256_setzero_ps();
      const __m256 pb = acc ? _mm256_loadu_ps(out + 8) : _mm256_setzero_ps();
      _mm256_storeu_ps(out, _mm256_fmadd_ps(va, s0, pa));
      _mm256_storeu_ps(out + 8, _mm256_fmadd_ps(vb, s1, pb));
    });
  }
}

// MR rows of x against the lanes [0, lanes) of block b, NB lanes at a time.
template <bool kBF16, bool kAhead, int NB, int MR>
void lane_groups(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy,
                 int64_t b, int64_t lanes, int64_t k0, int64_t k1, bool accumulate, RunAhead& ahead,
                 const float* scales = nullptr) {
  for (int64_t g = 0; g < lanes; g += NB) {
    auto run_tile = [&]<int kNB>() {
      tile<kBF16, kAhead, kNB, MR>(w, x, ldx, y, ldy, b, g, k0, k1, accumulate, ahead, scales);
    };
    switch (std::min<int64_t>(NB, lanes - g)) {
      case 1:
        run_tile.template operator()<1>();
        break;
      case 2:
        run_tile.template operator()<2>();
        break;
      case 3:
        run_tile.template operator()<3>();
        break;
      case 4:
        run_tile.template operator()<4>();
        break;
      default:
        if constexpr (NB > 4) {
          switch (lanes - g) {
            case 5:
              run_tile.template operator()<5>();
              break;
            case 6:
              run_tile.template operator()<6>();
              break;
            case 7:
              run_tile.template operator()<7>();
              break;
            default:
              run_tile.template operator()<8>();
              break;
          }
        }
        break;
    }
  }
}

// Tile invocations over one unit of a block with `lanes` lanes for m rows of x, as unit() below
// makes them: how many passes share the next unit's prefetch.
template <bool kBF16>
int64_t passes(int64_t m, int64_t lanes) {
  const int64_t tall = m / kTallRows<kBF16>, rest = m % kTallRows<kBF16>;
  const int64_t four_lane_groups = (lanes + 3) / 4;
  int64_t n = tall * ((lanes + 1) / 2) + rest / 3 * four_lane_groups;
  return n + (rest % 3 == 0 ? 0 : rest % 3 == 1 ? 1 : 2);
}

// All m rows of x over k in [k0, k1) of block b: rows in tall tiles (2 lanes × kTallRows), the
// rest in tiles of 3 (4 lanes wide); one or two rows take all 8 lanes, a row at a time: the
// second row's pass reads the block from L2, and two such passes took 0.91-1.0 of the time of a
// 4-lane × 2-row tile (experts from DRAM, 2 threads, Zen 3, alternating in one process).
template <bool kBF16, bool kAhead>
void unit(const PackedWeight& w, const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy,
          int64_t b, int64_t lanes, int64_t k0, int64_t k1, bool acc, RunAhead& ahead) {
  int64_t i = 0;
  for (; m - i >= kTallRows<kBF16>; i += kTallRows<kBF16>)
    // An odd last lane pairs with a padding lane: zero weights, rows past n not stored.
    for (int64_t g = 0; g < lanes; g += 2)
      tall_tile<kBF16, kAhead, kTallRows<kBF16>>(w, x + i * ldx, ldx, y + i * ldy, ldy, b, g, k0,
                                                 k1, acc, ahead);
  for (; i < m; i += 3) {
    const float* xi = x + i * ldx;
    float* yi = y + i * ldy;
    switch (std::min<int64_t>(3, m - i)) {
      case 1:
        lane_groups<kBF16, kAhead, 8, 1>(w, xi, ldx, yi, ldy, b, lanes, k0, k1, acc, ahead);
        break;
      case 2:
        lane_groups<kBF16, kAhead, 8, 1>(w, xi, ldx, yi, ldy, b, lanes, k0, k1, acc, ahead);
        lane_groups<kBF16, kAhead, 8, 1>(w, xi + ldx, ldx, yi + ldy, ldy, b, lanes, k0, k1, acc,
                                         ahead);
        break;
      default:
        lane_groups<kBF16, kAhead, 4, 3>(w, xi, ldx, yi, ldy, b, lanes, k0, k1, acc, ahead);
        break;
    }
  }
}

template <bool kBF16>
void run(const PackedWeight& w, const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy,
         int64_t b0, int64_t b1, bool accumulate) {
  const int64_t kp = w.k_pad;
  const int64_t chunk = m == 1                ? kp
                        : m <= kFewRows       ? kKChunkFewRows
                        : m <= kDecodeRowsMax ? kKChunkBatch
                                              : kKChunk;
  constexpr int64_t kRowBytes = kRowBlock * (kBF16 ? 2 : 4);  // of one k in a block
  const char* data = static_cast<const char*>(w.data);
  // The run-ahead may pass b1: the pool deals each thread a contiguous run of blocks, and a
  // thread's next claim of a routed expert's blocks usually follows its last (0.83 of the
  // batched step's time against 0.94 when stopped at b1, Zen 3).
  const char* end = data + w.n_blocks * kp * kRowBytes;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t lanes = std::min<int64_t>(kLanes, (w.n - b * kRowBlock + 7) / 8);
    const int64_t n_passes = passes<kBF16>(m, lanes);
    for (int64_t k0 = 0; k0 < kp; k0 += chunk) {
      const int64_t k1 = std::min(kp, k0 + chunk);
      const bool acc = accumulate || k0 > 0;
      const int64_t bytes = (k1 - k0) * kRowBytes;
      RunAhead ahead;
      if (n_passes >= 2 && bytes <= kRunAheadMaxBytes) {
        ahead.next = data + (b * kp + k1) * kRowBytes;
        ahead.bytes = std::min<int64_t>(bytes, end - ahead.next);
        const int64_t steps = n_passes * ((k1 - k0) / 2);
        ahead.per_step = (ahead.bytes + steps - 1) / steps;
        unit<kBF16, true>(w, x, ldx, m, y, ldy, b, lanes, k0, k1, acc, ahead);
      } else {
        unit<kBF16, false>(w, x, ldx, m, y, ldy, b, lanes, k0, k1, acc, ahead);
      }
    }
  }
}

}  // namespace

void linear_small_m(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1) {
  if (w.dtype == tensor::DType::kBF16) {
    run<true>(w, x, w.k_pad, m, y, ldy, b0, b1, false);
  } else {
    run<false>(w, x, w.k_pad, m, y, ldy, b0, b1, false);
  }
}

int64_t linear_tall_bf16_scaled(const PackedWeight& w, const float* x, int64_t ldx, int64_t m,
                                float* y, int64_t ldy, int64_t k_block, const float* scales,
                                bool accumulate) {
  const int64_t lanes = std::min<int64_t>(kLanes, (w.n + 7) / 8);
  int64_t i = 0;
  for (; m - i >= kTallRowsBf16; i += kTallRowsBf16)
    for (int64_t g = 0; g < lanes; g += 2)
      scaled_tall_tile(w, x + i * ldx, ldx, y + i * ldy, ldy, g, k_block, scales, accumulate);
  // The rest (up to 4 rows) as the bf16 kernels take them, on the widened chunk, while a
  // direct pass would convert the block's FP8 again (1.01-1.09 × the GFLOP/s at m = 6 to 64,
  // Zen 3). A block of under 57 rows (fewer than 8 lanes) would take narrower tiles that split
  // their sums by k parity, which the direct path does not: its rows stay with the caller, so
  // that a row's result never depends on m.
  if (i == m || lanes < kLanes) return i;
  RunAhead none;
  const float* xi = x + i * ldx;
  float* yi = y + i * ldy;
  for (int64_t k0 = 0; k0 < w.k_pad; k0 += k_block) {
    const float* s = scales + k0 / k_block * kRowBlock;
    const bool acc = accumulate || k0 > 0;
    const int64_t k1 = k0 + k_block;
    auto one_row = [&](int64_t r) {
      lane_groups<true, false, 8, 1>(w, xi + r * ldx, ldx, yi + r * ldy, ldy, 0, kLanes, k0, k1,
                                     acc, none, s);
    };
    if (m - i >= 3)
      lane_groups<true, false, 4, 3>(w, xi, ldx, yi, ldy, 0, kLanes, k0, k1, acc, none, s);
    for (int64_t r = m - i >= 3 ? 3 : 0; r < m - i; ++r) one_row(r);
  }
  return m;
}

}  // namespace handoff::ops::detail::avx2
