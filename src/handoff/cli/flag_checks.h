#pragma once
// Range checks for command-line flags, run before anything loads. Each failure is an
// InputError naming the flag (exit code 2, as every usage error).
#include <chrono>
#include <cstdint>
#include <string_view>

namespace handoff::cli {

// The longest duration a flag may ask for: far beyond any real timeout, far inside int64 ms.
inline constexpr double kMaxFlagSeconds = 1e7;

// A timeout in seconds: finite, > 0 and <= kMaxFlagSeconds, converted without overflow.
std::chrono::milliseconds seconds_flag(std::string_view flag, double seconds);

// An integer flag within [lo, hi].
void require_range(std::string_view flag, int64_t value, int64_t lo, int64_t hi);

}  // namespace handoff::cli
