#pragma once
// An error the HTTP layer answers as an OpenAI error object:
// {"error": {"message", "type", "param", "code"}} with its status.
#include <string>

#include "handoff/error.h"

namespace handoff::serve {

class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : Error(message),
        status(status),
        param(std::move(param)),
        code(std::move(code)),
        type(std::move(type)) {}
  int status;
  std::string param, code, type;
};

}  // namespace handoff::serve
