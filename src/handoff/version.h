#pragma once
// What this binary is: the project version and the git commit it was built from (captured by
// cmake/version_info.cmake at configure and build time; "unknown" outside a git checkout).
#include <string>

namespace handoff {

const char* version();
const char* git_commit();
// "handoff 0.1.0 (commit 1234abcd5678)": the first line of `handoff --version`.
inline std::string version_line() {
  return std::string("handoff ") + version() + " (commit " + git_commit() + ")";
}

}  // namespace handoff
