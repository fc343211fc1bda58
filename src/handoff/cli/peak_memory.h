#pragma once
// The process's peak resident memory, for the line `generate` logs per process: what a rank of
// an mpirun job (or every rank as threads) needed at its high-water mark.
#include <cstdint>

namespace handoff::cli {

// VmHWM of /proc/self/status in bytes (0 where it cannot be read).
int64_t peak_resident_bytes();

}  // namespace handoff::cli
