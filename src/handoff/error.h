#pragma once
// Engine errors are exceptions carrying context; the CLI and the server turn them into exit
// codes and HTTP errors at the edge.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace handoff {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A malformed or unsupported input (config, checkpoint, flag, request): the user can fix it.
class InputError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> f, Args&&... args) {
  throw InputError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace handoff
