#include "handoff/model/load_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "handoff/log.h"

namespace handoff::model {
namespace {

// Terminal redraws at most this often (a fast load has thousands of tensors).
constexpr std::chrono::milliseconds kRedraw{100};

// done/total in the unit that suits total: "1.21/2.50 GB", "310.4/640.0 MB".
std::string amount(size_t done, size_t total) {
  const double d = static_cast<double>(done), t = static_cast<double>(total);
  if (total >= 1'000'000'000) return fmt::format("{:.2f}/{:.2f} GB", d / 1e9, t / 1e9);
  if (total >= 1'000'000) return fmt::format("{:.1f}/{:.1f} MB", d / 1e6, t / 1e6);
  return fmt::format("{:.1f}/{:.1f} kB", d / 1e3, t / 1e3);
}

}  // namespace

LoadProgress::LoadProgress(std::string what, size_t total_bytes, size_t total_tensors,
                           Output output, std::chrono::milliseconds log_interval)
    : what_(std::move(what)),
      total_(total_bytes),
      total_tensors_(total_tensors),
      terminal_(output == Output::kTerminal ||
                (output == Output::kAuto && ::isatty(STDERR_FILENO) == 1)),
      enabled_(total_bytes > 0),
      log_interval_(log_interval) {
  if (enabled_ && !terminal_) {
    log::info("{}", text());
    last_draw_ = Clock::now();
  }
}

LoadProgress::~LoadProgress() { finish(); }

std::string LoadProgress::text() const {
  const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 0;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  std::string tensors = total_tensors_ > 0 ? fmt::format("{}/{} tensors", tensors_, total_tensors_)
                                           : fmt::format("{} tensors", tensors_);
  std::string eta = "ETA --";
  if (done_ >= total_)
    eta = fmt::format("{:.1f} s", elapsed);
  else if (done_ > 0 && elapsed > 0)
    eta = fmt::format("ETA {:.1f} s", elapsed * (1.0 - fraction) / fraction);
  return fmt::format("{}: {:3d}% ({}, {}, {})", what_, static_cast<int>(100.0 * fraction),
                     amount(done_, total_), tensors, eta);
}

void LoadProgress::advance(size_t bytes) {
  done_ = std::min(total_, done_ + bytes);
  ++tensors_;
  if (!enabled_ || finished_) return;
  const auto now = Clock::now();
  if (terminal_) {
    const int percent = static_cast<int>(100.0 * static_cast<double>(done_) / total_);
    if (percent == last_percent_ && now - last_draw_ < kRedraw) return;
    last_percent_ = percent;
    last_draw_ = now;
    std::fprintf(stderr, "\r%s\033[K", text().c_str());
    std::fflush(stderr);
  } else if (now - last_draw_ >= log_interval_ && done_ < total_) {
    last_draw_ = now;
    log::info("{}", text());
  }
}

void LoadProgress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  if (terminal_) {
    if (last_percent_ >= 0) std::fprintf(stderr, "\r%s\033[K\n", text().c_str());
  } else {
    log::info("{}", text());
  }
}

}  // namespace handoff::model
