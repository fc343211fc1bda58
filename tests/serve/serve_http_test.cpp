// `handoff serve` against hostile and careless clients and operators, through raw sockets:
// slow and partial requests, connection floods, oversized bodies, busy ports, bad flags and a
// SIGTERM that cuts streams. Each server is the real binary on a tiny model (token-id prompts).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "../cli/cli_support.h"
#include "serve_process.h"

namespace handoff::testing {
namespace {

using nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string completion(int max_tokens, bool stream) {
  return json{
      {"prompt", {1, 2, 3}}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", stream}}
      .dump();
}

// A stream long enough to still run while a test looks at the server: a started SSE response.
std::unique_ptr<ClientSocket> start_long_stream(int port) {
  auto s = std::make_unique<ClientSocket>(port, milliseconds(10000));
  EXPECT_TRUE(s->send(post_request("/v1/completions", completion(60000, true))));
  EXPECT_TRUE(s->read_until("data: {")) << s->received;
  return s;
}

const char* kLongContext = "--max-model-len 65536 --kv-cache-tokens 65536 ";

// Whether /metrics counts one request finished as "abort" (its client left) within 5 s.
bool request_aborted_within_5s(int port) {
  const auto start = Clock::now();
  while (seconds_since(start) < 5) {
    if (get(port, "/metrics").find("finish_reason=\"abort\"} 1") != std::string::npos) return true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

TEST(ServeHttp, SlowlorisConnectionsStarveNoOne) {
  ServeProcess server("");
  ASSERT_GT(server.port(), 0) << server.log();
  // 80 connections (more than the 64 workers) that dribble a request head byte by byte.
  std::vector<std::unique_ptr<ClientSocket>> slow;
  for (int i = 0; i < 80; ++i) {
    slow.push_back(std::make_unique<ClientSocket>(server.port()));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->send("GET /health HTTP/1.1\r\n");
  }
  std::atomic<bool> done{false};
  std::thread dribbler([&] {
    while (!done) {
      for (auto& s : slow) s->send("X");
      std::this_thread::sleep_for(milliseconds(200));
    }
  });
  std::this_thread::sleep_for(milliseconds(500));
  const auto start = Clock::now();
  const std::string health =
      http(server.port(), "GET /health HTTP/1.1\r\n\r\n", milliseconds(3000));
  const double health_s = seconds_since(start);
  const auto start2 = Clock::now();
  const std::string answer = http(
      server.port(), post_request("/v1/completions", completion(4, false)), milliseconds(10000));
  const double answer_s = seconds_since(start2);
  done = true;
  dribbler.join();
  EXPECT_EQ(status_of(health), 200) << health;
  EXPECT_LT(health_s, 1.0);
  ASSERT_EQ(status_of(answer), 200) << answer;
  EXPECT_EQ(json::parse(body_of(answer))["usage"]["completion_tokens"], 4);
  EXPECT_LT(answer_s, 5.0);
}

TEST(ServeHttp, HeaderDeadlineDoesNotRestartPerByte) {
  ServeProcess server("--http-header-timeout 1");
  ASSERT_GT(server.port(), 0) << server.log();
  ClientSocket slow(server.port());
  slow.send("GET /health HTTP/1.1\r\n");
  const auto start = Clock::now();
  // A byte every 100 ms keeps coming; the head is still due one second after the first byte.
  while (seconds_since(start) < 4 && slow.send("X")) {
    pollfd p{slow.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) break;
  }
  slow.read_all();
  EXPECT_LT(seconds_since(start), 2.5);
  EXPECT_EQ(status_of(slow.received), 408) << slow.received;
  EXPECT_EQ(json::parse(body_of(slow.received))["error"]["code"], "request_timeout");
}

TEST(ServeHttp, ConnectionsPastTheCapGet503) {
  ServeProcess server("--max-connections 8");
  ASSERT_GT(server.port(), 0) << server.log();
  std::vector<std::unique_ptr<ClientSocket>> held;
  for (int i = 0; i < 8; ++i) held.push_back(std::make_unique<ClientSocket>(server.port()));
  std::this_thread::sleep_for(milliseconds(200));
  const std::string refused = get(server.port(), "/health");
  EXPECT_EQ(status_of(refused), 503) << refused;
  EXPECT_EQ(json::parse(body_of(refused))["error"]["code"], "overloaded");
  held.clear();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(status_of(get(server.port(), "/health")), 200);
}

TEST(ServeHttp, BurstOfConcurrentConnectionsIsAllAnswered) {
  ServeProcess server("");
  ASSERT_GT(server.port(), 0) << server.log();
  constexpr int kClients = 500;
  std::vector<int> fds;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const auto start = Clock::now();
  // All at once: non-blocking connects, so every SYN reaches the listen queue together.
  for (int i = 0; i < kClients; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fds.push_back(fd);
  }
  int answered = 0;
  std::vector<std::string> replies(kClients);
  std::vector<bool> sent(kClients, false), finished(kClients, false);
  while (answered < kClients && seconds_since(start) < 10) {
    std::vector<pollfd> polls;
    for (int i = 0; i < kClients; ++i)
      if (!finished[i])
        polls.push_back({fds[i], static_cast<short>(sent[i] ? POLLIN : POLLOUT), 0});
    ::poll(polls.data(), polls.size(), 100);
    for (const pollfd& p : polls) {
      const int i = static_cast<int>(std::find(fds.begin(), fds.end(), p.fd) - fds.begin());
      if (p.revents == 0) continue;
      if (!sent[i]) {
        const std::string req = "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
        sent[i] =
            ::send(p.fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
        if (!sent[i]) finished[i] = true;  // refused or reset
        continue;
      }
      char buffer[4096];
      const ssize_t n = ::recv(p.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        replies[i].append(buffer, static_cast<size_t>(n));
      } else {
        finished[i] = true;
        if (status_of(replies[i]) == 200) ++answered;
      }
    }
  }
  for (const int fd : fds) ::close(fd);
  EXPECT_EQ(answered, kClients);
  EXPECT_LT(seconds_since(start), 10.0);
}

TEST(ServeHttp, BusyPortIsRefusedNamingIt) {
  ServeProcess first("");
  ASSERT_GT(first.port(), 0) << first.log();
  const std::string where = "127.0.0.1:" + std::to_string(first.port());
  const auto r = run_command("timeout 20 " + std::string(HANDOFF_BINARY) + " serve --model " +
                             kServeModel + " --port " + std::to_string(first.port()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(where), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("already in use"), std::string::npos) << r.output;
  EXPECT_EQ(status_of(get(first.port(), "/health")), 200);
}

TEST(ServeHttp, BadServeFlagsAreRefusedBeforeTheModelLoads) {
  struct Case {
    std::string flags, named;
  };
  const std::vector<Case> cases = {
      {"--port 99999", "--port"},
      {"--port -1", "--port"},
      {"--http-threads 0", "--http-threads"},
      {"--http-threads -1", "--http-threads"},
      {"--http-threads 100000", "--http-threads"},
      {"--drain-timeout -1", "--drain-timeout"},
      {"--drain-timeout 1e300", "--drain-timeout"},
      {"--drain-timeout 0", "--drain-timeout"},
      {"--max-connections 0", "--max-connections"},
      {"--max-request-bytes 10", "--max-request-bytes"},
      {"--max-request-bytes 0", "--max-request-bytes"},
      {"--http-header-timeout 0", "--http-header-timeout"},
      {"--http-body-timeout -5", "--http-body-timeout"},
      {"--http-idle-timeout inf", "--http-idle-timeout"},
      {"--http-write-timeout 1e30", "--http-write-timeout"},
      {"--http-keepalive-requests 0", "--http-keepalive-requests"},
  };
  for (const auto& c : cases) {
    // A model folder that does not exist: the flag must be refused before it is looked at.
    const auto r = run_command("timeout 20 " + std::string(HANDOFF_BINARY) +
                               " serve --model /nonexistent-model " + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.named), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("nonexistent-model"), std::string::npos) << c.flags << "\n" << r.output;
  }
  // More connections than the process may open files.
  const auto r = run_command("ulimit -Sn 256 && ulimit -Hn 512 && " + std::string(HANDOFF_BINARY) +
                             " serve --model /nonexistent-model --max-connections 1000");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--max-connections 1000 needs"), std::string::npos) << r.output;
}

TEST(ServeHttp, DrainDeadlineEndsStreamsWithAnErrorAndDone) {
  ServeProcess server(std::string(kLongContext) + "--drain-timeout 1");
  ASSERT_GT(server.port(), 0) << server.log();
  auto stream = start_long_stream(server.port());
  ClientSocket plain(server.port(), milliseconds(10000));
  ASSERT_TRUE(plain.send(post_request("/v1/completions", completion(60000, false))));
  std::this_thread::sleep_for(milliseconds(200));
  server.signal(SIGTERM);
  const auto start = Clock::now();
  stream->read_all();
  const std::string cut = plain.read_response();
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(server.wait(milliseconds(10000)), 0) << server.log();
  // The stream's last events: an OpenAI error object, then [DONE], then the chunked end.
  const std::string& text = stream->received;
  const size_t error_at = text.rfind("data: {\"error\"");
  ASSERT_NE(error_at, std::string::npos)
      << text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
  const std::string tail = text.substr(error_at);
  EXPECT_NE(tail.find("\"code\":\"server_shutdown\""), std::string::npos) << tail;
  EXPECT_NE(tail.find("data: [DONE]\n\n"), std::string::npos) << tail;
  EXPECT_EQ(text.substr(text.size() - 7), "\r\n0\r\n\r\n");
  // The non-streamed one gets an error response instead of a dropped connection.
  EXPECT_EQ(status_of(cut), 503) << cut;
  EXPECT_EQ(json::parse(body_of(cut))["error"]["code"], "server_shutdown");
  const std::string log = server.log();
  EXPECT_NE(log.find("cut by the drain deadline"), std::string::npos) << log;
  EXPECT_EQ(log.find("client disconnected"), std::string::npos) << log;
}

TEST(ServeHttp, HealthAndMetricsStayFastWhileTheOnlyWorkerStreams) {
  ServeProcess server(std::string(kLongContext) + "--http-threads 1");
  ASSERT_GT(server.port(), 0) << server.log();
  auto stream = start_long_stream(server.port());
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    EXPECT_EQ(status_of(http(server.port(), "GET /health HTTP/1.1\r\n\r\n", milliseconds(2000))),
              200);
    EXPECT_LT(seconds_since(start), 1.0);
  }
  const std::string metrics = get(server.port(), "/metrics");
  EXPECT_EQ(status_of(metrics), 200);
  EXPECT_NE(metrics.find("handoff_num_requests_running"), std::string::npos);
  // Leaving cancels the stream's sequence (the engine ends it as "abort").
  stream->close();
  EXPECT_TRUE(request_aborted_within_5s(server.port())) << server.log();
}

TEST(ServeHttp, ClientLeavingANonStreamedRequestCancelsIt) {
  ServeProcess server(kLongContext);
  ASSERT_GT(server.port(), 0) << server.log();
  {
    ClientSocket c(server.port());
    ASSERT_TRUE(c.send(post_request("/v1/completions", completion(60000, false))));
    std::this_thread::sleep_for(milliseconds(500));
  }
  EXPECT_TRUE(request_aborted_within_5s(server.port())) << server.log();
  EXPECT_NE(server.log().find("client disconnected"), std::string::npos) << server.log();
}

TEST(ServeHttp, BodyLimitIs413BeforeTheBodyIsRead) {
  ServeProcess server("--max-request-bytes 4096");
  ASSERT_GT(server.port(), 0) << server.log();
  // Only the head is sent: the answer cannot wait for 50 MB that never come.
  const auto start = Clock::now();
  const std::string big = http(server.port(),
                               "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
                               "Content-Length: 50000000\r\n\r\n{\"prompt\": [",
                               milliseconds(3000));
  EXPECT_LT(seconds_since(start), 1.0);
  ASSERT_EQ(status_of(big), 413) << big;
  const json error = json::parse(body_of(big))["error"];
  EXPECT_EQ(error["code"], "request_too_large");
  EXPECT_NE(error["message"].get<std::string>().find("4096"), std::string::npos) << error;
  // A chunked body is cut as soon as its chunks pass the limit.
  const std::string chunked = http(
      server.port(), "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
                         std::string(2048, ' ') + "\r\n900\r\n");
  EXPECT_EQ(status_of(chunked), 413) << chunked;
  // Under the limit, with Expect: 100-continue, the body is asked for and answered.
  ClientSocket c(server.port());
  const std::string body = completion(2, false);
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  ASSERT_TRUE(c.read_until("HTTP/1.1 100 Continue\r\n\r\n")) << c.received;
  c.received.clear();
  ASSERT_TRUE(c.send(body));
  EXPECT_EQ(status_of(c.read_response()), 200);
}

TEST(ServeHttp, ContextOverflowIs400ContextLengthExceeded) {
  ServeProcess server("--max-model-len 64");
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string r =
      http(server.port(), post_request("/v1/completions", completion(100, false)));
  ASSERT_EQ(status_of(r), 400) << r;
  EXPECT_EQ(json::parse(body_of(r))["error"]["code"], "context_length_exceeded");
  // The default body limit follows --max-model-len: 64 bytes a token + 1 MiB.
  const std::string over =
      http(server.port(), "POST /v1/completions HTTP/1.1\r\nContent-Length: 1052673\r\n\r\n");
  ASSERT_EQ(status_of(over), 413) << over;
  EXPECT_NE(body_of(over).find("1052672"), std::string::npos) << over;
}

TEST(ServeHttp, RoutesAuthKeepAliveAndPipelining) {
  ServeProcess server("--api-key sekret");
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string key = "Authorization: Bearer sekret\r\n";
  EXPECT_EQ(status_of(get(server.port(), "/health")), 200);
  const std::string denied = get(server.port(), "/v1/models");
  EXPECT_EQ(status_of(denied), 401);
  EXPECT_EQ(json::parse(body_of(denied))["error"]["code"], "invalid_api_key");
  const std::string missing = get(server.port(), "/nope", key);
  EXPECT_EQ(status_of(missing), 404);
  EXPECT_EQ(json::parse(body_of(missing))["error"]["code"], "not_found");
  // One connection, three requests (the last two pipelined): all answered in order.
  ClientSocket c(server.port());
  ASSERT_TRUE(c.send("GET /v1/models HTTP/1.1\r\n" + key + "\r\n"));
  const std::string models = c.read_response();
  ASSERT_EQ(status_of(models), 200) << models;
  EXPECT_EQ(json::parse(body_of(models))["data"][0]["id"], "dsv32_tiny_sparse");
  ASSERT_TRUE(c.send(post_request("/v1/completions", completion(3, false), key) +
                     "GET /health HTTP/1.1\r\n\r\n"));
  const std::string answer = c.read_response();
  ASSERT_EQ(status_of(answer), 200) << answer;
  EXPECT_EQ(json::parse(body_of(answer))["usage"]["completion_tokens"], 3);
  EXPECT_EQ(status_of(c.read_response()), 200);
  // Malformed requests are answered with an OpenAI error, not a dropped connection.
  const std::string bad = http(server.port(), "GET /health HTTP/1.1\r\nBroken header\r\n\r\n");
  EXPECT_EQ(status_of(bad), 400) << bad;
  EXPECT_TRUE(json::parse(body_of(bad))["error"].contains("message"));
}

TEST(ServeHttp, KeepAliveIsBoundedInTimeAndRequests) {
  ServeProcess server("--http-idle-timeout 1 --http-keepalive-requests 2");
  ASSERT_GT(server.port(), 0) << server.log();
  // An idle kept-alive connection is closed after the idle timeout.
  ClientSocket idle(server.port());
  ASSERT_TRUE(idle.send("GET /health HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(status_of(idle.read_response()), 200);
  const auto start = Clock::now();
  EXPECT_FALSE(idle.read_some());  // the server's close, not our read timeout
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_GT(seconds_since(start), 0.5);
  // The second request of a connection is its last: "Connection: close", then the close.
  ClientSocket busy(server.port());
  ASSERT_TRUE(busy.send("GET /health HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n"));
  const std::string first = busy.read_response();
  const std::string second = busy.read_response();
  EXPECT_EQ(first.find("Connection: close"), std::string::npos) << first;
  EXPECT_NE(second.find("Connection: close"), std::string::npos) << second;
  EXPECT_FALSE(busy.read_some());
}

}  // namespace
}  // namespace handoff::testing
