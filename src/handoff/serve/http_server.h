#pragma once
// The OpenAI-compatible HTTP front of an Engine: /v1/completions and /v1/chat/completions
// (plain and SSE), /v1/models, /health, /metrics. Errors become OpenAI error objects.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "handoff/engine/engine.h"
#include "handoff/serve/metrics.h"
#include "handoff/serve/openai_protocol.h"

namespace httplib {
class Server;
}

namespace handoff::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;  // empty: no authentication
  int http_threads = 64;
  double drain_timeout_s = 30.0;
};

class HttpServer {
 public:
  // `engine` (started), the tokenizer and template in `ctx` must outlive the server.
  HttpServer(const ServerOptions& options, engine::Engine& engine, ProtocolContext ctx);
  ~HttpServer();

  // Binds (throws Error when the address is taken) and serves until shutdown().
  // Returns the bound port (useful with port 0) through on_listening before blocking.
  void run(const std::function<void(int port)>& on_listening = {});
  // Stops accepting new requests (503), waits for in-flight ones up to drain_timeout_s, stops.
  void shutdown();

 private:
  void install_routes();
  void count(const std::string& endpoint, int status);

  ServerOptions options_;
  engine::Engine& engine_;
  ProtocolContext ctx_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> active_{0};  // handlers and streams still writing
  std::atomic<uint64_t> next_id_{1};
  std::mutex counts_mutex_;
  HttpCounts counts_;
};

}  // namespace handoff::serve
