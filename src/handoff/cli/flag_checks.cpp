#include "handoff/cli/flag_checks.h"

#include <cmath>

#include "handoff/error.h"

namespace handoff::cli {

std::chrono::milliseconds seconds_flag(std::string_view flag, double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxFlagSeconds)
    fail_input("{} must be a number of seconds in (0, {:g}], got {:g}", flag, kMaxFlagSeconds,
               seconds);
  // Round up so that a tiny positive timeout never becomes 0 ms (an instant failure).
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

void require_range(std::string_view flag, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) fail_input("{} must be in [{}, {}], got {}", flag, lo, hi, value);
}

}  // namespace handoff::cli
