#pragma once
// An incremental HTTP/1.x request parser with limits: the head (request line and headers) is
// bounded in bytes and header count, and the body (Content-Length or chunked) in bytes, checked
// from the declared sizes before the body is read. Malformed input is an HttpError, never a
// crash; bytes past one request stay in the buffer for the next (pipelining).
#include <cstddef>
#include <cstdint>
#include <string>

#include "handoff/serve/http_request.h"

namespace handoff::serve {

struct HttpLimits {
  size_t max_head_bytes = 32 * 1024;  // request line + headers (and chunked trailers)
  size_t max_headers = 100;
  int64_t max_body_bytes = 1 << 20;
};

class HttpRequestParser {
 public:
  enum class Status { kNeedMore, kComplete, kError };

  explicit HttpRequestParser(const HttpLimits& limits) : limits_(limits) {}

  // Consumes the request's bytes from the front of `buffer`.
  Status feed(std::string& buffer);
  // Readies the parser for the next request of the connection.
  void reset();

  bool head_complete() const { return stage_ != Stage::kHead; }
  bool complete() const { return stage_ == Stage::kComplete; }
  // The client sent "Expect: 100-continue" and waits for a go-ahead before the body.
  bool expects_continue() const { return expects_continue_; }
  // True once any byte of this request arrived.
  bool started() const { return started_; }
  HttpRequest& request() { return request_; }
  const HttpError& error() const { return error_; }

 private:
  enum class Stage { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kComplete };

  Status fail(int status, std::string message);
  Status parse_head(std::string_view head);
  Status parse_header_line(std::string_view line);
  Status finish_head();
  Status feed_chunked(std::string& buffer);

  HttpLimits limits_;
  Stage stage_ = Stage::kHead;
  size_t scanned_ = 0;  // head bytes already searched for the blank line
  bool started_ = false;
  bool failed_ = false;
  bool expects_continue_ = false;
  bool chunked_ = false;
  bool has_length_ = false;
  int64_t content_length_ = 0;
  int64_t chunk_left_ = 0;
  size_t trailer_bytes_ = 0;
  HttpRequest request_;
  HttpError error_;
};

}  // namespace handoff::serve
