// `handoff serve`: the OpenAI-compatible HTTP server over the engine. SIGTERM / SIGINT drain:
// new requests get 503, in-flight ones finish (bounded by --drain-timeout), then exit 0.
#include <pthread.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>

#include "handoff/cli/commands.h"
#include "handoff/cli/engine_flags.h"
#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/serve/http_server.h"
#include "handoff/text/chat_template.h"

namespace handoff::cli {
namespace {

struct ServeFlags {
  EngineFlags engine;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  std::string api_key;
  int http_threads = 64;
  double drain_timeout = 30.0;
};

void run_serve(const ServeFlags& f) {
  // Block the shutdown signals in every thread (threads inherit the mask), so one thread
  // receives them synchronously with sigwait instead of an async handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that left must not kill the server

  LoadedEngine loaded = load_engine(f.engine);
  std::unique_ptr<text::ChatTemplate> chat_template;
  if (loaded.tokenizer) {
    try {
      chat_template = text::ChatTemplate::load(f.engine.model_dir);
    } catch (const InputError& e) {
      log::warn("no chat template, /v1/chat/completions is disabled: {}", e.what());
    }
  }
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
  ctx.chat_template = chat_template.get();
  ctx.max_model_len = loaded.engine->options().max_model_len;
  ctx.vocab_size = loaded.engine->config().vocab_size;

  serve::ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  so.api_key = f.api_key;
  so.http_threads = f.http_threads;
  so.drain_timeout_s = f.drain_timeout;
  if (so.host != "127.0.0.1" && so.host != "localhost" && so.host != "::1" && so.api_key.empty())
    log::warn("listening on {} without --api-key", so.host);
  loaded.engine->start();
  serve::HttpServer server(so, *loaded.engine, ctx);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    log::info("signal {}: draining in-flight requests", sig);
    server.shutdown();
  });
  try {
    server.run([&](int port) {
      log::info("serving '{}' on http://{}:{} (max_model_len {})", ctx.served_model, so.host, port,
                ctx.max_model_len);
      std::fprintf(stderr, "listening on http://%s:%d\n", so.host.c_str(), port);
    });
  } catch (...) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    throw;
  }
  waiter.join();
  loaded.engine->stop();
  log::info("server stopped");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  add_engine_flags(*cmd, f->engine);
  cmd->add_option("--host", f->host, "Address to listen on (loopback by default)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", f->served_model_name,
                  "Model id in the API (default: the model folder's name)");
  cmd->add_option("--api-key", f->api_key, "Require 'Authorization: Bearer KEY'");
  cmd->add_option("--http-threads", f->http_threads, "HTTP worker threads (>= concurrent streams)")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", f->drain_timeout,
                  "Seconds SIGTERM waits for in-flight requests")
      ->capture_default_str();
  cmd->callback([f] { run_serve(*f); });
}

}  // namespace handoff::cli
