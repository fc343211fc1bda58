#include "handoff/cli/byte_size_flag.h"

#include <array>
#include <cctype>
#include <limits>
#include <string>

#include "handoff/error.h"

namespace handoff::cli {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// The multiplier of a unit suffix; 0 when unknown.
__int128 unit_multiplier(std::string_view unit) {
  const std::string u = lower(unit);
  if (u.empty() || u == "b") return 1;
  static constexpr std::array<char, 4> kPrefixes = {'k', 'm', 'g', 't'};
  __int128 si = 1, binary = 1;
  for (char p : kPrefixes) {
    si *= 1000;
    binary *= 1024;
    if (u == std::string(1, p) || u == std::string(1, p) + "b") return si;
    if (u == std::string(1, p) + "ib") return binary;
  }
  return 0;
}

}  // namespace

int64_t byte_size_flag(std::string_view flag, std::string_view text, bool allow_zero) {
  auto bad = [&](std::string_view why) -> int64_t {
    fail_input(
        "{} '{}': {} (a byte count: 123, 80G / 80GB = 80·10^9, 141GiB = 141·2^30; K M G T are "
        "powers of 1000, KiB MiB GiB TiB powers of 1024)",
        flag, text, why);
  };
  size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+'))
    return bad(text[i] == '-' ? "must not be negative" : "has a sign");
  __int128 mantissa = 0;
  int digits = 0, fraction_digits = 0;
  bool in_fraction = false;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '.' && !in_fraction) {
      in_fraction = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(ch))) break;
    if (++digits > 24) return bad("too many digits");
    mantissa = mantissa * 10 + (ch - '0');
    if (in_fraction) ++fraction_digits;
  }
  if (digits == 0) return bad("is not a number");
  const __int128 mult = unit_multiplier(text.substr(i));
  if (mult == 0) return bad("unknown unit");
  __int128 divisor = 1;
  for (int f = 0; f < fraction_digits; ++f) divisor *= 10;
  // mantissa < 10^24 < 2^80 and mult <= 2^40: the product fits in 128 bits.
  const __int128 bytes = mantissa * mult / divisor;
  if (bytes > std::numeric_limits<int64_t>::max()) return bad("is past 2^63 bytes");
  if (bytes == 0 && !allow_zero) return bad("must be more than 0 bytes");
  return static_cast<int64_t>(bytes);
}

}  // namespace handoff::cli
