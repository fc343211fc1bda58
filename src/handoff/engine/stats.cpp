#include "handoff/engine/stats.h"

#include <algorithm>

namespace handoff::engine {

void Histogram::observe(double v) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  ++counts_[static_cast<size_t>(it - bounds_.begin())];
  sum_ += v;
  ++count_;
}

}  // namespace handoff::engine
