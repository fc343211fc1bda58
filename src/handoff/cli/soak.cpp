#include "handoff/cli/soak.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <mutex>
#include <thread>

#include "handoff/cli/bench_report.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/stream_audit.h"
#include "handoff/error.h"

namespace handoff::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

enum class Outcome { kOk, kLost, kTruncated, kDuplicated, kFailed, kDisconnected, kRefused };

struct Answer {
  Outcome outcome = Outcome::kLost;
  std::string detail;
  double latency = 0;
};

// What the soak needs to know of the server before it starts.
struct ServerInfo {
  std::string model;
  int64_t max_model_len = 0;
  bool chat = false;
};

httplib::Headers auth_headers(const SoakOptions& o) {
  httplib::Headers h;
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  return h;
}

ServerInfo probe_server(const SoakOptions& o, const LoopbackTarget& t) {
  httplib::Client cli(t.url);
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(60, 0);
  ServerInfo info;
  const auto models = cli.Get("/v1/models", auth_headers(o));
  if (!models || models->status != 200)
    fail("the server at {} does not answer GET /v1/models ({})", t.url,
         models ? fmt::format("status {}", models->status) : httplib::to_string(models.error()));
  const json j = json::parse(models->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
    fail("GET /v1/models at {} returned no model", t.url);
  info.model = o.model.empty() ? j["data"][0].value("id", "") : o.model;
  info.max_model_len = j["data"][0].value("max_model_len", int64_t{0});
  // Chat is exercised only where the server has a chat template.
  json chat = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
               {"max_tokens", 1}};
  if (!info.model.empty()) chat["model"] = info.model;
  const auto res =
      cli.Post("/v1/chat/completions", auth_headers(o), chat.dump(), "application/json");
  info.chat = res && res->status == 200;
  return info;
}

Answer send_one(const SoakOptions& o, const LoopbackTarget& t, const SoakRequest& r,
                int64_t max_model_len) {
  Answer a;
  httplib::Client cli(t.url);
  const auto timeout = seconds_flag("--request-timeout", o.request_timeout_s);
  cli.set_connection_timeout(30, 0);
  cli.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count() + 1, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = r.path;
  req.body = r.body;
  req.headers = auth_headers(o);
  req.set_header("Content-Type", "application/json");
  const bool refusal_expected = r.kind == SoakKind::kMalformed;
  StreamAudit audit({r.chat, r.include_usage, r.max_tokens, max_model_len});
  std::string body;
  int status = 0;
  bool left = false, timed_out = false;
  const auto start = Clock::now();
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (Clock::now() - start > timeout) {
      timed_out = true;
      return false;
    }
    if (status != 200 || !r.stream) {
      if (body.size() < (size_t{16} << 20)) body.append(data, n);
      return true;
    }
    audit.feed(std::string_view(data, n));
    if (r.kind == SoakKind::kDisconnect && !audit.done() &&
        audit.token_chunks() >= r.disconnect_after) {
      left = true;  // on purpose: the server must cancel the request and free its blocks
      return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  a.latency = seconds(Clock::now() - start);
  if (left) {
    a.outcome = Outcome::kDisconnected;
    return a;
  }
  if (status == 0) {  // no status line: neither an answer nor an error
    a.outcome = Outcome::kLost;
    a.detail = timed_out ? fmt::format("no answer within {} s", o.request_timeout_s)
                         : fmt::format("no response after {:.1f} s: {} error", a.latency,
                                       httplib::to_string(err));
    return a;
  }
  if (refusal_expected) {
    const json j = json::parse(body, nullptr, false);
    const bool error_object = !j.is_discarded() && j.is_object() && j.contains("error") &&
                              j["error"].is_object() && j["error"].contains("message");
    if (status >= 400 && status < 500 && error_object) {
      a.outcome = Outcome::kRefused;
    } else {
      a.outcome = Outcome::kFailed;
      a.detail = fmt::format("malformed body ({}) answered {}: {}", r.malformation, status,
                             body.substr(0, 160));
    }
    return a;
  }
  if (status != 200) {
    a.outcome = Outcome::kFailed;
    a.detail = fmt::format("status {}: {}", status, body.substr(0, 160));
    return a;
  }
  AuditResult verdict = r.stream
                            ? audit.result()
                            : audit_response(body, {r.chat, false, r.max_tokens, max_model_len});
  if (!sent && verdict.verdict == Verdict::kOk) {  // the answer was whole but the transfer not
    verdict.verdict = Verdict::kTruncated;
    verdict.detail = fmt::format("transfer failed: {}", httplib::to_string(err));
  }
  if (timed_out && verdict.verdict == Verdict::kTruncated)
    verdict.detail += fmt::format(" (cut by the client after {} s)", o.request_timeout_s);
  switch (verdict.verdict) {
    case Verdict::kOk:
      a.outcome = Outcome::kOk;
      break;
    case Verdict::kTruncated:
      a.outcome = Outcome::kTruncated;
      break;
    case Verdict::kDuplicated:
      a.outcome = Outcome::kDuplicated;
      break;
    case Verdict::kInconsistent:
    case Verdict::kServerError:
      a.outcome = Outcome::kFailed;
      break;
  }
  if (a.outcome != Outcome::kOk)
    a.detail = std::string(verdict_name(verdict.verdict)) + ": " + verdict.detail;
  return a;
}

// Requests [begin, end) at `concurrency`; answers land at their request's index.
void run_phase(const SoakOptions& o, int64_t begin, int64_t end,
               const std::function<Answer(int64_t)>& one, std::vector<Answer>& answers,
               ProgressBar& bar) {
  std::atomic<int64_t> next{begin};
  std::vector<std::thread> workers;
  const int64_t threads = std::min<int64_t>(o.concurrency, end - begin);
  for (int64_t w = 0; w < threads; ++w)
    workers.emplace_back([&] {
      for (int64_t i; (i = next++) < end;) {
        answers[static_cast<size_t>(i)] = one(i);
        bar.tick();
      }
    });
  for (auto& w : workers) w.join();
}

// Waits (bounded) until the server reports no request in flight, then scrapes once more: the
// cancelled streams of the last clients may still be in the engine for a moment.
MetricsSnapshot settled_metrics(const LoopbackTarget& t) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  MetricsSnapshot m = scrape_metrics(t);
  while (m.available && (m.running > 0 || m.waiting > 0 || m.cache_blocks_used > 0) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m = scrape_metrics(t);
  }
  return m;
}

std::string mib(double bytes) {
  return bytes < 0 ? "n/a" : fmt::format("{:.1f}", bytes / (1024.0 * 1024.0));
}

std::string count(double v) { return v < 0 ? "n/a" : fmt::format("{:.0f}", v); }

json snapshot_json(const MetricsSnapshot& m) {
  auto value = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  return {{"available", m.available},
          {"rss_bytes", value(m.rss_bytes)},
          {"cache_blocks_used", value(m.cache_blocks_used)},
          {"running", value(m.running)},
          {"waiting", value(m.waiting)}};
}

json latency_json(const std::vector<double>& v) {
  double worst = 0;
  for (double x : v) worst = std::max(worst, x);
  return {{"count", v.size()},
          {"p50_ms", percentile(v, 50) * 1e3},
          {"p99_ms", percentile(v, 99) * 1e3},
          {"max_ms", worst * 1e3}};
}

void check(const SoakOptions& o) {
  const SoakShape& s = o.shape;
  require_range("--concurrency", o.concurrency, 1, 4096);
  require_range("--num-prompts", o.num_prompts, 1, 10'000'000);
  require_range("--max-input-len", s.max_input_len, 1, 1 << 20);
  require_range("--min-input-len", s.min_input_len, 1, s.max_input_len);
  require_range("--max-output-len", s.max_output_len, 1, 1 << 20);
  require_range("--min-output-len", s.min_output_len, 1, s.max_output_len);
  if (!(s.disconnect_percent >= 0 && s.malformed_percent >= 0 &&
        s.disconnect_percent + s.malformed_percent <= 100))
    fail_input("--disconnect-percent and --malformed-percent must be >= 0 and sum to <= 100");
  require_range("--slowloris", o.slowloris, 0, 1000);
  seconds_flag("--health-interval", o.health_interval_s);
  seconds_flag("--request-timeout", o.request_timeout_s);
}

}  // namespace

SoakReport run_soak(const SoakOptions& options) {
  check(options);
  const LoopbackTarget target = loopback_target(options.url);
  const ServerInfo info = probe_server(options, target);
  SoakShape shape = options.shape;
  shape.chat = info.chat;
  // Chat prompts are words, a little over a token each, inside a template.
  const int64_t longest = 2 * shape.max_input_len + 64 + shape.max_output_len;
  if (info.max_model_len > 0 && longest > info.max_model_len)
    fail_input(
        "--max-input-len {} and --max-output-len {} do not fit the server's max_model_len {} "
        "(2 x input + 64 + output must)",
        shape.max_input_len, shape.max_output_len, info.max_model_len);

  SoakReport report;
  report.requests = options.num_prompts;
  report.chat = info.chat;
  report.warmup_requests = std::min<int64_t>(
      options.num_prompts, std::max<int64_t>(options.concurrency, options.num_prompts / 10));
  std::vector<SoakRequest> plan;
  plan.reserve(static_cast<size_t>(options.num_prompts));
  for (int64_t i = 0; i < options.num_prompts; ++i)
    plan.push_back(plan_request(options.seed, i, shape, info.model));

  report.at_start = scrape_metrics(target);
  const auto start = Clock::now();
  // Every background loop ends with the run, or at the latest when every request could have
  // used its whole timeout one after another in each worker.
  const auto cap = std::chrono::milliseconds(static_cast<int64_t>(
      std::min(1e12, (static_cast<double>(options.num_prompts) / options.concurrency + 2) *
                         options.request_timeout_s * 1e3)));
  std::vector<Answer> answers(plan.size());
  {
    HealthProber health(target, seconds_flag("--health-interval", options.health_interval_s), cap);
    std::unique_ptr<Slowloris> slow;
    if (options.slowloris > 0) slow = std::make_unique<Slowloris>(target, options.slowloris, cap);
    ProgressBar bar(options.num_prompts);
    auto one = [&](int64_t i) {
      return send_one(options, target, plan[static_cast<size_t>(i)], info.max_model_len);
    };
    run_phase(options, 0, report.warmup_requests, one, answers, bar);
    report.after_warmup = settled_metrics(target);
    run_phase(options, report.warmup_requests, options.num_prompts, one, answers, bar);
    bar.finish();
    health.stop();
    report.health_latencies = health.latencies();
    report.health_failures = health.failures();
    report.health_first_failure = health.first_failure();
    if (slow) {
      slow->stop();
      report.slowloris_opened = slow->opened();
      report.slowloris_closed = slow->closed_by_server();
    }
  }
  report.duration_s = seconds(Clock::now() - start);
  report.at_end = settled_metrics(target);

  for (size_t i = 0; i < answers.size(); ++i) {
    const Answer& a = answers[i];
    switch (a.outcome) {
      case Outcome::kOk:
        ++report.ok;
        report.latencies.push_back(a.latency);
        break;
      case Outcome::kLost:
        ++report.lost;
        break;
      case Outcome::kTruncated:
        ++report.truncated;
        break;
      case Outcome::kDuplicated:
        ++report.duplicated;
        break;
      case Outcome::kFailed:
        ++report.failures;
        break;
      case Outcome::kDisconnected:
        ++report.disconnects;
        break;
      case Outcome::kRefused:
        ++report.malformed;
        break;
    }
    if (!a.detail.empty() && report.problems.size() < 10)
      report.problems.push_back(fmt::format(
          "request {} ({} {}{}): {}", i, plan[i].path, plan[i].stream ? "stream" : "whole",
          plan[i].kind == SoakKind::kDisconnect ? ", leaves" : "", a.detail));
  }
  return report;
}

json soak_report_json(const SoakReport& r) {
  return {{"requests", r.requests},
          {"ok", r.ok},
          {"lost", r.lost},
          {"truncated", r.truncated},
          {"duplicated", r.duplicated},
          {"failures", r.failures},
          {"expected_disconnects", r.disconnects},
          {"expected_refusals", r.malformed},
          {"problems", r.problems},
          {"chat", r.chat},
          {"warmup_requests", r.warmup_requests},
          {"duration_s", r.duration_s},
          {"latency", latency_json(r.latencies)},
          {"health", latency_json(r.health_latencies)},
          {"health_failures", r.health_failures},
          {"slowloris_opened", r.slowloris_opened},
          {"slowloris_closed_by_server", r.slowloris_closed},
          {"metrics",
           {{"start", snapshot_json(r.at_start)},
            {"after_warmup", snapshot_json(r.after_warmup)},
            {"end", snapshot_json(r.at_end)}}},
          {"passed", r.passed()}};
}

void print_soak_report(const SoakReport& r, const SoakOptions& o) {
  auto line = [](const char* name, const std::string& value) {
    fmt::print("{:<32} {}\n", name, value);
  };
  fmt::print("============ handoff bench serve --soak {} ============\n", o.url);
  line("requests", fmt::format("{} at concurrency {} (seed {}, chat {}, warm-up {})", r.requests,
                               o.concurrency, o.seed, r.chat ? "yes" : "no", r.warmup_requests));
  line("ok", std::to_string(r.ok));
  line("expected disconnects", std::to_string(r.disconnects));
  line("expected refusals (4xx)", std::to_string(r.malformed));
  line("lost", std::to_string(r.lost));
  line("truncated", std::to_string(r.truncated));
  line("duplicated", std::to_string(r.duplicated));
  line("real failures", std::to_string(r.failures));
  for (const auto& p : r.problems) line("  problem", p);
  line("duration (s)", fmt::format("{:.2f}", r.duration_s));
  const json lat = latency_json(r.latencies), health = latency_json(r.health_latencies);
  line("latency p50 / p99 / max (ms)",
       fmt::format("{:.1f} / {:.1f} / {:.1f}", lat["p50_ms"].get<double>(),
                   lat["p99_ms"].get<double>(), lat["max_ms"].get<double>()));
  line("/health p50 / p99 / max (ms)",
       fmt::format("{:.1f} / {:.1f} / {:.1f} ({} answered, {} failed{})",
                   health["p50_ms"].get<double>(), health["p99_ms"].get<double>(),
                   health["max_ms"].get<double>(), r.health_latencies.size(), r.health_failures,
                   r.health_failures > 0 ? ", first: " + r.health_first_failure : ""));
  if (o.slowloris > 0)
    line("slowloris", fmt::format("{} connections: {} opened, {} closed by the server", o.slowloris,
                                  r.slowloris_opened, r.slowloris_closed));
  line("RSS MiB start / warm / end",
       fmt::format("{} / {} / {}", mib(r.at_start.rss_bytes), mib(r.after_warmup.rss_bytes),
                   mib(r.at_end.rss_bytes)));
  if (r.after_warmup.rss_bytes > 0 && r.at_end.rss_bytes > 0)
    line("RSS end vs warm-up",
         fmt::format("{:+.1f} %", 100.0 * (r.at_end.rss_bytes / r.after_warmup.rss_bytes - 1)));
  line("cache blocks start / warm / end",
       fmt::format("{} / {} / {}", count(r.at_start.cache_blocks_used),
                   count(r.after_warmup.cache_blocks_used), count(r.at_end.cache_blocks_used)));
  line("running at end", count(r.at_end.running));
  line("result", r.passed()
                     ? "PASS"
                     : "FAIL (lost, truncated, duplicated or failed requests, or cache blocks "
                       "still referenced at the end)");
}

}  // namespace handoff::cli
