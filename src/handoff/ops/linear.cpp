// LinearWeight: packing at load, the small-M (decode) path over our own kernels and the
// large-M (prefill) path over oneDNN matmul, both reading the one packed buffer.
#include "handoff/ops/linear.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include "handoff/error.h"
#include "handoff/ops/cpu_features.h"
#include "handoff/ops/linear_kernels.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::ops {

namespace {

using detail::kKAlign;
using detail::kRowBlock;
using tensor::DType;

constexpr int64_t kSmallMMax = kDecodeRowsMax;
// Distinct M kept as ready oneDNN primitives before the cache is reset.
constexpr size_t kMaxCachedPrimitives = 64;

int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// w[i] holds bytes (i, 0..7) of an 8 × 8 byte matrix, byte j at bits 8j; afterwards w[j] holds
// bytes (0..7, j): three rounds of swapping 1-, 2- and 4-byte squares across the diagonal.
void transpose_8x8_bytes(uint64_t (&w)[8]) {
  auto swap = [&](int a, int b, int shift, uint64_t mask) {
    const uint64_t t = ((w[a] >> shift) ^ w[b]) & mask;
    w[b] ^= t;
    w[a] ^= t << shift;
  };
  for (int i = 0; i < 8; i += 2) swap(i, i + 1, 8, 0x00ff00ff00ff00ffULL);
  for (int i : {0, 1, 4, 5}) swap(i, i + 2, 16, 0x0000ffff0000ffffULL);
  for (int i = 0; i < 4; ++i) swap(i, i + 4, 32, 0x00000000ffffffffULL);
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The work around a oneDNN call (activation split, hi + lo sum) runs on OpenMP's team, the one
// oneDNN uses, while it is awake; our own idle workers are told to sleep so the two teams do
// not compete for the cores.
template <typename Body>
void park_and_run_on_openmp(int64_t rows, const Body& body) {
  tensor::park_workers();
  const int threads = static_cast<int>(std::min<int64_t>(tensor::num_threads(), rows));
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (rows * t / nt < rows * (t + 1) / nt) body(rows * t / nt, rows * (t + 1) / nt);
  }
}

// Whether this oneDNN build has a real (non-reference) matmul for the packed layout in `dtype` on
// this CPU. oneDNN 2.6 runs BA16a64b(2a) weights with its brgemm kernels, which need AVX-512
// (avx512_core): on an AVX2-only CPU (e.g. Zen 3) a bf16 matmul cannot be created at all and an
// f32 one falls to `ref:any`, about 1000x slower than the hand-written kernels. Probed once per
// dtype with a tiny primitive; without it every M stays on the hand-written kernels.
bool onednn_fast_matmul(DType dtype) {
  auto probe = [](dnnl::memory::data_type wdt, dnnl::memory::format_tag wtag) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    try {
      const dnnl::matmul::desc desc(dnnl::memory::desc({32, 32}, wdt, tag::ab),
                                    dnnl::memory::desc({32, 64}, wdt, wtag),
                                    dnnl::memory::desc({32, 64}, dt::f32, tag::ab));
      const dnnl::matmul::primitive_desc pd(desc, cpu_engine());
      return std::string_view(pd.impl_info_str()).substr(0, 3) != "ref";
    } catch (const dnnl::error&) {
      return false;
    }
  };
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  static const bool bf16 = probe(dt::bf16, tag::BA16a64b2a);
  static const bool f32 = probe(dt::f32, tag::BA16a64b);
  return dtype == DType::kBF16 ? bf16 : f32;
}

// Row r of a 2-d float tensor of any dtype and strides, converted to f32.
void gather_row_f32(const tensor::Tensor& w, int64_t r, float* out) {
  const size_t size = tensor::dtype_size(w.dtype());
  const auto* base = static_cast<const uint8_t*>(w.raw()) + r * w.strides()[0] * int64_t(size);
  const int64_t k = w.size(1), cs = w.strides()[1];
  if (cs == 1) {
    tensor::convert_to_f32(w.dtype(), base, out, static_cast<size_t>(k));
    return;
  }
  for (int64_t c = 0; c < k; ++c)
    tensor::convert_to_f32(w.dtype(), base + c * cs * int64_t(size), out + c, 1);
}

}  // namespace

LinearSource::LinearSource(tensor::Tensor dense) : dense_(std::move(dense)) {
  if (dense_.dim() != 2)
    fail("LinearWeight: weight must be 2-d, got {}", tensor::shape_str(dense_.shape()));
  if (dense_.dtype() == DType::kF8E4M3)
    fail("LinearWeight: an F8_E4M3 matrix needs its block scales (tensor::Fp8Blocks)");
}

LinearSource::LinearSource(tensor::Fp8Blocks blocks) : fp8_(true), blocks_(std::move(blocks)) {
  if (blocks_.values.dim() != 2 || blocks_.values.dtype() != DType::kF8E4M3)
    fail("LinearWeight: FP8 values must be a 2-d F8_E4M3 tensor, got {} {}",
         tensor::dtype_name(blocks_.values.dtype()), tensor::shape_str(blocks_.values.shape()));
  if (blocks_.scales.dim() != 2 || blocks_.scales.dtype() != DType::kF32)
    fail("LinearWeight: FP8 block scales must be a 2-d F32 tensor");
  if (blocks_.block_rows <= 0 || blocks_.block_cols <= 0)
    fail("LinearWeight: FP8 block {}x{} is empty", blocks_.block_rows, blocks_.block_cols);
}

int64_t LinearSource::rows() const { return fp8_ ? blocks_.rows() : dense_.size(0); }
int64_t LinearSource::cols() const { return fp8_ ? blocks_.cols() : dense_.size(1); }

LinearSource LinearSource::slice(int64_t d, int64_t begin, int64_t end) const {
  if (fp8_) return LinearSource(blocks_.slice(d, begin, end));
  return LinearSource(dense_.slice(d, begin, end));
}

void LinearSource::row_f32(int64_t r, float* out) const {
  if (fp8_) {
    blocks_.dequantize_row(r, out);
  } else {
    gather_row_f32(dense_, r, out);
  }
}

tensor::Tensor LinearSource::to_f32() const {
  if (fp8_) return blocks_.dequantize();
  return dense_.dtype() == DType::kF32 && dense_.is_contiguous() ? dense_ : dense_.to(DType::kF32);
}

void detail::linear_small_m_fp8_portable(const PackedWeight& w, const float* x, int64_t m, float* y,
                                         int64_t ldy, int64_t b0, int64_t b1) {
  const int64_t kp = w.k_pad, nkb = kp / w.k_block;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t row0 = b * kRowBlock;
    const int64_t valid = std::min<int64_t>(kRowBlock, w.n - row0);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * kp;
      float acc[kRowBlock] = {};
      for (int64_t kb = 0; kb < nkb; ++kb) {
        float part[kRowBlock] = {};
        for (int64_t k = kb * w.k_block; k < (kb + 1) * w.k_block; ++k) {
          const auto* p = static_cast<const uint8_t*>(w.data) + (b * kp + k) * kRowBlock;
          for (int64_t r = 0; r < kRowBlock; ++r)
            part[r] += tensor::f8e4m3_to_f32(p[detail::fp8_row_offset(r)]) * xi[k];
        }
        const float* s = w.scales + (b * nkb + kb) * kRowBlock;
        for (int64_t r = 0; r < kRowBlock; ++r) acc[r] += part[r] * s[r];
      }
      std::memcpy(y + i * ldy + row0, acc, static_cast<size_t>(valid) * sizeof(float));
    }
  }
}

void detail::linear_small_m_portable(const PackedWeight& w, const float* x, int64_t m, float* y,
                                     int64_t ldy, int64_t b0, int64_t b1) {
  const int64_t kp = w.k_pad;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t row0 = b * kRowBlock;
    const int64_t valid = std::min<int64_t>(kRowBlock, w.n - row0);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * kp;
      float acc[kRowBlock] = {};
      if (w.dtype == DType::kBF16) {
        const auto* p = static_cast<const uint16_t*>(w.data) + b * kp * kRowBlock;
        for (int64_t k = 0; k < kp; k += 2, p += 2 * kRowBlock)
          for (int64_t r = 0; r < kRowBlock; ++r)
            acc[r] += tensor::bf16_to_f32(p[2 * r]) * xi[k] +
                      tensor::bf16_to_f32(p[2 * r + 1]) * xi[k + 1];
      } else {
        const auto* p = static_cast<const float*>(w.data) + b * kp * kRowBlock;
        for (int64_t k = 0; k < kp; ++k, p += kRowBlock)
          for (int64_t r = 0; r < kRowBlock; ++r) acc[r] += p[r] * xi[k];
      }
      std::memcpy(y + i * ldy + row0, acc, static_cast<size_t>(valid) * sizeof(float));
    }
  }
}

struct LinearWeight::Impl {
  tensor::Tensor packed;  // owns the packed buffer
  tensor::Tensor scales;  // FP8: owns the per-row block scales
  detail::PackedWeight pw{};
  int64_t k = 0;
  bool round_x = false;  // LinearWeight::rounds_activations(): rounds x for m > kSmallMMax

  struct Prim {
    dnnl::matmul matmul;
    dnnl::memory::desc src_md, wei_md, dst_md;
    size_t scratch_bytes = 0;
  };
  std::mutex mu;  // guards `prims`; a Prim, once built, is immutable and shared
  std::map<int64_t, std::shared_ptr<const Prim>> prims;  // by M

  std::shared_ptr<const Prim> prim(int64_t m);
  // x as the small-M kernels take it: dense rows of k_pad floats, zero-padded (rounded to bf16
  // when asked); on AMX beyond 4 rows also its bf16 copies for the tiles. Rounded x where vdpbf16ps
  // pays (bf16_dot_products(); bf16 or FP8 weights) is only its bf16 rows, in xb.
  struct Staged {
    const float* x = nullptr;
    const uint16_t* xb = nullptr;  // AMX: split_bf16's `parts` copies; bf16_dot: x in bf16
    int parts = 0;
    int64_t m = 0;
    bool bf16_dot = false;
  };
  // Stages x into `xpad` and `xb`, which grow as needed and must outlive the result.
  Staged stage(const float* x, int64_t m, int64_t ldx, std::vector<float>& xpad,
               std::vector<uint16_t>& xb) const;
  // y's columns of 64-row blocks [b0, b1) from staged x, on the calling thread.
  void run_blocks(const Staged& s, float* y, int64_t ldy, int64_t b0, int64_t b1) const;
  void forward_large(const float* x, int64_t m, float* y, int64_t ldx, int64_t ldy);
};

std::shared_ptr<const LinearWeight::Impl::Prim> LinearWeight::Impl::prim(int64_t m) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const bool bf16 = pw.dtype == DType::kBF16;
  std::lock_guard lock(mu);
  if (auto it = prims.find(m); it != prims.end()) return it->second;
  if (prims.size() >= kMaxCachedPrimitives) prims.clear();

  // oneDNN 2.6 only runs its fast (brgemm) matmul on dense activations; strided ones fall to
  // the reference implementation, so forward_large densifies x and y instead.
  auto p = std::make_shared<Prim>();
  // bf16: oneDNN 2.6's brgemm misreads BA16a64b2a weights whose K is not a multiple of its own
  // K block (rows past the first 16 columns come out wrong), so it is given the zero-padded
  // k_pad (a multiple of 32) as the logical K, with x zero-padded to match.
  const int64_t kk = bf16 ? pw.k_pad : k;
  p->src_md = dnnl::memory::desc({m, kk}, bf16 ? dt::bf16 : dt::f32, tag::ab);
  p->wei_md = dnnl::memory::desc({kk, pw.n}, bf16 ? dt::bf16 : dt::f32,
                                 bf16 ? tag::BA16a64b2a : tag::BA16a64b);
  p->dst_md = dnnl::memory::desc({m, pw.n}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::desc desc(p->src_md, p->wei_md, p->dst_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  p->scratch_bytes = pd.scratchpad_desc().get_size();
  p->matmul = dnnl::matmul(pd);
  prims.emplace(m, p);
  return p;
}

LinearWeight::Impl::Staged LinearWeight::Impl::stage(const float* x, int64_t m, int64_t ldx,
                                                     std::vector<float>& xpad,
                                                     std::vector<uint16_t>& xb) const {
  // The kernels want x dense and zero-padded to k_pad (rounded to bf16 when asked); copying
  // M·K floats is negligible next to streaming N·K weights, but threads that share one
  // product's blocks (forward_blocks) stage per call, so x that is already so is taken as is.
  // FP8: the columns start k_lead zeros in (the quantisation grid's origin).
  const bool round = round_x && m > kSmallMMax;
  const bool fp8 = pw.dtype == DType::kF8E4M3;
  const int64_t kp = pw.k_pad, lead = pw.k_lead;
  const bool tiles = m >= detail::amx::kMinRows && kernel_isa() >= Isa::kAmx &&
                     (pw.dtype == DType::kBF16 || (fp8 && pw.k_block % 32 == 0));
  if (kp == k && lead == 0 && !round && !tiles && (m == 1 || ldx == kp)) return {x, nullptr, 0, m};
  if (round && !tiles && bf16_dot_products()) {
    xb.resize(static_cast<size_t>(m * kp));
    for (int64_t i = 0; i < m; ++i) {
      uint16_t* row = xb.data() + i * kp;
      std::fill(row, row + lead, uint16_t{0});
      for (int64_t c = 0; c < k; ++c) row[lead + c] = tensor::f32_to_bf16(x[i * ldx + c]);
      std::fill(row + lead + k, row + kp, uint16_t{0});
    }
    return {nullptr, xb.data(), 0, m, true};
  }
  xpad.resize(static_cast<size_t>(m * kp));
  for (int64_t i = 0; i < m; ++i) {
    float* row = xpad.data() + i * kp;
    std::fill(row, row + lead, 0.0f);
    if (round) {
      for (int64_t c = 0; c < k; ++c)
        row[lead + c] = tensor::bf16_to_f32(tensor::f32_to_bf16(x[i * ldx + c]));
    } else {
      std::memcpy(row + lead, x + i * ldx, static_cast<size_t>(k) * sizeof(float));
    }
    std::fill(row + lead + k, row + kp, 0.0f);
  }
  Staged s{xpad.data(), nullptr, 0, m};
  // Beyond 4 rows on AMX: the tiles, x converted to bf16 once (hi + lo halves unless rounded).
  if (tiles) {
    s.parts = round ? 1 : 2;
    xb.resize(static_cast<size_t>(s.parts * detail::amx::padded_rows(m) * kp));
    detail::amx::split_bf16(xpad.data(), m, kp, s.parts, xb.data());
    s.xb = xb.data();
  }
  return s;
}

void LinearWeight::Impl::run_blocks(const Staged& s, float* y, int64_t ldy, int64_t b0,
                                    int64_t b1) const {
  if (s.bf16_dot) {
    (pw.dtype == DType::kF8E4M3
         ? detail::avx512bf16::linear_fp8_dot
         : detail::avx512bf16::linear_bf16_dot)(pw, s.xb, s.m, y, ldy, b0, b1);
    return;
  }
  if (s.xb != nullptr) {
    detail::amx::linear(pw, s.xb, s.parts, s.m, y, ldy, b0, b1);
    return;
  }
  detail::SmallMKernel kernel = detail::linear_small_m_portable;
  if (pw.dtype == DType::kF8E4M3) {
    kernel = kernel_isa() >= Isa::kAvx512 ? detail::avx512::linear_small_m_fp8
             : kernel_isa() >= Isa::kAvx2 ? detail::avx2::linear_small_m_fp8
                                          : detail::linear_small_m_fp8_portable;
  } else if (kernel_isa() >= Isa::kAvx512) {
    kernel = detail::avx512::linear_small_m;
  } else if (kernel_isa() == Isa::kAvx2) {
    kernel = detail::avx2::linear_small_m;
  }
  kernel(pw, s.x, s.m, y, ldy, b0, b1);
}

void LinearWeight::Impl::forward_large(const float* x, int64_t m, float* y, int64_t ldx,
                                       int64_t ldy) {
  // bf16 weights: oneDNN 2.6 has no f32 x bf16 matmul. Rounded activations (every M that comes
  // here is above kSmallMMax) are one bf16 GEMM;
  // exact ones are split into two bf16 parts, hi = bf16(x) and lo = bf16(x - hi) (residual error
  // ~2^-16 |x| instead of 2^-8), stacked as 2m rows of one GEMM, and y = hi·Wᵀ + lo·Wᵀ.
  const bool bf16 = pw.dtype == DType::kBF16;
  const bool split = bf16 && !round_x;
  const int64_t rows = split ? 2 * m : m;
  const std::shared_ptr<const Prim> p = prim(rows);
  // Per-thread scratch that only grows, so steady-state calls do not allocate buffers.
  thread_local std::vector<uint16_t> xbf16;
  thread_local std::vector<float> xdense, ydense;
  thread_local std::vector<uint8_t> scratch;
  const dnnl::engine& engine = cpu_engine();
  const int64_t n = pw.n;
  void* src = const_cast<float*>(x);
  if (bf16) {
    const int64_t kp = pw.k_pad;
    xbf16.resize(static_cast<size_t>(rows * kp));
    uint16_t* dst = xbf16.data();
    park_and_run_on_openmp(m, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        uint16_t* hi = dst + i * kp;
        for (int64_t c = 0; c < k; ++c) hi[c] = tensor::f32_to_bf16(x[i * ldx + c]);
        std::fill(hi + k, hi + kp, uint16_t{0});
        if (!split) continue;
        uint16_t* lo = dst + (m + i) * kp;
        for (int64_t c = 0; c < k; ++c)
          lo[c] = tensor::f32_to_bf16(x[i * ldx + c] - tensor::bf16_to_f32(hi[c]));
        std::fill(lo + k, lo + kp, uint16_t{0});
      }
    });
    src = dst;
  } else if (ldx != k) {
    xdense.resize(static_cast<size_t>(m * k));
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(xdense.data() + i * k, x + i * ldx, static_cast<size_t>(k) * sizeof(float));
    src = xdense.data();
  }
  float* out = y;
  if (split || ldy != n) {
    ydense.resize(static_cast<size_t>(rows * n));
    out = ydense.data();
  }
  if (scratch.size() < p->scratch_bytes) scratch.resize(p->scratch_bytes);
  dnnl::memory src_mem(p->src_md, engine, src);
  dnnl::memory wei_mem(p->wei_md, engine, const_cast<void*>(pw.data));
  dnnl::memory dst_mem(p->dst_md, engine, out);
  dnnl::memory scratch_mem(dnnl::memory::desc({static_cast<int64_t>(p->scratch_bytes)},
                                              dnnl::memory::data_type::u8, {1}),
                           engine, scratch.data());
  thread_local dnnl::stream stream(engine);
  p->matmul.execute(stream, {{DNNL_ARG_SRC, src_mem},
                             {DNNL_ARG_WEIGHTS, wei_mem},
                             {DNNL_ARG_DST, dst_mem},
                             {DNNL_ARG_SCRATCHPAD, scratch_mem}});
  stream.wait();
  if (split) {
    park_and_run_on_openmp(m, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float* hi = out + i * n;
        const float* lo = out + (m + i) * n;
        float* yi = y + i * ldy;
        for (int64_t j = 0; j < n; ++j) yi[j] = hi[j] + lo[j];
      }
    });
  } else if (out != y) {
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(y + i * ldy, out + i * n, static_cast<size_t>(n) * sizeof(float));
  }
}

LinearWeight::LinearWeight(const LinearSource& w, tensor::DType dtype, bool row_independent,
                           ActivationPrecision activations)
    : LinearWeight(std::vector<LinearSource>{w}, dtype, row_independent, activations) {}

LinearWeight::LinearWeight(const std::vector<LinearSource>& parts, tensor::DType dtype,
                           bool row_independent, ActivationPrecision activations)
    : row_independent_(row_independent), impl_(std::make_unique<Impl>()) {
  impl_->round_x = activations == ActivationPrecision::kBf16 && dtype != DType::kF32;
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF8E4M3)
    fail("LinearWeight: unsupported packed dtype {}", tensor::dtype_name(dtype));
  if (parts.empty()) fail("LinearWeight: no weight given");
  // Row r of W is row r - first_row[i] of parts[i].
  std::vector<int64_t> first_row;
  for (const LinearSource& w : parts) {
    if (w.cols() != parts[0].cols())
      fail("LinearWeight: stacked parts differ in K: {} vs {}", w.cols(), parts[0].cols());
    first_row.push_back(n_);
    n_ += w.rows();
  }
  k_ = parts[0].cols();
  dtype_ = dtype;
  if (n_ <= 0 || k_ <= 0) fail("LinearWeight: empty weight [{}, {}]", n_, k_);
  if (dtype == DType::kF8E4M3) {
    pack_fp8(parts, first_row);
    return;
  }

  // bf16 K is padded to 32, not 16: see Impl::prim.
  const int64_t kp = round_up(k_, dtype == DType::kBF16 ? 2 * kKAlign : kKAlign);
  const int64_t nb = (n_ + kRowBlock - 1) / kRowBlock;
  Impl& im = *impl_;
  im.k = k_;
  // Every element, padding included, is written once below: no zero fill first, and the pages
  // are first touched by the threads that pack them.
  im.packed = tensor::Tensor::empty_long_lived({nb * kp * kRowBlock}, dtype);
  im.pw = {dtype, n_, kp, nb, im.packed.raw()};
  void* dst = im.packed.raw();
  tensor::parallel_for(nb, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> row(static_cast<size_t>(kp));
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t r = 0; r < kRowBlock; ++r) {
        const int64_t n = b * kRowBlock + r;
        const LinearSource* src = nullptr;
        int64_t src_row = 0;
        if (n < n_) {
          const auto part = std::upper_bound(first_row.begin(), first_row.end(), n) - 1;
          src = &parts[static_cast<size_t>(part - first_row.begin())];
          src_row = n - *part;
        }
        // bf16 into bf16 (the common load): the bits move as they are, with no round trip
        // through f32 (the packing was a quarter of a bf16 model's load time).
        if (dtype == DType::kBF16 && src && !src->is_fp8() &&
            src->dense().dtype() == DType::kBF16 && src->dense().strides()[1] == 1) {
          const auto* s = static_cast<const uint16_t*>(src->dense().raw()) +
                          src_row * src->dense().strides()[0];
          auto* d = static_cast<uint16_t*>(dst) + b * kp * kRowBlock + 2 * r;
          for (int64_t c = 0; c < kp; c += 2) {
            d[c * kRowBlock] = c < k_ ? s[c] : 0;
            d[c * kRowBlock + 1] = c + 1 < k_ ? s[c + 1] : 0;
          }
          continue;
        }
        std::fill(row.begin() + (src ? k_ : 0), row.end(), 0.0f);
        if (src) src->row_f32(src_row, row.data());
        for (int64_t c = 0; c < kp; ++c) {
          if (dtype == DType::kBF16) {
            // [N/64][K/2][64][2]
            const int64_t idx = ((b * kp + (c & ~int64_t{1})) * kRowBlock) + 2 * r + (c & 1);
            static_cast<uint16_t*>(dst)[idx] = tensor::f32_to_bf16(row[c]);
          } else {
            // [N/64][K][64]
            static_cast<float*>(dst)[(b * kp + c) * kRowBlock + r] = row[c];
          }
        }
      }
    }
  });
}

// FP8 keeps the checkpoint's bytes: they are copied, never converted, into the blocked layout of
// linear_kernels.h, with each row's scale per k block beside them.
void LinearWeight::pack_fp8(const std::vector<LinearSource>& parts,
                            const std::vector<int64_t>& first_row) {
  const tensor::Fp8Blocks& b0 = parts[0].blocks();
  for (const LinearSource& w : parts) {
    if (!w.is_fp8()) fail("LinearWeight: FP8 packing needs every part in FP8");
    const tensor::Fp8Blocks& f = w.blocks();
    // The K grid is shared by all rows, so the parts must agree on where it starts.
    if (f.block_cols != b0.block_cols || f.col0 % f.block_cols != b0.col0 % b0.block_cols)
      fail("LinearWeight: stacked FP8 parts differ in their column blocks");
  }
  const int64_t bc = b0.block_cols;
  // The kernels walk K in steps of 16 (two columns at a time, 16-aligned chunks).
  if (bc % kKAlign != 0)
    fail("LinearWeight: FP8 block columns {} are not a multiple of {}", bc, kKAlign);
  const int64_t lead = b0.col0 % bc;
  const int64_t kp = round_up(lead + k_, bc);
  const int64_t nkb = kp / bc;
  const int64_t nb = (n_ + kRowBlock - 1) / kRowBlock;
  Impl& im = *impl_;
  im.k = k_;
  im.packed = tensor::Tensor::empty_long_lived({nb * kp * kRowBlock}, DType::kF8E4M3);
  im.scales = tensor::Tensor::empty_long_lived({nb * nkb * kRowBlock}, DType::kF32);
  im.pw = {DType::kF8E4M3, n_, kp, nb, im.packed.raw()};
  im.pw.scales = im.scales.data<float>();
  im.pw.k_block = bc;
  im.pw.k_lead = lead;
  scale_bytes_ = static_cast<size_t>(n_ * nkb) * sizeof(float);
  auto* dst = im.packed.data<uint8_t>();
  float* sdst = im.scales.data<float>();
  tensor::parallel_for(nb, 1, [&](int64_t blk0, int64_t blk1) {
    for (int64_t b = blk0; b < blk1; ++b) {
      // Row r's codes (null past the last row) and their column stride; its scales.
      std::array<const uint8_t*, kRowBlock> codes{};
      std::array<int64_t, kRowBlock> stride{};
      for (int64_t r = 0; r < kRowBlock; ++r) {
        const int64_t n = b * kRowBlock + r;
        if (n >= n_) {
          for (int64_t kb = 0; kb < nkb; ++kb) sdst[(b * nkb + kb) * kRowBlock + r] = 0.0f;
          continue;
        }
        const auto part = std::upper_bound(first_row.begin(), first_row.end(), n) - 1;
        const tensor::Fp8Blocks& f = parts[static_cast<size_t>(part - first_row.begin())].blocks();
        const int64_t pr = n - *part;
        codes[static_cast<size_t>(r)] = f.values.data<uint8_t>() + pr * f.values.strides()[0];
        stride[static_cast<size_t>(r)] = f.values.strides()[1];
        for (int64_t kb = 0; kb < nkb; ++kb) {
          // Column kb * bc - lead of this view is the block's first (or, for kb = 0, the view's
          // first column lies inside it).
          const int64_t c = std::max<int64_t>(0, kb * bc - lead);
          sdst[(b * nkb + kb) * kRowBlock + r] = f.scale(pr, c);
        }
      }
      // Eight rows by eight columns at a time, transposed in registers: the eight rows whose
      // bytes lie side by side in a column of the layout (r, r + 8, r + 16, r + 24, then the same
      // from r + 1) each give eight columns, and each column takes its eight bytes in one store.
      // Byte by byte, each byte on a line of its own, the packing took 2.7 ns a byte, most of an
      // FP8 checkpoint's load (docs/performance.md).
      uint8_t* block = dst + b * kp * kRowBlock;
      auto eight_codes = [&](int64_t r, int64_t c) {  // row r's codes at columns [c, c + 8)
        const uint8_t* q = codes[static_cast<size_t>(r)];
        const int64_t cs = stride[static_cast<size_t>(r)];
        uint64_t word = 0;
        if (q && cs == 1 && c >= lead && c + 8 <= lead + k_) {
          std::memcpy(&word, q + (c - lead), sizeof word);
          return word;
        }
        for (int64_t i = 0; i < 8; ++i) {
          const int64_t s = c + i - lead;
          const uint64_t code = q && s >= 0 && s < k_ ? q[s * cs] : 0;
          word |= code << (8 * i);
        }
        return word;
      };
      for (int64_t unit = 0; unit < kRowBlock / 8; ++unit) {
        const int64_t group = unit / 4 * 32, lane = unit % 4 * 2;
        const int64_t rows[8] = {group + lane,      group + lane + 8, group + lane + 16,
                                 group + lane + 24, group + lane + 1, group + lane + 9,
                                 group + lane + 17, group + lane + 25};
        const int64_t offset = detail::fp8_row_offset(rows[0]);  // then the other seven
        for (int64_t c = 0; c < kp; c += 8) {
          uint64_t w[8];
          for (int i = 0; i < 8; ++i) w[i] = eight_codes(rows[i], c);
          transpose_8x8_bytes(w);
          for (int i = 0; i < 8; ++i) std::memcpy(block + (c + i) * kRowBlock + offset, &w[i], 8);
        }
      }
    }
  });
}

LinearWeight::~LinearWeight() = default;
LinearWeight::LinearWeight(LinearWeight&&) noexcept = default;
LinearWeight& LinearWeight::operator=(LinearWeight&&) noexcept = default;

bool LinearWeight::rounds_activations() const { return impl_ && impl_->round_x; }

int64_t LinearWeight::fp8_packed_row_bytes(int64_t col0, int64_t k, int64_t block_cols) {
  const int64_t kp = round_up(col0 % block_cols + k, block_cols);  // as pack_fp8 lays it out
  return kp + kp / block_cols * static_cast<int64_t>(sizeof(float));
}

size_t LinearWeight::weight_bytes() const {
  return static_cast<size_t>(n_ * k_) * tensor::dtype_size(dtype_) + scale_bytes_;
}

// Row-independent mode never reaches oneDNN, so every M is then safe inside a parallel region;
// neither do weights whose layout oneDNN has no real matmul for on this CPU, nor bf16 weights
// on AVX2 / AVX-512 CPUs without AMX: there the own FMA kernels, on exact f32 activations, ran
// prefill shapes at ~3x oneDNN's bf16 matmul on hi + lo halves (and 1.7x it on rounded ones;
// docs/performance.md), on one worker pool with no OpenMP team spinning beside a busy neighbour.
// With AMX, bf16 runs on the own AMX tiles (linear_amx.cpp), which ran the model's prefill
// faster than oneDNN's AMX matmul on hi + lo halves (docs/performance.md).
bool LinearWeight::small_m(int64_t m) const {
  return m <= kSmallMMax || row_independent_ || dtype_ == DType::kF8E4M3 ||
         (dtype_ == DType::kBF16 && kernel_isa() >= Isa::kAvx2) || !onednn_fast_matmul(dtype_);
}

void LinearWeight::check_strides(int64_t& ldx, int64_t& ldy) const {
  if (!defined()) fail("LinearWeight::forward on an empty weight");
  if (ldx < 0) ldx = k_;
  if (ldy < 0) ldy = n_;
  if (ldx < k_ || ldy < n_) fail("LinearWeight::forward: ldx {} / ldy {} too small", ldx, ldy);
}

void LinearWeight::forward(const float* x, int64_t m, float* y, int64_t ldx, int64_t ldy) const {
  const LinearProduct product{this, x, m, y, ldx, ldy};
  forward_group({&product, 1});
}

int64_t LinearWeight::row_blocks() const { return impl_ ? impl_->pw.n_blocks : 0; }

void LinearWeight::forward_blocks(const float* x, int64_t m, float* y, int64_t b0,
                                  int64_t b1) const {
  int64_t ldx = -1, ldy = -1;
  check_strides(ldx, ldy);
  if (!small_m(m)) fail("LinearWeight::forward_blocks: M = {} is not on the small-M kernels", m);
  if (b0 < 0 || b1 > impl_->pw.n_blocks || b0 > b1)
    fail("LinearWeight::forward_blocks: blocks [{}, {}) of {}", b0, b1, impl_->pw.n_blocks);
  thread_local std::vector<float> xpad;
  thread_local std::vector<uint16_t> xb;
  // Row independence: each row alone through the M = 1 kernel, as forward() runs it.
  const int64_t rows_at_once = row_independent_ ? 1 : m;
  for (int64_t i = 0; i < m; i += rows_at_once)
    impl_->run_blocks(impl_->stage(x + i * ldx, rows_at_once, ldx, xpad, xb), y + i * ldy, ldy, b0,
                      b1);
}

void LinearWeight::forward_group(std::span<const LinearProduct> products) {
  struct Item {
    const Impl* impl;
    Impl::Staged staged;
    float* y;
    int64_t ldy;
    int64_t first_block;  // in the region's index space: the items' blocks one after another
  };
  // Per calling thread and reused, so a decode step allocates nothing; bound to references,
  // because the region's workers must see this thread's vectors, not their own.
  thread_local std::vector<Item> items_tl;
  thread_local std::vector<std::vector<float>> xpad_tl;
  thread_local std::vector<std::vector<uint16_t>> xb_tl;
  std::vector<Item>& items = items_tl;
  items.clear();
  int64_t blocks = 0;
  auto add = [&](const LinearWeight& w, const float* x, int64_t m, float* y, int64_t ldx,
                 int64_t ldy) {
    const size_t i = items.size();
    if (xpad_tl.size() <= i) {
      xpad_tl.resize(i + 1);
      xb_tl.resize(i + 1);
    }
    const Impl& impl = *w.impl_;
    items.push_back({&impl, impl.stage(x, m, ldx, xpad_tl[i], xb_tl[i]), y, ldy, blocks});
    blocks += impl.pw.n_blocks;
  };
  for (const LinearProduct& p : products) {
    const LinearWeight& w = *p.weight;
    int64_t ldx = p.ldx, ldy = p.ldy;
    w.check_strides(ldx, ldy);
    if (p.m <= 0) continue;
    if (w.row_independent_) {
      for (int64_t i = 0; i < p.m; ++i) add(w, p.x + i * ldx, 1, p.y + i * ldy, ldx, ldy);
    } else if (w.small_m(p.m)) {
      add(w, p.x, p.m, p.y, ldx, ldy);
    } else {
      w.impl_->forward_large(p.x, p.m, p.y, ldx, ldy);  // oneDNN: not inside a region
    }
  }
  tensor::parallel_for(blocks, 1, [&](int64_t g0, int64_t g1) {
    auto it = std::upper_bound(items.begin(), items.end(), g0,
                               [](int64_t g, const Item& item) { return g < item.first_block; });
    for (--it; it != items.end() && it->first_block < g1; ++it) {
      const int64_t first = it->first_block, n_blocks = it->impl->pw.n_blocks;
      const int64_t b0 = std::max(g0, first) - first, b1 = std::min(g1, first + n_blocks) - first;
      if (b0 < b1) it->impl->run_blocks(it->staged, it->y, it->ldy, b0, b1);
    }
  });
}

}  // namespace handoff::ops

namespace handoff::ops {
// Out of line: the default constructor must see the complete Impl for unique_ptr.
LinearWeight::LinearWeight() = default;
}  // namespace handoff::ops
