#include "handoff/serve/http_server.h"

#include <thread>

#include "handoff/log.h"

namespace handoff::serve {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// How often a worker waiting on the engine checks for a departed client or the drain deadline.
constexpr milliseconds kPoll{100};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpResponse error_response(const ApiError& e) {
  return HttpResponse{e.status, "application/json", to_text(error_body(e)), {}};
}

// A request refused by the connection loop, as an OpenAI error object.
HttpResponse loop_error_response(const HttpError& e) {
  const char* code = e.status == 408   ? "request_timeout"
                     : e.status == 413 ? "request_too_large"
                     : e.status == 431 ? "request_header_fields_too_large"
                     : e.status == 503 ? "overloaded"
                                       : "invalid_request";
  // The operator's knob for the body limit, so the client can ask for the right thing.
  const std::string message = e.status == 413 ? e.message + " (--max-request-bytes)" : e.message;
  return error_response(ApiError(e.status, message, "", code,
                                 e.status >= 500 ? "server_error" : "invalid_request_error"));
}

std::string sse_event(const json& j) { return "data: " + to_text(j) + "\n\n"; }

// Holds `active` up while a worker answers a request, so shutdown can wait for it.
class ActiveGuard {
 public:
  explicit ActiveGuard(std::atomic<int64_t>& active) : active_(active) { ++active_; }
  ~ActiveGuard() { --active_; }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;

 private:
  std::atomic<int64_t>& active_;
};

constexpr const char* kCompletionsPath = "/v1/completions";
constexpr const char* kChatPath = "/v1/chat/completions";

bool known_route(const std::string& path) {
  return path == kCompletionsPath || path == kChatPath || path == "/v1/models" ||
         path == "/health" || path == "/metrics";
}

}  // namespace

HttpServer::HttpServer(const ServerOptions& options, engine::Engine& engine, ProtocolContext ctx)
    : options_(options),
      engine_(engine),
      ctx_(std::move(ctx)),
      loop_(
          options.http, [this](const HttpRequest& r) { return answer_inline(r); },
          [this](HttpExchange& e) { answer_on_worker(e); }, loop_error_response) {}

void HttpServer::count(const std::string& endpoint, int status) {
  std::lock_guard lock(counts_mutex_);
  ++counts_.requests[{endpoint, status}];
}

std::optional<HttpResponse> HttpServer::answer_inline(const HttpRequest& req) {
  const bool get = req.method == "GET";
  if (get && req.path == "/health") {
    // A failed engine (a rank is gone) reads unhealthy before it reads draining.
    if (const std::string failure = engine_.failure(); !failure.empty())
      return HttpResponse{503, "text/plain", "engine failed: " + failure + "\n", {}};
    return draining_ ? HttpResponse{503, "text/plain", "draining\n", {}}
                     : HttpResponse{200, "text/plain", "ok\n", {}};
  }
  if (get && req.path == "/metrics") {
    HttpCounts counts;
    {
      std::lock_guard lock(counts_mutex_);
      counts = counts_;
    }
    return HttpResponse{200,
                        "text/plain; version=0.0.4",
                        render_metrics(engine_.stats(), counts, engine_.comm_counts()),
                        {}};
  }
  if (!options_.api_key.empty() && req.path != "/health" && req.path != "/metrics") {
    const std::string* auth = req.header("authorization");
    if (auth == nullptr || *auth != "Bearer " + options_.api_key) {
      if (known_route(req.path)) count(req.path, 401);
      return error_response(ApiError(401, "Incorrect API key provided", "", "invalid_api_key"));
    }
  }
  if (get && req.path == "/v1/models") {
    const json body = {{"object", "list"},
                       {"data", json::array({{{"id", ctx_.served_model},
                                              {"object", "model"},
                                              {"created", unix_now()},
                                              {"owned_by", "handoff"},
                                              {"max_model_len", ctx_.max_model_len}}})}};
    count("/v1/models", 200);
    return HttpResponse{200, "application/json", body.dump(), {}};
  }
  if (req.method == "POST" && (req.path == kCompletionsPath || req.path == kChatPath)) {
    if (!draining_) return std::nullopt;  // a worker runs it
    count(req.path, 503);
    return error_response(
        ApiError(503, "the server is shutting down", "", "overloaded", "server_error"));
  }
  return error_response(
      ApiError(404, fmt::format("no route {} {}", req.method, req.path), "", "not_found"));
}

void HttpServer::answer_on_worker(HttpExchange& exchange) {
  generate(exchange.request().path == kChatPath ? Endpoint::kChat : Endpoint::kCompletions,
           exchange);
}

void HttpServer::generate(Endpoint endpoint, HttpExchange& ex) {
  const std::string path = endpoint == Endpoint::kChat ? kChatPath : kCompletionsPath;
  ActiveGuard guard(active_);
  ParsedRequest parsed;
  std::shared_ptr<engine::RequestStream> stream;
  auto refuse = [&](const ApiError& e) {
    ex.send(error_response(e));
    count(path, e.status);
  };
  try {
    if (draining_)
      throw ApiError(503, "the server is shutting down", "", "overloaded", "server_error");
    parsed = parse_request(endpoint, ex.request().body, ctx_);
    stream = engine_.submit(parsed.request);
  } catch (const ApiError& e) {
    return refuse(e);
  } catch (const engine::PromptTooLongError& e) {
    // The request is well formed but does not fit the context: OpenAI answers 400 with this
    // code (413 is kept for bodies over --max-request-bytes).
    return refuse(ApiError(400, e.what(), endpoint == Endpoint::kChat ? "messages" : "prompt",
                           "context_length_exceeded"));
  } catch (const InputError& e) {
    return refuse(ApiError(400, e.what(), "", "invalid_value"));
  } catch (const engine::OverloadedError& e) {
    return refuse(ApiError(503, e.what(), "", "overloaded", "server_error"));
  }
  const std::string id =
      fmt::format("{}-{}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", stream->id());
  const int64_t created = unix_now();
  const ApiError cut_error(
      503,
      fmt::format("the server shut down before this request finished (drain timeout of {} s)",
                  options_.drain_timeout.count() / 1000.0),
      "", "server_shutdown", "server_error");
  // Ends the sequence when the request cannot be answered any more; says why in the log.
  auto abandon = [&](const char* why) {
    log::info("request {}: {}, cancelling", id, why);
    engine_.cancel(stream->id());
  };

  if (!parsed.stream) {
    engine::RequestEvent all;
    while (!stream->collect(all, kPoll)) {
      if (drain_expired_) {
        abandon("cut by the drain deadline");
        ex.send(error_response(cut_error));
        return count(path, cut_error.status);
      }
      if (ex.client_gone()) return abandon("client disconnected");
    }
    if (!all.error.empty()) {
      ex.send(error_response(ApiError(500, all.error, "", "internal_error", "server_error")));
      return count(path, 500);
    }
    count(path, 200);
    if (!ex.send(HttpResponse{
            200, "application/json", to_text(make_response(parsed, id, created, all, ctx_)), {}}))
      log::info("request {}: client disconnected before its response was written", id);
    return;
  }

  count(path, 200);
  bool sent = ex.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  if (sent && endpoint == Endpoint::kChat)
    sent = ex.send_chunk(sse_event(make_role_chunk(parsed, id, created)));
  while (sent) {
    if (drain_expired_) {
      abandon("cut by the drain deadline");
      // The terminal events a client waits for, so the cut is not mistaken for a finish.
      if (ex.send_chunk(sse_event(error_body(cut_error))) && ex.send_chunk("data: [DONE]\n\n"))
        ex.end_stream();
      return;
    }
    if (ex.client_gone()) break;
    engine::RequestEvent e;
    if (!stream->pop(e, kPoll)) continue;
    if (!e.error.empty()) {
      if (ex.send_chunk(
              sse_event(error_body(ApiError(500, e.error, "", "internal_error", "server_error")))))
        ex.end_stream();
      return;
    }
    // Every token is a chunk, even when its text is held back (clients time tokens).
    sent = ex.send_chunk(sse_event(make_chunk(parsed, id, created, e, ctx_)));
    if (sent && e.finish_reason) {
      if (parsed.include_usage)
        sent = ex.send_chunk(
            sse_event(make_usage_chunk(parsed, id, created, e.prompt_tokens, e.completion_tokens)));
      if (sent && ex.send_chunk("data: [DONE]\n\n")) ex.end_stream();
      return;
    }
  }
  abandon("client disconnected");
}

void HttpServer::run(FileDescriptor socket, const std::function<void(int)>& on_listening) {
  start_listening(socket.get(), fmt::format("{}:{}", options_.host, options_.port));
  if (on_listening) on_listening(bound_port(socket.get()));
  loop_.run(std::move(socket));
}

void HttpServer::shutdown() {
  draining_ = true;
  loop_.set_draining();
  const auto busy = [&] { return active_ > 0 || engine_.in_flight() > 0; };
  const auto deadline = Clock::now() + options_.drain_timeout;
  while (busy() && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(20));
  if (busy()) {
    log::warn("drain deadline ({} s) reached: ending {} requests still in flight",
              options_.drain_timeout.count() / 1000.0, engine_.in_flight());
    drain_expired_ = true;
    // Workers see the flag within a poll and write their last events, each bounded by the
    // write timeout.
    const auto grace = Clock::now() + options_.http.write_timeout + milliseconds(1000);
    while (active_ > 0 && Clock::now() < grace) std::this_thread::sleep_for(milliseconds(20));
  }
  loop_.stop();
}

}  // namespace handoff::serve
