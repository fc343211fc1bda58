// What a running server tells its operator: timestamped log lines filtered by --log-level, one
// info line per finished request, a periodic throughput line only while busy, and /metrics
// histograms of real requests labelled with the model name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "serve_process.h"

namespace handoff::testing {
namespace {

using nlohmann::json;

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

TEST(ServeObservability, RequestLinesStatsLinesAndLevels) {
  ServeProcess server("--log-stats-interval 0.2 --log-level debug");
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string r = http(
      server.port(),
      post_request("/v1/completions",
                   json{{"prompt", {1, 2, 3}}, {"max_tokens", 40}, {"ignore_eos", true}}.dump(),
                   "X-Request-Id: obs-1\r\n"),
      milliseconds(30000));
  ASSERT_EQ(status_of(r), 200) << r;
  // The next tick logs the tokens (polled: a loaded machine may wake the reporter late).
  const std::regex stats_line(
      R"(INFO Avg prompt throughput: \d+\.\d tokens/s, Avg generation throughput: \d+\.\d tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, KV cache usage: \d+\.\d%, Prefix cache hit rate: 0\.0%)");
  for (int i = 0; i < 100 && !std::regex_search(server.log(), stats_line); ++i)
    std::this_thread::sleep_for(milliseconds(100));
  const std::string log = server.log();
  // Every log line is timestamped (the listening line is the launcher's, on purpose bare).
  const std::regex line(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR) .*)");
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("listening on", 0) != 0) {
      EXPECT_TRUE(std::regex_match(l, line)) << "untimestamped: " << l;
    }
  }
  EXPECT_TRUE(std::regex_search(
      log,
      std::regex(
          R"(INFO request cmpl-obs-1: finish length, prompt 3 tokens, output 40 tokens, queue \d+\.\d{3} s, ttft \d+\.\d{3} s, total \d+\.\d{3} s)")))
      << log;
  EXPECT_NE(log.find("DEBUG request cmpl-obs-1: 3 prompt tokens, max_tokens 40"), std::string::npos)
      << log;
  EXPECT_TRUE(std::regex_search(log, stats_line)) << log;
  // Idle: no more throughput lines (after a second for a tick that saw the last tokens).
  std::this_thread::sleep_for(milliseconds(1000));
  const int lines = count_of(server.log(), "Avg prompt throughput");
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_EQ(count_of(server.log(), "Avg prompt throughput"), lines);

  // /metrics: the request's histograms, each series labelled with the model.
  const std::string metrics = body_of(get(server.port(), "/metrics"));
  const std::string m = "{model_name=\"dsv32_tiny_sparse\"}";
  for (const char* h :
       {"handoff_request_queue_time_seconds", "handoff_request_prefill_time_seconds",
        "handoff_request_decode_time_seconds", "handoff_request_prompt_tokens",
        "handoff_request_generation_tokens"})
    EXPECT_NE(metrics.find(std::string(h) + "_count" + m + " 1\n"), std::string::npos) << h << "\n"
                                                                                       << metrics;
  EXPECT_NE(metrics.find("handoff_request_prompt_tokens_sum" + m + " 3\n"), std::string::npos);
  EXPECT_NE(metrics.find("handoff_request_generation_tokens_sum" + m + " 40\n"), std::string::npos);
  // 40 tokens: one 3-token prefill step that samples the first, then 39 single-token steps.
  EXPECT_NE(metrics.find("handoff_iteration_tokens_total_sum" + m + " 42\n"), std::string::npos)
      << metrics;
}

TEST(ServeObservability, WarningLevelHidesRequestLines) {
  ServeProcess server("--log-level warning");
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string r =
      http(server.port(),
           post_request("/v1/completions", json{{"prompt", {1, 2}}, {"max_tokens", 2}}.dump()));
  ASSERT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(server.log().find(" INFO "), std::string::npos) << server.log();
}

}  // namespace
}  // namespace handoff::testing
