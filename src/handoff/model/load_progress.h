#pragma once
// A "loading weights: 45% (1.2/2.5 GB)" line on stderr, rewritten in place, shown only when
// stderr is a terminal so logs and pipes stay clean.
#include <cstddef>

namespace handoff::model {

class LoadProgress {
 public:
  explicit LoadProgress(size_t total_bytes);
  ~LoadProgress();
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

  // Adds `bytes` loaded; redraws when the percentage changed.
  void advance(size_t bytes);
  // Ends the line (also done by the destructor).
  void finish();

  size_t done_bytes() const { return done_; }

 private:
  size_t total_;
  size_t done_ = 0;
  int last_percent_ = -1;
  bool enabled_;
  bool finished_ = false;
};

}  // namespace handoff::model
