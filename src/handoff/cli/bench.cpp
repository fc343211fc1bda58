// `handoff bench serve` (an OpenAI server over HTTP, streaming) and `handoff bench offline`
// (the engine in this process, no HTTP): throughput and latency percentiles. `bench serve
// --soak` is the long, mixed, checked load of src/handoff/cli/soak.h instead.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "handoff/cli/bench_report.h"
#include "handoff/cli/commands.h"
#include "handoff/cli/engine_flags.h"
#include "handoff/cli/log_flags.h"
#include "handoff/cli/soak.h"
#include "handoff/error.h"

namespace handoff::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct BenchFlags {
  int concurrency = 1;
  int64_t num_prompts = 16;
  int64_t input_len = 128;
  int64_t output_len = 64;
  int64_t shared_prefix_len = 0;  // leading prompt tokens every request shares
  uint64_t seed = 0;
  int32_t token_lo = 1000, token_hi = 30000;
};

struct ServeBenchFlags {
  BenchFlags bench;
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  std::string api_key;
  bool soak = false;
  SoakOptions soak_options;  // --soak only
};

void check(const BenchFlags& b) {
  if (b.concurrency < 1) fail_input("--concurrency must be >= 1");
  if (b.num_prompts < 1) fail_input("--num-prompts must be >= 1");
  if (b.input_len < 1 || b.output_len < 1) fail_input("--input-len and --output-len must be >= 1");
  if (b.shared_prefix_len < 0 || b.shared_prefix_len > b.input_len)
    fail_input("--shared-prefix-len must be between 0 and --input-len ({}), got {}", b.input_len,
               b.shared_prefix_len);
}

// Request i's prompt: the shared prefix (the same for every request), then its own tokens.
std::vector<int32_t> bench_prompt(const BenchFlags& b, int64_t i, int32_t token_hi) {
  std::vector<int32_t> prompt =
      random_prompt(b.seed + static_cast<uint64_t>(i), b.input_len, b.token_lo, token_hi);
  if (b.shared_prefix_len > 0) {
    // A seed no request's own tokens use (those are seeded from b.seed + i).
    const std::vector<int32_t> shared =
        random_prompt(~b.seed, b.shared_prefix_len, b.token_lo, token_hi);
    std::copy(shared.begin(), shared.end(), prompt.begin());
  }
  return prompt;
}

// One streamed /v1/completions request, timed per SSE event.
RequestTiming one_request(const ServeBenchFlags& f, const std::vector<int32_t>& prompt) {
  RequestTiming t;
  httplib::Client cli(f.url);
  cli.set_read_timeout(600, 0);
  nlohmann::json body = {{"prompt", prompt},   {"max_tokens", f.bench.output_len},
                         {"temperature", 0.0}, {"ignore_eos", true},
                         {"stream", true},     {"stream_options", {{"include_usage", true}}}};
  if (!f.model.empty()) body["model"] = f.model;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!f.api_key.empty()) req.set_header("Authorization", "Bearer " + f.api_key);
  std::string buffer;
  const auto start = Clock::now();
  std::optional<Clock::time_point> last;
  int64_t events = 0;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      const std::string line = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (line.rfind("data: ", 0) != 0) continue;
      const std::string payload = line.substr(6);
      if (payload == "[DONE]") continue;
      const auto j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        t.error = j["error"].value("message", "error");
        return false;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        t.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        t.output_tokens = j["usage"].value("completion_tokens", 0);
      }
      if (j.contains("choices") && !j["choices"].empty()) {
        const auto now = Clock::now();
        if (!last)
          t.ttft = seconds(now - start);
        else
          t.itl.push_back(seconds(now - *last));
        last = now;
        ++events;
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  t.latency = seconds(Clock::now() - start);
  if (!sent) {
    t.error = fmt::format("HTTP error: {}", httplib::to_string(err));
  } else if (res.status != 200) {
    // The content receiver took the body: an error's JSON is what is left in the buffer.
    t.error = fmt::format("status {}: {}", res.status,
                          (res.body.empty() ? buffer : res.body).substr(0, 200));
  } else if (t.error.empty()) {
    t.ok = t.output_tokens > 0;
    if (!t.ok) t.error = "no usage in the stream";
  }
  return t;
}

// The closed loop both benches share: `concurrency` workers take prompt indices in turn until
// all are done, each running one request; returns the timings and the wall time.
std::pair<std::vector<RequestTiming>, double> run_closed_loop(
    const BenchFlags& b, const std::function<RequestTiming(int64_t)>& one) {
  std::vector<RequestTiming> timings(static_cast<size_t>(b.num_prompts));
  std::atomic<int64_t> next{0};
  ProgressBar bar(b.num_prompts);
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < b.concurrency; ++w)
    workers.emplace_back([&] {
      for (int64_t i; (i = next++) < b.num_prompts;) {
        timings[static_cast<size_t>(i)] = one(i);
        bar.tick();
      }
    });
  for (auto& w : workers) w.join();
  bar.finish();
  return {std::move(timings), seconds(Clock::now() - start)};
}

// A benchmark whose requests failed measured something else: exit non-zero, naming the first
// error (the report above still shows what did succeed).
void fail_on_errors(const std::vector<RequestTiming>& timings) {
  int64_t failed = 0;
  const RequestTiming* first = nullptr;
  for (const RequestTiming& t : timings)
    if (!t.ok) {
      ++failed;
      if (first == nullptr) first = &t;
    }
  if (failed > 0)
    fail("{} of {} requests failed; the first: {}", failed, timings.size(),
         first->error.empty() ? std::string("no tokens") : first->error);
}

void run_soak_bench(const ServeBenchFlags& f) {
  SoakOptions o = f.soak_options;
  o.url = f.url;
  o.model = f.model;
  o.api_key = f.api_key;
  o.num_prompts = f.bench.num_prompts;
  o.concurrency = f.bench.concurrency;
  o.seed = f.bench.seed;
  const SoakReport report = run_soak(o);
  print_soak_report(report, o);
  if (!o.report_json.empty()) {
    std::ofstream out(o.report_json);
    out << soak_report_json(report).dump(2) << "\n";
    if (!out) fail_input("--report-json: cannot write '{}'", o.report_json);
  }
  if (!report.passed())
    fail("soak: {} lost, {} truncated, {} duplicated, {} failed of {} requests", report.lost,
         report.truncated, report.duplicated, report.failures, report.requests);
}

void run_bench_serve(const ServeBenchFlags& f) {
  if (f.soak && f.bench.shared_prefix_len != 0)
    fail_input("--shared-prefix-len does not apply to --soak (its prompts are random)");
  if (f.soak) return run_soak_bench(f);
  check(f.bench);
  const auto& b = f.bench;
  const auto [timings, wall] =
      run_closed_loop(b, [&](int64_t i) { return one_request(f, bench_prompt(b, i, b.token_hi)); });
  print_report("handoff bench serve " + f.url, timings, wall, b.concurrency);
  fail_on_errors(timings);
}

struct OfflineBenchFlags {
  BenchFlags bench;
  EngineFlags engine;
};

void run_bench_offline(const OfflineBenchFlags& f) {
  check(f.bench);
  const auto& b = f.bench;
  LoadedEngine loaded = load_engine(f.engine);
  if (!loaded.engine) return;  // an MPI worker rank: rank 0 reports
  engine::Engine& eng = *loaded.engine;
  eng.start();
  const auto [timings, wall] = run_closed_loop(b, [&](int64_t i) {
    RequestTiming t;
    engine::Request r;
    r.prompt = bench_prompt(
        b, i, std::min<int32_t>(b.token_hi, static_cast<int32_t>(eng.config().vocab_size)));
    r.max_tokens = b.output_len;
    r.ignore_eos = true;
    const auto t0 = Clock::now();
    std::optional<double> last;
    try {
      auto stream = eng.submit(std::move(r));
      // Tokens are timed by when the engine sampled them (at_s, from the request's arrival),
      // so this thread sleeps until the end instead of taking a core from every decode step.
      stream->wake_only_at_end();
      for (;;) {
        engine::RequestEvent e;
        if (!stream->pop(e, std::chrono::milliseconds(1000))) continue;
        if (!e.tokens.empty()) {
          if (!last)
            t.ttft = e.at_s;
          else
            t.itl.push_back(e.at_s - *last);
          last = e.at_s;
        }
        if (e.finish_reason) {
          t.prompt_tokens = e.prompt_tokens;
          t.output_tokens = e.completion_tokens;
          t.ok = e.error.empty();
          t.error = e.error;
          t.latency = e.e2e_s;
          break;
        }
      }
    } catch (const std::exception& e) {
      t.error = e.what();
    }
    if (!t.ok) t.latency = seconds(Clock::now() - t0);
    return t;
  });
  print_report("handoff bench offline " + f.engine.model_dir, timings, wall, b.concurrency);
  eng.stop();
  fail_on_errors(timings);
}

void add_bench_flags(CLI::App& cmd, BenchFlags& b) {
  cmd.add_option("--concurrency", b.concurrency, "Requests in flight")->capture_default_str();
  cmd.add_option("--num-prompts", b.num_prompts, "Requests in all")->capture_default_str();
  cmd.add_option("--input-len", b.input_len, "Prompt tokens (random ids)")->capture_default_str();
  cmd.add_option("--output-len", b.output_len, "Generated tokens (ignore_eos)")
      ->capture_default_str();
  cmd.add_option("--shared-prefix-len", b.shared_prefix_len,
                 "Leading prompt tokens every request shares (of --input-len; the rest are "
                 "its own): measures prefix caching")
      ->capture_default_str();
  cmd.add_option("--seed", b.seed, "Prompt seed")->capture_default_str();
}

void add_soak_flags(CLI::App& cmd, ServeBenchFlags& f) {
  SoakOptions& o = f.soak_options;
  SoakShape& s = o.shape;
  const char* group = "Soak (--soak)";
  cmd.add_flag("--soak", f.soak,
               "Soak mode: random lengths, streaming and whole answers, stop strings, clients "
               "that leave or send malformed bodies; every answer checked (loopback URLs only)")
      ->group(group);
  cmd.add_option("--min-input-len", s.min_input_len, "Soak: shortest prompt (tokens)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--max-input-len", s.max_input_len, "Soak: longest prompt (tokens)")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--min-output-len", s.min_output_len, "Soak: fewest max_tokens")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--max-output-len", s.max_output_len, "Soak: most max_tokens")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--disconnect-percent", s.disconnect_percent,
                 "Soak: clients that leave mid-stream")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--malformed-percent", s.malformed_percent, "Soak: malformed request bodies")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--slowloris", o.slowloris,
                 "Soak: connections sending one header byte per second meanwhile")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--health-interval", o.health_interval_s, "Soak: seconds between /health probes")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--request-timeout", o.request_timeout_s,
                 "Soak: seconds a request may take before it counts as lost")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--report-json", o.report_json, "Soak: also write the report as JSON here")
      ->group(group);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Serving benchmarks");
  bench->require_subcommand(1);
  auto sf = std::make_shared<ServeBenchFlags>();
  CLI::App* serve = bench->add_subcommand("serve", "Benchmark a running OpenAI server (streaming)");
  serve->add_option("--url", sf->url, "Server base URL")->capture_default_str();
  serve->add_option("--model", sf->model, "Model id (default: the server's)");
  serve->add_option("--api-key", sf->api_key, "Bearer key");
  add_bench_flags(*serve, sf->bench);
  add_log_level_flag(*serve);
  add_soak_flags(*serve, *sf);
  serve->callback([sf] { run_bench_serve(*sf); });
  auto of = std::make_shared<OfflineBenchFlags>();
  CLI::App* offline = bench->add_subcommand("offline", "Benchmark the engine in-process (no HTTP)");
  add_engine_flags(*offline, of->engine);
  add_bench_flags(*offline, of->bench);
  add_log_level_flag(*offline);
  offline->callback([of] { run_bench_offline(*of); });
}

}  // namespace handoff::cli
