// The connection loop in-process (no engine): concurrent keep-alive clients with pipelined,
// chunked and abandoned requests; a worker sees its client leave; stop() ends a loop with
// streams in flight. Small enough for the ThreadSanitizer build of the tests.
#include "handoff/serve/http_connection_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "serve_process.h"

namespace handoff::serve {
namespace {

using handoff::testing::ClientSocket;
using handoff::testing::status_of;
using std::chrono::milliseconds;

// A loop on a free loopback port, run on its own thread for the test's duration.
class LoopUnderTest {
 public:
  LoopUnderTest(const HttpLoopOptions& options, HttpConnectionLoop::WorkerHandler worker)
      : loop_(
            options,
            [](const HttpRequest& r) -> std::optional<HttpResponse> {
              if (r.path == "/health") return HttpResponse{200, "text/plain", "ok\n", {}};
              return std::nullopt;
            },
            std::move(worker),
            [](const HttpError& e) {
              return HttpResponse{e.status, "text/plain", e.message, {}};
            }) {
    FileDescriptor socket = bind_tcp("127.0.0.1", 0);
    start_listening(socket.get(), "127.0.0.1:0");
    port_ = bound_port(socket.get());
    thread_ = std::thread([this, s = std::move(socket)]() mutable { loop_.run(std::move(s)); });
  }
  ~LoopUnderTest() { stop(); }
  void stop() {
    loop_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  HttpConnectionLoop& loop() { return loop_; }

 private:
  HttpConnectionLoop loop_;
  int port_ = 0;
  std::thread thread_;
};

void echo(HttpExchange& ex) {
  ex.send(HttpResponse{200, "text/plain", "echo:" + ex.request().body, {}});
}

TEST(HttpConnectionLoop, ConcurrentKeepAlivePipelinedAndChunkedRequests) {
  HttpLoopOptions options;
  options.threads = 3;
  LoopUnderTest server(options, echo);
  std::atomic<int> right{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t)
    clients.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        ClientSocket c(server.port());
        const std::string body = std::to_string(t) + "-" + std::to_string(i);
        // Three requests in one write: a sized body, an inline route, a chunked body.
        c.send(
            "POST /a HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
            body +
            "GET /health HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
            "2\r\nxy\r\n0\r\n\r\n");
        const std::string a = c.read_response(), h = c.read_response(), b = c.read_response();
        if (a.find("echo:" + body) != std::string::npos && status_of(h) == 200 &&
            b.find("echo:xy") != std::string::npos)
          ++right;
        if (i % 3 == 0) c.send("GET /unfinished");  // left behind half sent
      }
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(right, 80);
  server.stop();
  EXPECT_EQ(server.loop().open_connections(), 0);
}

TEST(HttpConnectionLoop, AWorkerSeesItsClientLeave) {
  std::atomic<bool> saw_leave{false};
  HttpLoopOptions options;
  options.threads = 1;
  LoopUnderTest server(options, [&](HttpExchange& ex) {
    ex.start_stream(200, "text/event-stream", {});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ex.client_gone()) {
        saw_leave = true;
        return;
      }
      ex.send_chunk("data: x\n\n");
      std::this_thread::sleep_for(milliseconds(10));
    }
    ex.end_stream();
  });
  {
    ClientSocket c(server.port());
    c.send("GET /stream HTTP/1.1\r\n\r\n");
    ASSERT_TRUE(c.read_until("data: x"));
  }
  const auto start = std::chrono::steady_clock::now();
  while (!saw_leave && std::chrono::steady_clock::now() - start < std::chrono::seconds(3))
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(saw_leave);
  // The single worker is free again.
  ClientSocket next(server.port());
  next.send("GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(status_of(next.read_response()), 200);
}

TEST(HttpConnectionLoop, StopEndsALoopWithStreamsInFlight) {
  HttpLoopOptions options;
  options.threads = 2;
  auto server = std::make_unique<LoopUnderTest>(options, [](HttpExchange& ex) {
    ex.start_stream(200, "text/event-stream", {});
    while (!ex.client_gone()) {  // true once the loop stops
      ex.send_chunk("data: x\n\n");
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  std::vector<std::unique_ptr<ClientSocket>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::make_unique<ClientSocket>(server->port()));
    streams.back()->send("GET /stream HTTP/1.1\r\n\r\n");
  }
  ASSERT_TRUE(streams[0]->read_until("data: x"));
  const auto start = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(server->loop().open_connections(), 0);
}

}  // namespace
}  // namespace handoff::serve
