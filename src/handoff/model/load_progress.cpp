#include "handoff/model/load_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace handoff::model {

LoadProgress::LoadProgress(size_t total_bytes)
    : total_(total_bytes), enabled_(::isatty(STDERR_FILENO) == 1 && total_bytes > 0) {}

LoadProgress::~LoadProgress() { finish(); }

void LoadProgress::advance(size_t bytes) {
  done_ = std::min(total_, done_ + bytes);
  if (!enabled_ || finished_) return;
  const int percent = static_cast<int>(100.0 * static_cast<double>(done_) / total_);
  if (percent == last_percent_) return;
  last_percent_ = percent;
  std::fprintf(stderr, "\rloading weights: %3d%% (%.1f/%.1f GB)", percent, done_ / 1e9,
               total_ / 1e9);
  std::fflush(stderr);
}

void LoadProgress::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_ && last_percent_ >= 0) std::fputc('\n', stderr);
}

}  // namespace handoff::model
