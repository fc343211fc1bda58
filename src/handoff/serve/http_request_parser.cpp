#include "handoff/serve/http_request_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace handoff::serve {
namespace {

// RFC 9110 token characters (methods and header names).
bool is_token_char(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Removes the line ending ("\n" or "\r\n") a line was cut at.
std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Does a comma-separated header value list `token` (case-insensitively)?
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (lower(trim(value.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// The longest Content-Length or chunk size taken at face value: 18 decimal digits (or 15 hex)
// stay inside int64; anything longer is over every body limit.
constexpr size_t kMaxDecimalDigits = 18;
constexpr size_t kMaxHexDigits = 15;
constexpr size_t kMaxChunkLine = 1024;

}  // namespace

void HttpRequestParser::reset() {
  const HttpLimits limits = limits_;
  *this = HttpRequestParser(limits);
}

HttpRequestParser::Status HttpRequestParser::fail(int status, std::string message) {
  error_ = {status, std::move(message)};
  failed_ = true;
  return Status::kError;
}

HttpRequestParser::Status HttpRequestParser::feed(std::string& buffer) {
  if (failed_) return Status::kError;
  if (stage_ == Stage::kComplete) return Status::kComplete;
  if (stage_ == Stage::kHead) {
    // A blank line or two before a request is allowed (RFC 9112 2.2).
    if (!started_) {
      const size_t skip = buffer.find_first_not_of("\r\n");
      buffer.erase(0, skip == std::string::npos ? buffer.size() : skip);
      if (buffer.empty()) return Status::kNeedMore;
      started_ = true;
    }
    size_t end = std::string::npos;
    size_t i = scanned_;
    for (; i < buffer.size(); ++i) {
      if (buffer[i] != '\n') continue;
      if (i + 1 >= buffer.size()) break;
      if (buffer[i + 1] == '\n') {
        end = i + 2;
        break;
      }
      if (buffer[i + 1] != '\r') continue;
      if (i + 2 >= buffer.size()) break;
      if (buffer[i + 2] == '\n') {
        end = i + 3;
        break;
      }
    }
    if (end == std::string::npos) {
      scanned_ = i;
      if (buffer.size() > limits_.max_head_bytes)
        return fail(431, fmt::format("the request head exceeds {} bytes", limits_.max_head_bytes));
      return Status::kNeedMore;
    }
    if (end > limits_.max_head_bytes)
      return fail(431, fmt::format("the request head exceeds {} bytes", limits_.max_head_bytes));
    const Status head = parse_head(std::string_view(buffer.data(), end));
    buffer.erase(0, end);
    if (head != Status::kNeedMore) return head;
  }
  if (stage_ == Stage::kBody) {
    const size_t want = static_cast<size_t>(content_length_) - request_.body.size();
    const size_t take = std::min(want, buffer.size());
    request_.body.append(buffer, 0, take);
    buffer.erase(0, take);
    if (request_.body.size() == static_cast<size_t>(content_length_)) stage_ = Stage::kComplete;
  } else if (stage_ != Stage::kComplete) {
    const Status chunked = feed_chunked(buffer);
    if (chunked != Status::kNeedMore) return chunked;
  }
  return stage_ == Stage::kComplete ? Status::kComplete : Status::kNeedMore;
}

HttpRequestParser::Status HttpRequestParser::parse_head(std::string_view head) {
  size_t nl = head.find('\n');
  const std::string_view line = strip_cr(head.substr(0, nl));
  head.remove_prefix(nl + 1);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line (expected 'METHOD /path HTTP/1.1')");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  if (target.empty() || target.front() != '/')
    return fail(400, "the request target must be a path starting with '/'");
  for (const char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return fail(400, "the request target holds a control character");
  if (version == "HTTP/1.1") {
    request_.minor_version = 1;
  } else if (version == "HTTP/1.0") {
    request_.minor_version = 0;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" &&
             std::isdigit(static_cast<unsigned char>(version[5])) && version[6] == '.' &&
             std::isdigit(static_cast<unsigned char>(version[7]))) {
    return fail(505, fmt::format("{} is not supported (HTTP/1.0 or HTTP/1.1 only)", version));
  } else {
    return fail(400, "malformed HTTP version in the request line");
  }
  request_.method = method;
  request_.target = target;
  request_.path = target.substr(0, target.find('?'));
  while (!head.empty()) {
    nl = head.find('\n');
    const std::string_view header = strip_cr(head.substr(0, nl));
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (header.empty()) break;
    const Status s = parse_header_line(header);
    if (s == Status::kError) return s;
  }
  return finish_head();
}

HttpRequestParser::Status HttpRequestParser::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "obsolete header line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return fail(400, fmt::format("malformed header line '{}'", line.substr(0, 64)));
  const std::string_view value = trim(line.substr(colon + 1));
  for (const char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
      return fail(400, "a header value holds a control character");
  if (request_.headers.size() >= limits_.max_headers)
    return fail(431, fmt::format("more than {} request headers", limits_.max_headers));
  request_.headers.emplace_back(lower(line.substr(0, colon)), std::string(value));
  return Status::kNeedMore;
}

HttpRequestParser::Status HttpRequestParser::finish_head() {
  request_.keep_alive = request_.minor_version >= 1;
  bool has_transfer_encoding = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "connection") {
      if (lists_token(value, "close")) request_.keep_alive = false;
      if (lists_token(value, "keep-alive")) request_.keep_alive = true;
    } else if (name == "transfer-encoding") {
      if (has_transfer_encoding) return fail(400, "more than one Transfer-Encoding header");
      has_transfer_encoding = true;
      if (lower(value) != "chunked")
        return fail(501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked)",
                                     value.substr(0, 64)));
      chunked_ = true;
    } else if (name == "content-length") {
      if (value.empty() ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return fail(400, fmt::format("Content-Length '{}' is not a number", value.substr(0, 64)));
      const int64_t length = value.size() > kMaxDecimalDigits ? INT64_MAX : std::stoll(value);
      if (has_length_ && length != content_length_)
        return fail(400, "conflicting Content-Length headers");
      has_length_ = true;
      content_length_ = length;
    } else if (name == "expect") {
      expects_continue_ = request_.minor_version >= 1 && lower(value) == "100-continue";
    }
  }
  // Both framings at once is how requests are smuggled past proxies (RFC 9112 6.3).
  if (chunked_ && has_length_)
    return fail(400, "a request may not carry both Content-Length and Transfer-Encoding");
  if (chunked_ && request_.minor_version == 0)
    return fail(400, "chunked transfer coding needs HTTP/1.1");
  if (has_length_ && content_length_ > limits_.max_body_bytes)
    return fail(
        413, fmt::format("the request body ({} bytes) exceeds the limit of {} bytes",
                         request_.header("content-length")->substr(0, 32), limits_.max_body_bytes));
  if (chunked_) {
    stage_ = Stage::kChunkSize;
  } else if (content_length_ > 0) {
    stage_ = Stage::kBody;
  } else {
    stage_ = Stage::kComplete;
    expects_continue_ = false;
  }
  return stage_ == Stage::kComplete ? Status::kComplete : Status::kNeedMore;
}

HttpRequestParser::Status HttpRequestParser::feed_chunked(std::string& buffer) {
  while (true) {
    switch (stage_) {
      case Stage::kChunkSize: {
        const size_t nl = buffer.find('\n');
        if (nl == std::string::npos) {
          if (buffer.size() > kMaxChunkLine) return fail(400, "a chunk size line is too long");
          return Status::kNeedMore;
        }
        if (nl > kMaxChunkLine) return fail(400, "a chunk size line is too long");
        std::string_view line = strip_cr(std::string_view(buffer.data(), nl));
        line = trim(line.substr(0, line.find(';')));
        if (line.empty() || !std::all_of(line.begin(), line.end(), [](char c) {
              return std::isxdigit(static_cast<unsigned char>(c));
            }))
          return fail(400, "malformed chunk size in the chunked request body");
        const int64_t size =
            line.size() > kMaxHexDigits ? INT64_MAX : std::stoll(std::string(line), nullptr, 16);
        if (size > limits_.max_body_bytes - static_cast<int64_t>(request_.body.size()))
          return fail(413, fmt::format("the chunked request body exceeds the limit of {} bytes",
                                       limits_.max_body_bytes));
        buffer.erase(0, nl + 1);
        chunk_left_ = size;
        stage_ = size == 0 ? Stage::kTrailers : Stage::kChunkData;
        break;
      }
      case Stage::kChunkData: {
        const size_t take = std::min(static_cast<size_t>(chunk_left_), buffer.size());
        request_.body.append(buffer, 0, take);
        buffer.erase(0, take);
        chunk_left_ -= static_cast<int64_t>(take);
        if (chunk_left_ > 0) return Status::kNeedMore;
        stage_ = Stage::kChunkDataEnd;
        break;
      }
      case Stage::kChunkDataEnd: {
        if (buffer.empty() || buffer == "\r") return Status::kNeedMore;
        const size_t ending = buffer.compare(0, 2, "\r\n") == 0 ? 2 : buffer[0] == '\n' ? 1 : 0;
        if (ending == 0) return fail(400, "chunk data is not followed by a line end");
        buffer.erase(0, ending);
        stage_ = Stage::kChunkSize;
        break;
      }
      case Stage::kTrailers: {
        const size_t nl = buffer.find('\n');
        const size_t line_bytes = nl == std::string::npos ? buffer.size() : nl + 1;
        if (trailer_bytes_ + line_bytes > limits_.max_head_bytes)
          return fail(431, fmt::format("the chunked body's trailers exceed {} bytes",
                                       limits_.max_head_bytes));
        if (nl == std::string::npos) return Status::kNeedMore;
        const bool blank = strip_cr(std::string_view(buffer.data(), nl)).empty();
        trailer_bytes_ += line_bytes;
        buffer.erase(0, nl + 1);
        if (blank) {
          stage_ = Stage::kComplete;
          return Status::kComplete;
        }
        break;  // trailer fields are ignored
      }
      default:
        return Status::kNeedMore;
    }
  }
}

}  // namespace handoff::serve
