#pragma once
// `handoff bench serve --soak`: a long, mixed, partly hostile load on a running server, checked
// answer by answer (src/handoff/cli/stream_audit.h). It reports what a server must never do —
// lose a request, duplicate or truncate a stream, fail a valid request — apart from what the
// clients provoke on purpose (disconnects, malformed bodies), plus the server's memory and cache
// blocks over the run, request latency and /health latency while it runs.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "handoff/cli/server_probes.h"
#include "handoff/cli/soak_plan.h"

namespace handoff::cli {

struct SoakOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  std::string api_key;
  int64_t num_prompts = 2000;
  int concurrency = 64;
  uint64_t seed = 0;
  SoakShape shape;
  int slowloris = 0;                // connections sending one header byte per second
  double health_interval_s = 0.05;  // /health probe period
  double request_timeout_s = 600;   // per request, from send to the last byte
  std::string report_json;          // also write the report here (empty: no)
};

struct SoakReport {
  int64_t requests = 0;
  int64_t ok = 0;
  int64_t lost = 0;  // no HTTP response and no error
  int64_t truncated = 0;
  int64_t duplicated = 0;
  int64_t failures = 0;     // real failures: error answers to valid requests, inconsistent answers
  int64_t disconnects = 0;  // clients that left mid-stream on purpose
  int64_t malformed = 0;    // malformed bodies refused with a 4xx error object, as expected
  std::vector<std::string> problems;  // the first few lost/truncated/duplicated/failed, described
  bool chat = false;
  int64_t warmup_requests = 0;
  MetricsSnapshot at_start, after_warmup, at_end;
  std::vector<double> latencies;         // seconds, answered normal requests
  std::vector<double> health_latencies;  // seconds
  int64_t health_failures = 0;
  std::string health_first_failure;
  int64_t slowloris_opened = 0, slowloris_closed = 0;
  double duration_s = 0;
  // A settled server still referencing cache blocks leaked them: that fails too.
  bool leaked_blocks() const { return at_end.available && at_end.cache_blocks_used > 0; }
  bool passed() const {
    return lost == 0 && truncated == 0 && duplicated == 0 && failures == 0 && !leaked_blocks();
  }
};

SoakReport run_soak(const SoakOptions& options);
void print_soak_report(const SoakReport& report, const SoakOptions& options);
nlohmann::json soak_report_json(const SoakReport& report);

}  // namespace handoff::cli
