#include "handoff/cli/peak_memory.h"

#include <fstream>
#include <string>

namespace handoff::cli {

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;  // "VmHWM:   123456 kB"
      return kib * 1024;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

}  // namespace handoff::cli
