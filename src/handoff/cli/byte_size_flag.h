#pragma once
// A byte count on the command line: "123" (bytes), "80G" / "80GB" (SI: powers of 1000, as
// memory is sold: an H200 has "141 GB") or "141GiB" (powers of 1024). Units are K, M, G, T
// with an optional B, or Ki, Mi, Gi, Ti with B; letters in any case; a decimal fraction is
// allowed ("1.5T") and the bytes are rounded down.
#include <cstdint>
#include <string_view>

namespace handoff::cli {

// The bytes `text` names; InputError naming `flag` when it is malformed, negative, zero
// (unless allow_zero) or past int64.
int64_t byte_size_flag(std::string_view flag, std::string_view text, bool allow_zero);

}  // namespace handoff::cli
