#include "handoff/serve/http_response.h"

#include <fmt/format.h>

namespace handoff::serve {
namespace {

std::string head(int status, std::string_view content_type, const HttpHeaders& headers,
                 bool keep_alive) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n", status,
                                reason_phrase(status), content_type);
  for (const auto& [name, value] : headers) out += fmt::format("{}: {}\r\n", name, value);
  if (!keep_alive) out += "Connection: close\r\n";
  return out;
}

}  // namespace

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

std::string serialize(const HttpResponse& r, bool keep_alive) {
  std::string out = head(r.status, r.content_type, r.headers, keep_alive);
  out += fmt::format("Content-Length: {}\r\n\r\n", r.body.size());
  out += r.body;
  return out;
}

std::string chunked_head(int status, std::string_view content_type, const HttpHeaders& headers,
                         bool keep_alive) {
  return head(status, content_type, headers, keep_alive) + "Transfer-Encoding: chunked\r\n\r\n";
}

std::string chunk(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

}  // namespace handoff::serve
