#pragma once
// The median of a benchmark's per-round samples (the upper middle one of an even count), shared by
// the benchmarks that alternate two variants in one process.
#include <algorithm>
#include <vector>

namespace handoff::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace handoff::bench
