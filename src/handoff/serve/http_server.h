#pragma once
// The OpenAI-compatible HTTP front of an Engine: /v1/completions and /v1/chat/completions
// (plain and SSE), /v1/models[/{id}], /tokenize, /detokenize, /version, /health, /metrics.
// Errors become OpenAI error objects. Every routed response carries X-Request-Id and, for
// allowed origins, the CORS headers.
// Connections, deadlines and limits are the HttpConnectionLoop's; this file is the routes.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "handoff/engine/engine.h"
#include "handoff/serve/http_connection_loop.h"
#include "handoff/serve/metrics.h"
#include "handoff/serve/openai_protocol.h"

namespace handoff::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;  // empty: no authentication
  // Origins browsers may call from (CORS); "*" allows any; empty: no CORS headers at all.
  std::vector<std::string> allowed_origins;
  HttpLoopOptions http;
  std::chrono::milliseconds drain_timeout{30'000};
};

class HttpServer {
 public:
  // `engine` (started), the tokenizer and template in `ctx` must outlive the server.
  HttpServer(const ServerOptions& options, engine::Engine& engine, ProtocolContext ctx);

  // Listens on `socket` (from bind_tcp(options.host, options.port)) and serves until
  // shutdown(); reports the bound port (useful with port 0) through on_listening first.
  void run(FileDescriptor socket, const std::function<void(int port)>& on_listening = {});
  // Drains: new requests get 503, in-flight ones may finish until the drain timeout; those
  // still running then are ended with an error (a stream's last events are an error and
  // [DONE]). Then stops.
  void shutdown();

 private:
  std::optional<HttpResponse> answer_inline(const HttpRequest& request);
  std::optional<HttpResponse> route_inline(const HttpRequest& request);
  void answer_on_worker(HttpExchange& exchange);
  void generate(Endpoint endpoint, HttpExchange& exchange, const std::string& request_id);
  // The CORS headers for the request's Origin (none when it is absent or not allowed).
  HttpHeaders cors_headers(const HttpRequest& request) const;
  void count(const std::string& endpoint, int status);

  ServerOptions options_;
  engine::Engine& engine_;
  ProtocolContext ctx_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> drain_expired_{false};  // the drain deadline passed: end what still runs
  std::atomic<int64_t> active_{0};          // requests on workers
  std::mutex counts_mutex_;
  HttpCounts counts_;
  HttpConnectionLoop loop_;
};

}  // namespace handoff::serve
