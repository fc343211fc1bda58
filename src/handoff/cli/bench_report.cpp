#include "handoff/cli/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <random>

namespace handoff::cli {
namespace {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

void row(const char* name, const std::vector<double>& v) {
  fmt::print("{:<28} mean {:9.2f}  p50 {:9.2f}  p90 {:9.2f}  p99 {:9.2f}\n", name, mean(v) * 1e3,
             percentile(v, 50) * 1e3, percentile(v, 90) * 1e3, percentile(v, 99) * 1e3);
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

void ProgressBar::tick() {
  std::lock_guard lock(mutex_);
  ++done_;
  draw();
}

void ProgressBar::finish() {
  std::lock_guard lock(mutex_);
  std::fprintf(stderr, "\n");
}

void ProgressBar::draw() {
  constexpr int kWidth = 40;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * done_ / total_) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), '.').c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_));
  std::fflush(stderr);
}

void print_report(const std::string& title, const std::vector<RequestTiming>& timings,
                  double duration_s, int concurrency) {
  int64_t ok = 0, in_tokens = 0, out_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const auto& t : timings) {
    if (!t.ok) continue;
    ++ok;
    in_tokens += t.prompt_tokens;
    out_tokens += t.output_tokens;
    ttft.push_back(t.ttft);
    e2e.push_back(t.latency);
    if (t.output_tokens > 1)
      tpot.push_back((t.latency - t.ttft) / static_cast<double>(t.output_tokens - 1));
    itl.insert(itl.end(), t.itl.begin(), t.itl.end());
  }
  fmt::print("============ {} ============\n", title);
  fmt::print("{:<28} {}\n", "concurrency", concurrency);
  fmt::print("{:<28} {} / {}\n", "successful requests", ok, timings.size());
  for (const auto& t : timings)
    if (!t.ok) {
      fmt::print("{:<28} {}\n", "first error", t.error);
      break;
    }
  fmt::print("{:<28} {:.2f}\n", "duration (s)", duration_s);
  fmt::print("{:<28} {} / {}\n", "input / output tokens", in_tokens, out_tokens);
  fmt::print("{:<28} {:.2f}\n", "request throughput (req/s)", static_cast<double>(ok) / duration_s);
  fmt::print("{:<28} {:.1f}\n", "output throughput (tok/s)",
             static_cast<double>(out_tokens) / duration_s);
  fmt::print("{:<28} {:.1f}\n", "total throughput (tok/s)",
             static_cast<double>(in_tokens + out_tokens) / duration_s);
  fmt::print("latencies in ms:\n");
  row("TTFT", ttft);
  row("TPOT", tpot);
  row("ITL", itl);
  row("E2E", e2e);
}

std::vector<int32_t> random_prompt(uint64_t seed, int64_t len, int32_t lo, int32_t hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  std::vector<int32_t> ids(static_cast<size_t>(len));
  for (auto& id : ids) id = dist(rng);
  return ids;
}

}  // namespace handoff::cli
