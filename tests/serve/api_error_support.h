#pragma once
// The ApiError a call throws, for tests that assert on status, param and message.
#include <functional>

#include "handoff/serve/api_error.h"

namespace handoff::serve {

// The ApiError `f` throws, or status 0 "accepted" when it throws none.
inline ApiError api_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "accepted");
}

}  // namespace handoff::serve
