// `handoff serve`: the OpenAI-compatible HTTP server over the engine. SIGTERM / SIGINT drain:
// new requests get 503, in-flight ones finish (bounded by --drain-timeout), then exit 0.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "handoff/cli/commands.h"
#include "handoff/cli/engine_flags.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/log_flags.h"
#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/serve/http_server.h"
#include "handoff/serve/stats_reporter.h"
#include "handoff/text/chat_template.h"
#include "handoff/text/reasoning_parser.h"
#include "handoff/text/tool_call_parser.h"
#include "handoff/version.h"

namespace handoff::cli {
namespace {

struct ServeFlags {
  EngineFlags engine;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  std::string api_key;
  std::vector<std::string> allowed_origins;
  int http_threads = 64;
  double log_stats_interval = 10.0;
  double drain_timeout = 30.0;
  int max_connections = 512;
  double header_timeout = 10.0;
  double body_timeout = 60.0;
  double idle_timeout = 15.0;
  double write_timeout = 60.0;
  int keepalive_requests = 1000;
  std::optional<int64_t> max_request_bytes;  // unset: sized from --max-model-len
  std::string chat_template;                 // a file replacing the model folder's template
  std::string tool_call_parser;              // empty: what the chat template shows
  std::string reasoning_parser;              // empty: what the chat template shows
};

// Request bytes per token of --max-model-len, plus room for the rest of a request: generous
// for JSON-escaped text, token-id lists and chat message overhead.
constexpr int64_t kRequestBytesPerToken = 64;
constexpr int64_t kRequestBytesSlack = int64_t{1} << 20;
constexpr int64_t kMaxRequestBytes = int64_t{1} << 30;

// Checks every serve flag and turns it into the server's options, before anything loads.
serve::ServerOptions server_options(const ServeFlags& f) {
  require_range("--port", f.port, 0, 65535);
  require_range("--http-threads", f.http_threads, 1, 1024);
  require_range("--max-connections", f.max_connections, 1, 100000);
  serve::reserve_files_for_connections(f.max_connections);
  require_range("--http-keepalive-requests", f.keepalive_requests, 1, 1000000000);
  serve::ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  so.api_key = f.api_key;
  for (const std::string& origin : f.allowed_origins)
    if (origin != "*" && origin.find("://") == std::string::npos)
      fail_input("--allowed-origins: '{}' is not an origin (scheme://host[:port], or *)", origin);
  so.allowed_origins = f.allowed_origins;
  so.drain_timeout = seconds_flag("--drain-timeout", f.drain_timeout);
  serve::HttpLoopOptions& http = so.http;
  http.threads = f.http_threads;
  http.max_connections = f.max_connections;
  http.header_timeout = seconds_flag("--http-header-timeout", f.header_timeout);
  http.body_timeout = seconds_flag("--http-body-timeout", f.body_timeout);
  http.idle_timeout = seconds_flag("--http-idle-timeout", f.idle_timeout);
  http.write_timeout = seconds_flag("--http-write-timeout", f.write_timeout);
  http.max_requests_per_connection = f.keepalive_requests;
  if (f.max_request_bytes) {
    require_range("--max-request-bytes", *f.max_request_bytes, 1024, kMaxRequestBytes);
    http.limits.max_body_bytes = *f.max_request_bytes;
  } else {
    const int64_t tokens = std::clamp<int64_t>(f.engine.max_model_len, 1, int64_t{1} << 32);
    http.limits.max_body_bytes =
        std::min(tokens * kRequestBytesPerToken + kRequestBytesSlack, kMaxRequestBytes);
  }
  return so;
}

// The chat template and its output parsers, from the flags or else from the template's own
// text. Checked before the (long) load; the template is loaded again after it.
struct ChatSetup {
  std::unique_ptr<text::ChatTemplate> chat_template;
  text::ToolCallFormat tools = text::ToolCallFormat::kNone;
  text::ReasoningFormat reasoning = text::ReasoningFormat::kNone;
};

void check_chat_flags(const ServeFlags& f) {
  try {
    if (!f.tool_call_parser.empty()) text::tool_call_format_named(f.tool_call_parser);
  } catch (const InputError& e) {
    fail_input("--tool-call-parser: {}", e.what());
  }
  try {
    if (!f.reasoning_parser.empty()) text::reasoning_format_named(f.reasoning_parser);
  } catch (const InputError& e) {
    fail_input("--reasoning-parser: {}", e.what());
  }
  if (f.chat_template.empty()) return;
  const std::string source = text::read_template_file(f.chat_template, "--chat-template");
  try {
    text::JinjaTemplate check(source);
  } catch (const InputError& e) {
    fail_input("--chat-template {}: {}", f.chat_template, e.what());
  }
}

ChatSetup chat_setup(const ServeFlags& f, bool has_tokenizer) {
  ChatSetup setup;
  const bool asked = !f.chat_template.empty() ||
                     (!f.tool_call_parser.empty() && f.tool_call_parser != "none") ||
                     (!f.reasoning_parser.empty() && f.reasoning_parser != "none");
  if (!has_tokenizer) {
    if (asked)
      fail_input(
          "--chat-template, --tool-call-parser and --reasoning-parser need a model with "
          "a tokenizer ({} has none)",
          f.engine.model_dir);
    return setup;
  }
  try {
    setup.chat_template = text::ChatTemplate::load(f.engine.model_dir, f.chat_template);
  } catch (const InputError& e) {
    if (asked) throw;
    log::warn("no chat template, /v1/chat/completions is disabled: {}", e.what());
    return setup;
  }
  const std::string& source = setup.chat_template->source();
  setup.tools = f.tool_call_parser.empty() ? text::detect_tool_call_format(source)
                                           : text::tool_call_format_named(f.tool_call_parser);
  setup.reasoning = f.reasoning_parser.empty() ? text::detect_reasoning_format(source)
                                               : text::reasoning_format_named(f.reasoning_parser);
  log::info("chat: tool-call parser {} ({}), reasoning parser {} ({})",
            text::tool_call_format_name(setup.tools),
            f.tool_call_parser.empty() ? "from the chat template" : "--tool-call-parser",
            text::reasoning_format_name(setup.reasoning),
            f.reasoning_parser.empty() ? "from the chat template" : "--reasoning-parser");
  return setup;
}

// Test-only: HANDOFF_TEST_SCRIPTED_OUTPUTS names a JSON file holding a list of token-id lists;
// the k-th request generates the (k mod n)-th list (engine::Engine::script_outputs). Builds
// without HANDOFF_TEST_HOOKS refuse the variable.
void apply_test_hooks(engine::Engine& engine) {
  const char* path = std::getenv("HANDOFF_TEST_SCRIPTED_OUTPUTS");
  if (path == nullptr || *path == '\0') return;
#ifdef HANDOFF_TEST_HOOKS
  std::ifstream in(path);
  if (!in) fail_input("HANDOFF_TEST_SCRIPTED_OUTPUTS {}: cannot read the file", path);
  std::vector<std::vector<int32_t>> scripts;
  try {
    scripts = nlohmann::json::parse(in).get<std::vector<std::vector<int32_t>>>();
  } catch (const nlohmann::json::exception& e) {
    fail_input("HANDOFF_TEST_SCRIPTED_OUTPUTS {}: expected a list of token-id lists: {}", path,
               e.what());
  }
  engine.script_outputs(std::move(scripts));
  log::warn("test hook: generated tokens are scripted by {} (HANDOFF_TEST_SCRIPTED_OUTPUTS)", path);
#else
  fail_input(
      "HANDOFF_TEST_SCRIPTED_OUTPUTS is a test hook, and this build has none "
      "(HANDOFF_TEST_HOOKS=OFF)");
#endif
}

void run_serve(const ServeFlags& f) {
  // Block the shutdown signals in every thread (threads inherit the mask), so one thread
  // receives them synchronously with sigwait instead of an async handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that left must not kill the server

  const serve::ServerOptions so = server_options(f);
  const std::optional<std::chrono::milliseconds> stats_interval =
      f.log_stats_interval == 0.0
          ? std::nullopt
          : std::optional(seconds_flag("--log-stats-interval", f.log_stats_interval));
  check_chat_flags(f);
  if (is_mpi_worker_rank(f.engine)) {
    // Another rank of an mpirun job: no socket; its part of every step until rank 0 stops.
    // SIGTERM stays blocked here: mpirun forwards it to every rank, and rank 0 drains first.
    load_engine(f.engine);
    return;
  }
  // Claim the port before the (long) load, so a busy one fails at once.
  serve::FileDescriptor socket = serve::bind_tcp(so.host, so.port);
  LoadedEngine loaded = load_engine(f.engine);
  ChatSetup chat = chat_setup(f, loaded.tokenizer != nullptr);
  apply_test_hooks(*loaded.engine);
  serve::ProtocolContext ctx;
  ctx.served_model =
      f.served_model_name.empty()
          ? std::filesystem::path(f.engine.model_dir).lexically_normal().filename().string()
          : f.served_model_name;
  if (ctx.served_model.empty())
    ctx.served_model = std::filesystem::path(f.engine.model_dir)
                           .lexically_normal()
                           .parent_path()
                           .filename()
                           .string();
  ctx.tokenizer = loaded.tokenizer.get();
  ctx.chat_template = chat.chat_template.get();
  ctx.tool_format = chat.tools;
  ctx.reasoning_format = chat.reasoning;
  ctx.max_model_len = loaded.engine->options().max_model_len;
  ctx.vocab_size = loaded.engine->config().vocab_size;
  // Changes when the build or the numerics do (a client comparing outputs can tell).
  ctx.system_fingerprint =
      fmt::format("fp_handoff-{}-{}-{}", version(), git_commit(), f.engine.dtype);

  if (so.host != "127.0.0.1" && so.host != "localhost" && so.host != "::1" && so.api_key.empty())
    log::warn("listening on {} without --api-key", so.host);
  // A failed engine serves nothing again: it signals this process, so the server drains as on
  // SIGTERM (the failed requests have their error events already), and then the process exits
  // non-zero, so a supervisor or mpirun sees it.
  loaded.engine->on_failure([](const std::string&) { kill(getpid(), SIGTERM); });
  loaded.engine->start();
  std::optional<serve::StatsReporter> stats_reporter;
  if (stats_interval) stats_reporter.emplace(*loaded.engine, *stats_interval);
  serve::HttpServer server(so, *loaded.engine, ctx);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    log::info("signal {}: draining in-flight requests", sig);
    server.shutdown();
  });
  try {
    server.run(std::move(socket), [&](int port) {
      log::info("serving '{}' on http://{}:{} (max_model_len {})", ctx.served_model, so.host, port,
                ctx.max_model_len);
      // The pid tells a launcher's user (mpirun) which process to SIGTERM for a drain.
      std::fprintf(stderr, "listening on http://%s:%d (pid %d)\n", so.host.c_str(), port,
                   static_cast<int>(getpid()));
    });
  } catch (...) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    throw;
  }
  waiter.join();
  stats_reporter.reset();
  loaded.engine->stop();
  if (const std::string failure = loaded.engine->failure(); !failure.empty())
    fail("the engine failed: {}", failure);
  log::info("server stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  add_engine_flags(*cmd, f->engine);
  add_log_level_flag(*cmd);
  cmd->add_option("--host", f->host, "Address to listen on (loopback by default)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "Port, 0..65535 (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", f->served_model_name,
                  "Model id in the API (default: the model folder's name)");
  cmd->add_option("--api-key", f->api_key,
                  "Require 'Authorization: Bearer KEY' (also from the environment variable "
                  "HANDOFF_API_KEY)")
      ->envname("HANDOFF_API_KEY");
  cmd->add_option("--allowed-origins", f->allowed_origins,
                  "Origins browsers may call from (CORS), e.g. https://app.example.com; * for "
                  "any; none by default (no CORS headers)")
      ->delimiter(',');
  cmd->add_option("--log-stats-interval", f->log_stats_interval,
                  "Seconds between throughput lines while busy (0: none)")
      ->capture_default_str();
  cmd->add_option("--http-threads", f->http_threads,
                  "HTTP worker threads, 1..1024 (>= concurrent streams; /health and /metrics "
                  "never wait for one)")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", f->drain_timeout,
                  "Seconds SIGTERM waits for in-flight requests; those still running then end "
                  "with an error (streams: an error event and [DONE])")
      ->capture_default_str();
  cmd->add_option("--max-connections", f->max_connections,
                  "Open connections at most; more get 503 at once")
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", f->max_request_bytes,
                  "Largest request body in bytes, 1 KiB..1 GiB; 413 past it, before it is read "
                  "(default: 64 x --max-model-len + 1 MiB)");
  cmd->add_option("--http-header-timeout", f->header_timeout,
                  "Seconds from a request's first byte to the end of its headers (408 past it)")
      ->capture_default_str();
  cmd->add_option("--http-body-timeout", f->body_timeout,
                  "Seconds from the end of the headers to the end of the body (408 past it)")
      ->capture_default_str();
  cmd->add_option("--http-idle-timeout", f->idle_timeout,
                  "Seconds a kept-alive connection waits for its next request")
      ->capture_default_str();
  cmd->add_option("--http-write-timeout", f->write_timeout,
                  "Seconds a client may take to read one response or stream event")
      ->capture_default_str();
  cmd->add_option("--http-keepalive-requests", f->keepalive_requests,
                  "Requests one connection may carry before it is closed")
      ->capture_default_str();
  cmd->add_option("--chat-template", f->chat_template,
                  "Jinja chat template file replacing the model folder's (as vLLM's)");
  cmd->add_option("--tool-call-parser", f->tool_call_parser,
                  "Tool-call format of the model's output: deepseek_v3 | deepseek_v31 | "
                  "deepseek_v32 | glm45 | none (default: what the chat template shows)");
  cmd->add_option("--reasoning-parser", f->reasoning_parser,
                  "Split <think>...</think> into reasoning_content: deepseek_r1 | glm45 | none "
                  "(default: what the chat template shows)");
  cmd->callback([f] { run_serve(*f); });
}

}  // namespace handoff::cli
