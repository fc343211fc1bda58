#pragma once
// One parsed HTTP/1.x request, and the status a malformed one is answered with.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace handoff::serve {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: the path and any query
  std::string path;    // the target without its query
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  bool keep_alive = true;

  // The value of the first header named `lower_name`, or null.
  const std::string* header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers)
      if (name == lower_name) return &value;
    return nullptr;
  }
};

// Why a request was refused before it reached a route (400, 408, 413, 431, 501, 505, ...).
struct HttpError {
  int status = 400;
  std::string message;
};

}  // namespace handoff::serve
