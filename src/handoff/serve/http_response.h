#pragma once
// HTTP/1.1 responses as bytes: a whole response with Content-Length, or the head of a chunked
// one (SSE) and its chunks.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace handoff::serve {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;  // besides Content-Type, Content-Length and Connection
};

std::string_view reason_phrase(int status);
// The whole response; `keep_alive` false adds "Connection: close".
std::string serialize(const HttpResponse& response, bool keep_alive);
// The head of a response whose body follows in chunks (Transfer-Encoding: chunked).
std::string chunked_head(int status, std::string_view content_type, const HttpHeaders& headers,
                         bool keep_alive);
// One chunk; `data` must not be empty (an empty chunk ends the body).
std::string chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace handoff::serve
