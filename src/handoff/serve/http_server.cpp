#include "handoff/serve/http_server.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "handoff/log.h"

namespace handoff::serve {
namespace {

using nlohmann::json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(to_text(error_body(e)), "application/json");
}

// Holds `active` up while a request is handled or streamed, so shutdown can wait for it.
class ActiveGuard {
 public:
  explicit ActiveGuard(std::atomic<int64_t>& active) : active_(active) { ++active_; }
  ~ActiveGuard() { --active_; }
  ActiveGuard(const ActiveGuard&) = delete;
  ActiveGuard& operator=(const ActiveGuard&) = delete;

 private:
  std::atomic<int64_t>& active_;
};

// The state of one streamed response, shared by the content provider and its releaser.
struct StreamState {
  ParsedRequest parsed;
  std::shared_ptr<engine::RequestStream> stream;
  std::string id;
  int64_t created = 0;
  bool role_sent = false;
  bool done = false;
  std::unique_ptr<ActiveGuard> guard;
};

}  // namespace

HttpServer::HttpServer(const ServerOptions& options, engine::Engine& engine, ProtocolContext ctx)
    : options_(options),
      engine_(engine),
      ctx_(std::move(ctx)),
      server_(std::make_unique<httplib::Server>()) {
  const int threads = options.http_threads;
  // httplib owns the queue it gets from this factory (its API takes a raw pointer).
  server_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  server_->set_read_timeout(60, 0);
  server_->set_write_timeout(60, 0);
  server_->set_payload_max_length(size_t{64} << 20);
  install_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::count(const std::string& endpoint, int status) {
  std::lock_guard lock(counts_mutex_);
  ++counts_.requests[{endpoint, status}];
}

void HttpServer::install_routes() {
  httplib::Server& svr = *server_;
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path == "/health" || req.path == "/metrics")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect API key provided", "", "invalid_api_key"));
    count(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      res.status = 503;
      res.set_content("draining\n", "text/plain");
      return;
    }
    res.set_content("ok\n", "text/plain");
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    HttpCounts counts;
    {
      std::lock_guard lock(counts_mutex_);
      counts = counts_;
    }
    res.set_content(render_metrics(engine_.stats(), counts, engine_.comm_counts()),
                    "text/plain; version=0.0.4");
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json body = {{"object", "list"},
                       {"data", json::array({{{"id", ctx_.served_model},
                                              {"object", "model"},
                                              {"created", unix_now()},
                                              {"owned_by", "handoff"},
                                              {"max_model_len", ctx_.max_model_len}}})}};
    res.set_content(body.dump(), "application/json");
    count("/v1/models", 200);
  });
  auto generate = [this](Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const std::string path =
        endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
    auto guard = std::make_unique<ActiveGuard>(active_);
    ParsedRequest parsed;
    std::shared_ptr<engine::RequestStream> stream;
    try {
      if (draining_)
        throw ApiError(503, "the server is shutting down", "", "overloaded", "server_error");
      parsed = parse_request(endpoint, req.body, ctx_);
      stream = engine_.submit(parsed.request);
    } catch (const ApiError& e) {
      send_error(res, e);
      count(path, e.status);
      return;
    } catch (const engine::PromptTooLongError& e) {
      send_error(res, ApiError(413, e.what(), "prompt", "context_length_exceeded"));
      count(path, 413);
      return;
    } catch (const InputError& e) {
      send_error(res, ApiError(400, e.what(), "", "invalid_value"));
      count(path, 400);
      return;
    } catch (const engine::OverloadedError& e) {
      send_error(res, ApiError(503, e.what(), "", "overloaded", "server_error"));
      count(path, 503);
      return;
    }
    const std::string id =
        fmt::format("{}-{}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", stream->id());
    const int64_t created = unix_now();
    count(path, 200);
    auto state = std::make_shared<StreamState>();
    state->parsed = std::move(parsed);
    state->stream = stream;
    state->id = id;
    state->created = created;
    state->guard = std::move(guard);
    auto release = [this, state](bool) {
      if (!state->done) {
        log::info("request {}: client disconnected, cancelling", state->id);
        engine_.cancel(state->stream->id());
      }
      state->guard.reset();
    };
    if (!state->parsed.stream) {
      // Written in one piece when done, but through a content provider so that a client that
      // leaves while it waits is noticed (the releaser cancels its sequence).
      auto all = std::make_shared<engine::RequestEvent>();
      res.set_chunked_content_provider(
          "application/json",
          [this, state, all](size_t, httplib::DataSink& sink) {
            if (!sink.is_writable()) return false;
            if (!state->stream->collect(*all, std::chrono::milliseconds(100))) return true;
            const std::string body =
                all->error.empty()
                    ? to_text(make_response(state->parsed, state->id, state->created, *all, ctx_))
                    : to_text(error_body(
                          ApiError(500, all->error, "", "internal_error", "server_error")));
            state->done = true;
            sink.write(body.data(), body.size());
            sink.done();
            return true;
          },
          release);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, state](size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string line = "data: " + to_text(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          if (!sink.is_writable()) return false;  // the client left: the releaser cancels
          if (state->parsed.endpoint == Endpoint::kChat && !state->role_sent) {
            state->role_sent = true;
            if (!send(make_role_chunk(state->parsed, state->id, state->created))) return false;
          }
          engine::RequestEvent e;
          if (!state->stream->pop(e, std::chrono::milliseconds(100))) return true;
          if (!e.error.empty()) {
            const std::string line =
                "data: " +
                to_text(error_body(ApiError(500, e.error, "", "internal_error", "server_error"))) +
                "\n\n";
            sink.write(line.data(), line.size());
            state->done = true;
            sink.done();
            return true;
          }
          // Every token is a chunk, even when its text is held back (clients time tokens).
          if (!send(make_chunk(state->parsed, state->id, state->created, e, ctx_))) return false;
          if (e.finish_reason) {
            if (state->parsed.include_usage &&
                !send(make_usage_chunk(state->parsed, state->id, state->created, e.prompt_tokens,
                                       e.completion_tokens)))
              return false;
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            state->done = true;
            sink.done();
          }
          return true;
        },
        release);
  };
  svr.Post("/v1/completions", [generate](const httplib::Request& req, httplib::Response& res) {
    generate(Endpoint::kCompletions, req, res);
  });
  svr.Post("/v1/chat/completions", [generate](const httplib::Request& req, httplib::Response& res) {
    generate(Endpoint::kChat, req, res);
  });
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      res.set_content(
          to_text(error_body(
              ApiError(404, fmt::format("no route {} {}", req.method, req.path), "", "not_found"))),
          "application/json");
    }
  });
}

void HttpServer::run(const std::function<void(int)>& on_listening) {
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
  } else if (!server_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port < 0) fail_input("cannot listen on {}:{}", options_.host, options_.port);
  if (on_listening) on_listening(port);
  server_->listen_after_bind();
}

void HttpServer::shutdown() {
  draining_ = true;
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.drain_timeout_s * 1000));
  while ((active_ > 0 || engine_.in_flight() > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (active_ > 0 || engine_.in_flight() > 0)
    log::warn("drain timeout: {} requests still in flight", engine_.in_flight());
  server_->stop();
}

}  // namespace handoff::serve
