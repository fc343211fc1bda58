// Fuzzes the server's HTTP/1.x request parser, the first code a remote client's bytes reach.
// The first byte picks how the stream is cut, the rest is what a connection receives. It is fed
// as the connection loop feeds it: whole, one byte at a time and in pieces of varying size, each
// complete request followed by a reset for the next (pipelining), an error ending the connection.
// Every run must give the same requests and the same error, each request within the limits (set
// small, so that the fuzzer reaches them) and consistent with its own head.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../text/stream_cuts.h"
#include "handoff/serve/http_request_parser.h"

namespace {

using handoff::serve::HttpLimits;
using handoff::serve::HttpRequest;
using handoff::serve::HttpRequestParser;

constexpr HttpLimits kLimits{512, 8, 1024};

struct Outcome {
  bool error = false;
  int status = 0;
  std::string message, method, target, path, body;
  int minor_version = 0;
  bool keep_alive = false;
  std::vector<std::pair<std::string, std::string>> headers;
  bool operator==(const Outcome&) const = default;
};

void check(const HttpRequest& r) {
  if (r.method.empty() || r.target.empty() || r.target.front() != '/') std::abort();
  if (r.target.substr(0, r.path.size()) != r.path || r.path.find('?') != std::string::npos)
    std::abort();
  if (r.minor_version != 0 && r.minor_version != 1) std::abort();
  if (r.headers.size() > kLimits.max_headers) std::abort();
  if (static_cast<int64_t>(r.body.size()) > kLimits.max_body_bytes) std::abort();
  for (const auto& [name, value] : r.headers)
    if (name.empty() ||
        std::any_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
      std::abort();
  if (const std::string* length = r.header("content-length"))
    if (r.body.size() != std::stoull(*length)) std::abort();
}

std::vector<Outcome> parse(const std::vector<std::string_view>& pieces) {
  HttpRequestParser parser(kLimits);
  std::vector<Outcome> outcomes;
  std::string buffer;
  for (auto piece : pieces) {
    buffer += piece;
    while (true) {
      const size_t before = buffer.size();
      const auto status = parser.feed(buffer);
      if (buffer.size() > before) std::abort();
      if (status == HttpRequestParser::Status::kNeedMore) break;
      if (status == HttpRequestParser::Status::kError) {
        const auto& e = parser.error();
        if (e.status != 400 && e.status != 413 && e.status != 431 && e.status != 501 &&
            e.status != 505)
          std::abort();
        if (e.message.empty()) std::abort();
        outcomes.push_back({true, e.status, e.message});
        return outcomes;  // the connection answers and closes
      }
      const HttpRequest& r = parser.request();
      check(r);
      outcomes.push_back({false, 0, "", r.method, r.target, r.path, r.body, r.minor_version,
                          r.keep_alive, r.headers});
      parser.reset();
    }
  }
  return outcomes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint32_t cut = data[0];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto whole = parse({stream});
  if (parse(handoff::testing::bytes_of(stream)) != whole) std::abort();
  if (parse(handoff::testing::pieces_of(stream, cut, 64)) != whole) std::abort();
  return 0;
}
