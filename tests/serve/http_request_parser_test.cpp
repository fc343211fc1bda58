// The HTTP request parser on well-formed, split, pipelined and hostile input: every malformed
// request is a clear 4xx/5xx, never a crash, a hang or a request that was not sent.
#include "handoff/serve/http_request_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace handoff::serve {
namespace {

using Status = HttpRequestParser::Status;

HttpLimits limits(int64_t max_body = 1 << 20) {
  HttpLimits l;
  l.max_head_bytes = 1024;
  l.max_headers = 8;
  l.max_body_bytes = max_body;
  return l;
}

struct Parsed {
  Status status;
  HttpRequestParser parser;
  std::string rest;
};

Parsed parse(std::string text, const HttpLimits& l = limits()) {
  HttpRequestParser parser(l);
  const Status s = parser.feed(text);
  return {s, std::move(parser), text};
}

// The error status a whole request text is refused with (0: not refused).
int refused(const std::string& text, const HttpLimits& l = limits()) {
  Parsed p = parse(text, l);
  return p.status == Status::kError ? p.parser.error().status : 0;
}

TEST(HttpRequestParser, ParsesRequestLineHeadersAndBody) {
  Parsed p = parse(
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:  application/json \r\n"
      "Content-Length: 5\r\nAuthorization: Bearer k\r\n\r\nhello");
  ASSERT_EQ(p.status, Status::kComplete);
  const HttpRequest& r = p.parser.request();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.body, "hello");
  ASSERT_NE(r.header("content-type"), nullptr);
  EXPECT_EQ(*r.header("content-type"), "application/json");
  EXPECT_EQ(*r.header("authorization"), "Bearer k");
  EXPECT_TRUE(r.keep_alive);
  EXPECT_TRUE(p.rest.empty());
}

TEST(HttpRequestParser, ByteByByteEqualsWhole) {
  const std::string text =
      "\r\nPOST /p HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n3;ext=1\r\nabc\r\n"
      "A\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
  HttpRequestParser parser(limits());
  std::string buffer;
  Status s = Status::kNeedMore;
  for (size_t i = 0; i < text.size(); ++i) {
    buffer += text[i];
    s = parser.feed(buffer);
    if (i + 1 < text.size()) {
      ASSERT_EQ(s, Status::kNeedMore) << "at byte " << i;
    }
  }
  ASSERT_EQ(s, Status::kComplete);
  EXPECT_EQ(parser.request().body, "abc0123456789");
  EXPECT_TRUE(buffer.empty());
}

TEST(HttpRequestParser, LeavesAPipelinedRequestInTheBuffer) {
  Parsed p = parse("GET /health HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.status, Status::kComplete);
  EXPECT_EQ(p.parser.request().path, "/health");
  EXPECT_EQ(p.rest, "GET /metrics HTTP/1.1\r\n\r\n");
  p.parser.reset();
  ASSERT_EQ(p.parser.feed(p.rest), Status::kComplete);
  EXPECT_EQ(p.parser.request().path, "/metrics");
}

TEST(HttpRequestParser, KeepAliveFollowsVersionAndConnectionHeader) {
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").parser.request().keep_alive);
  EXPECT_TRUE(
      parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").parser.request().keep_alive);
  EXPECT_FALSE(
      parse("GET / HTTP/1.1\r\nConnection: te, close\r\n\r\n").parser.request().keep_alive);
}

TEST(HttpRequestParser, ExpectContinueIsReportedAfterTheHead) {
  Parsed p = parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(p.status, Status::kNeedMore);
  EXPECT_TRUE(p.parser.head_complete());
  EXPECT_TRUE(p.parser.expects_continue());
}

TEST(HttpRequestParser, MalformedRequestLinesAre400) {
  for (const char* text :
       {"GET\r\n\r\n", "GET /\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1 extra\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n", "GET http://x/ HTTP/1.1\r\n\r\n", "GET / HTTP/x\r\n\r\n",
        "GET /a\x01 HTTP/1.1\r\n\r\n", "\x16\x03\x01\x02\x05\x01\r\n\r\n"})
    EXPECT_EQ(refused(text), 400) << text;
  EXPECT_EQ(refused("GET / HTTP/2.0\r\n\r\n"), 505);
}

TEST(HttpRequestParser, MalformedHeadersAre400) {
  for (const char* text :
       {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", "GET / HTTP/1.1\r\n: empty\r\n\r\n",
        "GET / HTTP/1.1\r\nA b: c\r\n\r\n", "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n"})
    EXPECT_EQ(refused(text), 400) << text;
}

TEST(HttpRequestParser, HugeOrManyHeadersAre431) {
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nA: " + std::string(2000, 'x') + "\r\n\r\n"), 431);
  // Also before the head ends: an endless header is refused once it passes the limit.
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nA: " + std::string(2000, 'x')), 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(refused(many + "\r\n"), 431);
}

TEST(HttpRequestParser, BadContentLengthIs400) {
  for (const char* text : {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                           "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
                           "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
                           "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",
                           "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                           "POST / HTTP/1.1\r\nContent-Length: 1\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n",
                           "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"})
    EXPECT_EQ(refused(text), 400) << text;
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
}

TEST(HttpRequestParser, BodyOverTheLimitIs413FromTheHeadAlone) {
  // Refused from Content-Length, before a single body byte arrives.
  Parsed p = parse("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", limits(100));
  ASSERT_EQ(p.status, Status::kError);
  EXPECT_EQ(p.parser.error().status, 413);
  EXPECT_NE(p.parser.error().message.find("101"), std::string::npos) << p.parser.error().message;
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 413);
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n", limits(100)), 0);
}

TEST(HttpRequestParser, ChunkedBodyOverTheLimitIs413) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(refused(head + "65\r\n", limits(100)), 413);  // one chunk of 101
  EXPECT_EQ(refused(head + "32\r\n" + std::string(50, 'a') + "\r\n33\r\n", limits(100)), 413);
  EXPECT_EQ(refused(head + "fffffffffffffffffffff\r\n", limits(100)), 413);
}

TEST(HttpRequestParser, MalformedOrTruncatedChunkedBodies) {
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(refused(head + "zz\r\n"), 400);
  EXPECT_EQ(refused(head + "\r\n"), 400);
  EXPECT_EQ(refused(head + "3\r\nabcX\r\n"), 400);
  EXPECT_EQ(refused(head + std::string(2000, '1')), 400);
  // Truncated: waits for more, never completes on what it has.
  for (const std::string cut : {"3\r\nab", "3\r\nabc\r\n", "0\r\n", "0\r\nTrailer: x\r\n"})
    EXPECT_EQ(parse(head + cut).status, Status::kNeedMore) << cut;
}

TEST(HttpRequestParser, RandomBytesNeverCrashOrComplete) {
  std::mt19937 rng(7);
  static const char kBytes[] = "GET /HTP1.\r\n:0123456789abcdefxContent-Length chunked\x00\xff";
  const std::string alphabet(kBytes, sizeof kBytes - 1);
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const size_t n = rng() % 200;
    for (size_t i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    HttpRequestParser parser(limits(64));
    std::string buffer;
    // Fed in random pieces, as a network delivers them.
    for (size_t at = 0; at < text.size();) {
      const size_t piece = 1 + rng() % 16;
      buffer += text.substr(at, piece);
      at += piece;
      const Status s = parser.feed(buffer);
      if (s == Status::kError) {
        EXPECT_GE(parser.error().status, 400);
        EXPECT_FALSE(parser.error().message.empty());
        break;
      }
      if (s == Status::kComplete) {
        EXPECT_FALSE(parser.request().method.empty());
        EXPECT_EQ(parser.request().path.front(), '/');
        break;
      }
    }
  }
}

}  // namespace
}  // namespace handoff::serve
