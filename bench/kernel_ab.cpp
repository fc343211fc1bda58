// One process, two revisions of the small-M weight kernels: a base revision's (a shared library
// that bench/kernel_ab.sh builds from that revision's sources) and this build's, called in
// alternation on the same packed weights and x, each round in the other order. These 2-vCPU
// guests change speed by 20-40 % within minutes, so separate processes (or separate benchmark
// runs) could not resolve a few per cent; both sides of a round here see the same machine. Prints
// the median weight GB/s and GFLOP/s of each and the median of the per-round time ratios base /
// this build (above 1: this build is faster), and whether the two outputs are bit-identical.
#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "handoff/ops/cpu_features.h"
#include "handoff/ops/linear_kernels.h"
#include "kernel_ab/small_m_kernel.h"
#include "median.h"

namespace {

using handoff::ops::detail::PackedWeight;
using handoff::ops::detail::SmallMKernel;
namespace detail = handoff::ops::detail;

// The shim's entry (bench/kernel_ab/base_shim.cpp): the base revision's kernel for isa and dtype.
using BaseLookup = SmallMKernel (*)(const char* isa, int fp8);

// Random packed weights as the layout of linear_kernels.h holds them (no zero padding needed:
// both sides read the same bytes).
struct Weights {
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> fp8;
  std::vector<float> scales;
  PackedWeight packed{};
};

Weights make_weights(bool fp8, int64_t n, int64_t k, std::mt19937& rng) {
  Weights w;
  const int64_t blocks = (n + detail::kRowBlock - 1) / detail::kRowBlock;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (!fp8) {
    const int64_t k_pad = (k + 31) / 32 * 32;
    w.bf16.resize(static_cast<size_t>(blocks * detail::kRowBlock * k_pad));
    for (auto& v : w.bf16) {
      const float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      v = static_cast<uint16_t>(bits >> 16);
    }
    w.packed = {handoff::tensor::DType::kBF16, n, k_pad, blocks, w.bf16.data()};
    return w;
  }
  constexpr int64_t kBlock = 128;  // the published quantisation grid
  const int64_t k_pad = (k + kBlock - 1) / kBlock * kBlock;
  w.fp8.resize(static_cast<size_t>(blocks * detail::kRowBlock * k_pad));
  for (auto& v : w.fp8) {
    v = static_cast<uint8_t>(rng());
    if ((v & 0x7f) == 0x7f) v = 0x38;  // 0x7f / 0xff are e4m3's NaN
  }
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  w.scales.resize(static_cast<size_t>(blocks * (k_pad / kBlock) * detail::kRowBlock));
  for (auto& s : w.scales) s = scale(rng);
  w.packed = {
      handoff::tensor::DType::kF8E4M3, n, k_pad, blocks, w.fp8.data(), w.scales.data(), kBlock, 0};
  return w;
}

}  // namespace

using handoff::bench::median;

int main(int argc, char** argv) {
  CLI::App app{"The small-M kernels of a base revision against this build's, in one process"};
  std::string base_library, isa = "avx2", dtype = "bf16";
  int64_t m = 4, n = 8192, k = 8192;
  int threads = 1, rounds = 20;
  app.add_option("--base", base_library, "Shared library from bench/kernel_ab.sh")->required();
  app.add_option("--isa", isa, "Kernel family")->check(CLI::IsMember({"avx2", "avx512"}));
  app.add_option("--dtype", dtype, "Weights")->check(CLI::IsMember({"bf16", "fp8"}));
  app.add_option("--m", m, "Rows of x")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--n", n, "Rows of the weight")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--k", k, "Columns of the weight")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--threads", threads, "Threads (each call splits the blocks)")
      ->check(CLI::Range(1, 64));
  app.add_option("--rounds", rounds, "Rounds (one call of each a round)")
      ->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);

  const auto needs = isa == "avx2" ? handoff::ops::Isa::kAvx2 : handoff::ops::Isa::kAvx512;
  if (handoff::ops::cpu_max_isa() < needs) {
    std::printf("kernel_ab: skipped, this CPU has no %s\n", isa.c_str());
    return 77;  // CTest's skip code (KernelAbSelfCheck)
  }
  void* library = dlopen(base_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "kernel_ab: cannot load %s: %s\n", base_library.c_str(), dlerror());
    return 2;
  }
  const auto lookup = reinterpret_cast<BaseLookup>(dlsym(library, "handoff_base_small_m"));
  if (lookup == nullptr) {
    std::fprintf(stderr, "kernel_ab: %s has no handoff_base_small_m\n", base_library.c_str());
    return 2;
  }
  const bool fp8 = dtype == "fp8";
  const SmallMKernel base = lookup(isa.c_str(), fp8 ? 1 : 0);
  const SmallMKernel current = handoff::bench::small_m_kernel(isa.c_str(), fp8);

  std::mt19937 rng(1);
  const Weights w = make_weights(fp8, n, k, rng);
  const int64_t k_pad = w.packed.k_pad;
  std::vector<float> x(static_cast<size_t>(m * k_pad), 0.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) x[static_cast<size_t>(i * k_pad + c)] = normal(rng);
  std::vector<float> y_base(static_cast<size_t>(m * n)), y_current(y_base.size());

  // One call: the blocks split into `threads` contiguous runs, as the pool deals them. The other
  // threads start within the timing (tens of microseconds, alike for both sides): shapes whose
  // call lasts milliseconds keep that small.
  auto timed_call = [&](SmallMKernel kernel, float* y) {
    const int64_t blocks = w.packed.n_blocks;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t)
      others.emplace_back([&, t] {
        kernel(w.packed, x.data(), m, y, n, blocks * t / threads, blocks * (t + 1) / threads);
      });
    kernel(w.packed, x.data(), m, y, n, 0, blocks / threads);
    for (auto& o : others) o.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  timed_call(base, y_base.data());  // first touches outside the timing
  timed_call(current, y_current.data());
  double max_diff = 0.0, max_y = 0.0;
  for (size_t i = 0; i < y_base.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(y_base[i] - y_current[i])));
    max_y = std::max(max_y, static_cast<double>(std::fabs(y_base[i])));
  }

  std::vector<double> t_base, t_current, ratio;
  for (int r = 0; r < rounds; ++r) {
    double a, b;
    if (r % 2 == 0) {
      a = timed_call(base, y_base.data());
      b = timed_call(current, y_current.data());
    } else {
      b = timed_call(current, y_current.data());
      a = timed_call(base, y_base.data());
    }
    t_base.push_back(a);
    t_current.push_back(b);
    ratio.push_back(a / b);
  }
  const double bytes =
      static_cast<double>(w.packed.n_blocks * detail::kRowBlock * k_pad) * (fp8 ? 1.0 : 2.0);
  const double flop = 2.0 * static_cast<double>(m * n * k);
  std::printf(
      "%s %s m=%ld n=%ld k=%ld threads=%d rounds=%d: base %.2f GB/s %.1f GFLOP/s, this build "
      "%.2f GB/s %.1f GFLOP/s (medians); base / this build time, median of rounds %.3f "
      "(%.3f-%.3f); outputs %s\n",
      isa.c_str(), dtype.c_str(), static_cast<long>(m), static_cast<long>(n), static_cast<long>(k),
      threads, rounds, bytes / median(t_base) * 1e-9, flop / median(t_base) * 1e-9,
      bytes / median(t_current) * 1e-9, flop / median(t_current) * 1e-9, median(ratio),
      *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()),
      max_diff == 0.0 ? "bit-identical"
                      : ("differ (max |diff| / max |y| " +
                         std::to_string(max_diff / std::max(max_y, 1e-30)) + ")")
                            .c_str());
  return 0;
}
