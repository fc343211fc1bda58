// /metrics carries what a soak run watches (the server's resident memory and the cache blocks
// requests hold), vLLM's per-request histograms, and a model_name label on every series; the
// whole text is valid Prometheus exposition.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "handoff/serve/metrics.h"

namespace handoff::serve {
namespace {

// One sample line: name, labels (as written), value.
struct Sample {
  std::string name, labels;
  double value = 0;
};

// Parses the exposition text strictly: every line is a comment (# HELP / # TYPE) or a sample
// `name{label="value",...} number`; anything else fails the test.
std::vector<Sample> parse_exposition(const std::string& text) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\} (\S+)$)");
  static const std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, comment)) continue;
    if (!std::regex_match(line, m, sample)) {
      ADD_FAILURE() << "not exposition format: " << line;
      continue;
    }
    out.push_back({m[1], m[2], std::stod(m[3])});
  }
  return out;
}

double value_of(const std::vector<Sample>& samples, const std::string& name,
                const std::string& labels = "model_name=\"m\"") {
  for (const auto& s : samples)
    if (s.name == name && s.labels == labels) return s.value;
  return -1;
}

TEST(ServeMetrics, ReportsResidentMemoryAndCacheBlocksUsed) {
  engine::EngineStats stats;
  stats.cache_blocks_used = 7;
  stats.cache_blocks_total = 28;
  const std::string text = render_metrics(stats, HttpCounts{}, comm::CommCounts{}, "m");
  const auto samples = parse_exposition(text);
  EXPECT_EQ(value_of(samples, "handoff_kv_cache_blocks_used"), 7);
  EXPECT_EQ(value_of(samples, "handoff_kv_cache_usage_ratio"), 0.25);
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge"), std::string::npos);
  // This test process: more than a megabyte resident, less than the machine.
  const double rss = value_of(samples, "process_resident_memory_bytes");
  EXPECT_GT(rss, 1e6);
  EXPECT_LT(rss, 1e12);
  EXPECT_NEAR(rss, process_resident_bytes(), 64e6);
}

TEST(ServeMetrics, HistogramsAreCumulativeAndEverySeriesNamesTheModel) {
  engine::EngineStats stats;
  for (double q : {0.0005, 0.02, 0.02, 7.0}) stats.queue_time.observe(q);
  stats.prefill_time.observe(0.2);
  stats.decode_time.observe(3.0);
  for (double t : {3.0, 40.0, 4000.0}) stats.request_prompt_tokens.observe(t);
  stats.request_generation_tokens.observe(16);
  for (double t : {1.0, 9.0, 300.0}) stats.iteration_tokens.observe(t);
  HttpCounts http;
  http.requests[{"/v1/completions", 200}] = 3;
  const std::string model = "org/model \"v2\"";
  const std::string text = render_metrics(stats, http, comm::CommCounts{}, model);
  const auto samples = parse_exposition(text);
  ASSERT_GT(samples.size(), 100u);
  const std::string label = R"(model_name="org/model \"v2\"")";
  for (const auto& s : samples)
    EXPECT_EQ(s.labels.rfind(label, 0), 0u) << s.name << "{" << s.labels << "}";

  // Each histogram: buckets never decrease, +Inf equals _count, _sum is the observations' sum.
  struct Expect {
    std::string name;
    double count, sum;
    std::map<std::string, double> buckets;  // le -> cumulative count
  };
  const std::vector<Expect> expected = {
      {"handoff_request_queue_time_seconds",
       4,
       7.0405,
       {{"0.001", 1}, {"0.05", 3}, {"5", 3}, {"10", 4}}},
      {"handoff_request_prefill_time_seconds", 1, 0.2, {{"0.1", 0}, {"0.3", 1}}},
      {"handoff_request_decode_time_seconds", 1, 3.0, {{"2.5", 0}, {"5", 1}}},
      {"handoff_request_prompt_tokens", 3, 4043, {{"2", 0}, {"5", 1}, {"50", 2}, {"5000", 3}}},
      {"handoff_request_generation_tokens", 1, 16, {{"10", 0}, {"20", 1}}},
      {"handoff_iteration_tokens_total", 3, 310, {{"1", 1}, {"8", 1}, {"16", 2}, {"512", 3}}},
  };
  for (const auto& e : expected) {
    EXPECT_NE(text.find("# TYPE " + e.name + " histogram"), std::string::npos) << e.name;
    EXPECT_EQ(value_of(samples, e.name + "_count", label), e.count) << e.name;
    EXPECT_NEAR(value_of(samples, e.name + "_sum", label), e.sum, 1e-9) << e.name;
    EXPECT_EQ(value_of(samples, e.name + "_bucket", label + ",le=\"+Inf\""), e.count) << e.name;
    for (const auto& [le, n] : e.buckets)
      EXPECT_EQ(value_of(samples, e.name + "_bucket", label + ",le=\"" + le + "\""), n)
          << e.name << " le=" << le;
    double last = 0;
    for (const auto& s : samples)
      if (s.name == e.name + "_bucket") {
        EXPECT_GE(s.value, last) << e.name << " " << s.labels;
        last = s.value;
      }
  }
  EXPECT_EQ(value_of(samples, "handoff_http_requests_total",
                     label + ",endpoint=\"/v1/completions\",status=\"200\""),
            3);
}

}  // namespace
}  // namespace handoff::serve
