#include "handoff/serve/http_server.h"

#include <algorithm>
#include <random>
#include <thread>

#include "handoff/log.h"
#include "handoff/serve/chat_output.h"
#include "handoff/serve/tokenize_api.h"
#include "handoff/version.h"

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
constexpr const char* kTokenizePath = "/tokenize";
constexpr const char* kDetokenizePath = "/detokenize";
constexpr std::string_view kModelPrefix = "/v1/models/";

bool known_route(const std::string& path) {
  return path == kCompletionsPath || path == kChatPath || path == "/v1/models" ||
         path == "/health" || path == "/metrics" || path == kTokenizePath ||
         path == kDetokenizePath || path == "/version" || path.starts_with(kModelPrefix);
}

// 128 random bits as hex: ids that do not repeat across restarts or servers.
std::string random_id() {
  std::random_device device;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", device());
  return out;
}

// The client's X-Request-Id when it sent one (checked: it is echoed into headers, ids and
// logs), else a fresh random id.
std::string request_id_of(const HttpRequest& req) {
  const std::string* given = req.header("x-request-id");
  if (given == nullptr) return random_id();
  const bool printable = std::all_of(given->begin(), given->end(),
                                     [](unsigned char c) { return c > 0x20 && c < 0x7f; });
  if (given->empty() || given->size() > 128 || !printable)
    throw ApiError(400, "X-Request-Id must be 1 to 128 visible ASCII characters", "X-Request-Id",
                   "invalid_value");
  return *given;
}

json model_card(const ProtocolContext& ctx, int64_t created) {
  return {{"id", ctx.served_model},
          {"object", "model"},
          {"created", created},
          {"owned_by", "handoff"},
          {"root", ctx.served_model},
          {"parent", nullptr},
          {"max_model_len", ctx.max_model_len}};
}

// Origins are compared as sent (scheme://host[:port]); a trailing slash in the flag is ignored.
bool origin_allowed(const std::vector<std::string>& allowed, const std::string& origin) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    return a == "*" || (a.ends_with('/') ? a.substr(0, a.size() - 1) : a) == origin;
  });
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

HttpHeaders HttpServer::cors_headers(const HttpRequest& req) const {
  const std::string* origin = req.header("origin");
  if (origin == nullptr || !origin_allowed(options_.allowed_origins, *origin)) return {};
  const bool any = std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(),
                             "*") != options_.allowed_origins.end();
  HttpHeaders h{{"Access-Control-Allow-Origin", any ? "*" : *origin},
                {"Access-Control-Expose-Headers", "X-Request-Id"}};
  if (!any) h.emplace_back("Vary", "Origin");
  return h;
}

std::optional<HttpResponse> HttpServer::answer_inline(const HttpRequest& req) {
  std::optional<HttpResponse> response;
  std::string id;
  try {
    id = request_id_of(req);
    response = route_inline(req);
  } catch (const ApiError& e) {
    response = error_response(e);
  }
  if (!response) return std::nullopt;  // a worker answers, with its own headers
  if (!id.empty()) response->headers.emplace_back("X-Request-Id", id);
  for (auto& h : cors_headers(req)) response->headers.push_back(std::move(h));
  return response;
}

std::optional<HttpResponse> HttpServer::route_inline(const HttpRequest& req) {
  const bool get = req.method == "GET";
  if (req.method == "OPTIONS" && !options_.allowed_origins.empty()) {
    // A CORS preflight: answered without authentication (browsers send no key with it).
    const std::string* origin = req.header("origin");
    if (origin == nullptr || !origin_allowed(options_.allowed_origins, *origin))
      return error_response(ApiError(403,
                                     fmt::format("origin '{}' is not allowed (--allowed-origins)",
                                                 origin != nullptr ? *origin : std::string()),
                                     "Origin", "origin_not_allowed"));
    const std::string* asked = req.header("access-control-request-headers");
    return HttpResponse{200,
                        "text/plain",
                        "",
                        {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                         {"Access-Control-Allow-Headers",
                          asked != nullptr ? *asked : "Authorization, Content-Type, X-Request-Id"},
                         {"Access-Control-Max-Age", "600"}}};
  }
  if (get && req.path == "/version")
    return HttpResponse{200, "application/json", json{{"version", version()}}.dump(), {}};
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
    return HttpResponse{
        200,
        "text/plain; version=0.0.4",
        render_metrics(engine_.stats(), counts, engine_.comm_counts(), ctx_.served_model),
        {}};
  }
  if (!options_.api_key.empty() && req.path != "/health" && req.path != "/metrics") {
    const std::string* auth = req.header("authorization");
    if (auth == nullptr || *auth != "Bearer " + options_.api_key) {
      if (known_route(req.path))
        count(req.path.starts_with(kModelPrefix) ? "/v1/models/{id}" : req.path, 401);
      return error_response(ApiError(401, "Incorrect API key provided", "", "invalid_api_key"));
    }
  }
  if (get && req.path == "/v1/models") {
    const json body = {{"object", "list"}, {"data", json::array({model_card(ctx_, unix_now())})}};
    count("/v1/models", 200);
    return HttpResponse{200, "application/json", body.dump(), {}};
  }
  if (get && req.path.starts_with(kModelPrefix)) {
    // Ids may hold slashes ("org/model"), so the rest of the path is the id.
    const std::string model = req.path.substr(kModelPrefix.size());
    if (model != ctx_.served_model) {
      count("/v1/models/{id}", 404);
      return error_response(ApiError(404, fmt::format("The model '{}' does not exist", model),
                                     "model", "model_not_found"));
    }
    count("/v1/models/{id}", 200);
    return HttpResponse{200, "application/json", model_card(ctx_, unix_now()).dump(), {}};
  }
  if (req.method == "POST" && (req.path == kTokenizePath || req.path == kDetokenizePath))
    return std::nullopt;  // tokenising a long text is a worker's job, not the I/O thread's
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
  const HttpRequest& req = exchange.request();
  std::string id;
  HttpHeaders headers = cors_headers(req);
  try {
    id = request_id_of(req);
  } catch (const ApiError& e) {
    HttpResponse r = error_response(e);
    r.headers = headers;
    exchange.send(r);
    return count(req.path, e.status);
  }
  headers.emplace_back("X-Request-Id", id);
  if (req.path == kTokenizePath || req.path == kDetokenizePath) {
    HttpResponse r;
    try {
      const json body =
          req.path == kTokenizePath ? tokenize(req.body, ctx_) : detokenize(req.body, ctx_);
      r = HttpResponse{200, "application/json", to_text(body), {}};
    } catch (const ApiError& e) {
      r = error_response(e);
    }
    r.headers = std::move(headers);
    exchange.send(r);
    return count(req.path, r.status);
  }
  generate(req.path == kChatPath ? Endpoint::kChat : Endpoint::kCompletions, exchange, id);
}

void HttpServer::generate(Endpoint endpoint, HttpExchange& ex, const std::string& request_id) {
  const std::string path = endpoint == Endpoint::kChat ? kChatPath : kCompletionsPath;
  ActiveGuard guard(active_);
  ParsedRequest parsed;
  std::shared_ptr<engine::RequestStream> stream;
  std::vector<uint64_t> ids;  // the engine requests: one per prompt
  HttpHeaders headers = cors_headers(ex.request());
  headers.emplace_back("X-Request-Id", request_id);
  // Every response of this request carries the same headers (errors included).
  auto send = [&](HttpResponse r) {
    r.headers = headers;
    return ex.send(r);
  };
  auto refuse = [&](const ApiError& e) {
    for (uint64_t i : ids) engine_.cancel(i);  // a batch refused part way
    send(error_response(e));
    count(path, e.status);
  };
  try {
    if (draining_)
      throw ApiError(503, "the server is shutting down", "", "overloaded", "server_error");
    parsed = parse_request(endpoint, ex.request().body, ctx_);
    // Every choice of every prompt on one stream: choice index = prompt index * n + choice.
    const int n = parsed.request.n;
    stream =
        std::make_shared<engine::RequestStream>(0, static_cast<int>(parsed.prompts.size()) * n);
    for (size_t i = 0; i < parsed.prompts.size(); ++i) {
      engine::Request r = parsed.request;
      r.prompt = parsed.prompts[i];
      ids.push_back(engine_.submit(std::move(r), stream, static_cast<int>(i) * n));
    }
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
  // vLLM's form: the body's id is the request id with the endpoint's prefix.
  const std::string id =
      fmt::format("{}-{}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", request_id);
  const int64_t created = unix_now();
  const ApiError cut_error(
      503,
      fmt::format("the server shut down before this request finished (drain timeout of {} s)",
                  options_.drain_timeout.count() / 1000.0),
      "", "server_shutdown", "server_error");
  log::debug("request {}: {} prompt tokens, max_tokens {}, stream {}, n {}, prompts {}", id,
             parsed.request.prompt.size(), parsed.request.max_tokens, parsed.stream,
             parsed.request.n, parsed.prompts.size());
  // The one info line of a request that ran to its end (per choice when there are several).
  const bool several = stream->num_choices() > 1;
  auto log_finished = [&](const engine::RequestEvent& last) {
    log::info(
        "request {}{}: finish {}, prompt {} tokens, output {} tokens, queue {:.3f} s, ttft {:.3f} "
        "s, total {:.3f} s",
        id, several ? fmt::format(" choice {}", last.index) : "",
        last.finish_reason.value_or("error"), last.prompt_tokens, last.completion_tokens,
        last.queue_s, last.ttft_s, last.e2e_s);
  };
  // Ends the sequences when the request cannot be answered any more; says why in the log.
  auto abandon = [&](const char* why) {
    log::info("request {}: {}, cancelling", id, why);
    for (uint64_t i : ids) engine_.cancel(i);
  };

  // Each choice's reasoning / tool-call parsers (none when the request has neither).
  ChatOutputs outputs(parsed);
  if (!parsed.stream) {
    stream->wake_only_at_end();  // the reply is sent whole
    std::vector<engine::RequestEvent> all;
    while (!stream->collect(all, kPoll)) {
      if (drain_expired_) {
        abandon("cut by the drain deadline");
        send(error_response(cut_error));
        return count(path, cut_error.status);
      }
      if (ex.client_gone()) return abandon("client disconnected");
    }
    for (const engine::RequestEvent& c : all) log_finished(c);
    for (const engine::RequestEvent& c : all)
      if (!c.error.empty()) {
        send(error_response(ApiError(500, c.error, "", "internal_error", "server_error")));
        return count(path, 500);
      }
    count(path, 200);
    if (!send(HttpResponse{200,
                           "application/json",
                           to_text(make_response(parsed, id, created, all, ctx_, &outputs)),
                           {}}))
      log::info("request {}: client disconnected before its response was written", id);
    return;
  }

  count(path, 200);
  HttpHeaders stream_headers = headers;
  stream_headers.emplace_back("Cache-Control", "no-cache");
  bool sent = ex.start_stream(200, "text/event-stream", stream_headers);
  for (int c = 0; sent && endpoint == Endpoint::kChat && c < stream->num_choices(); ++c)
    sent = ex.send_chunk(sse_event(make_role_chunk(parsed, id, created, c)));
  // Usage over every choice: a prompt counts once, generated tokens for every choice.
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int finished = 0;
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
    if (e.finish_reason || !e.error.empty()) log_finished(e);
    if (!e.error.empty()) {
      abandon("a choice failed");
      if (ex.send_chunk(
              sse_event(error_body(ApiError(500, e.error, "", "internal_error", "server_error")))))
        ex.end_stream();
      return;
    }
    // Every token is a chunk, even when its text is held back (clients time tokens).
    sent = ex.send_chunk(sse_event(make_chunk(parsed, id, created, e, ctx_, &outputs)));
    if (e.finish_reason) {
      if (e.index % parsed.request.n == 0) prompt_tokens += e.prompt_tokens;
      completion_tokens += e.completion_tokens;
    }
    if (sent && e.finish_reason && ++finished == stream->num_choices()) {
      if (parsed.include_usage)
        sent = ex.send_chunk(
            sse_event(make_usage_chunk(parsed, id, created, prompt_tokens, completion_tokens)));
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
