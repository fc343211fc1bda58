// /metrics carries what a soak run watches: the server's resident memory and the cache blocks
// requests hold.
#include <gtest/gtest.h>

#include <string>

#include "handoff/serve/metrics.h"

namespace handoff::serve {
namespace {

double value_of(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(ServeMetrics, ReportsResidentMemoryAndCacheBlocksUsed) {
  engine::EngineStats stats;
  stats.cache_blocks_used = 7;
  stats.cache_blocks_total = 28;
  const std::string text = render_metrics(stats, HttpCounts{}, comm::CommCounts{});
  EXPECT_EQ(value_of(text, "handoff_kv_cache_blocks_used"), 7);
  EXPECT_EQ(value_of(text, "handoff_kv_cache_usage_ratio"), 0.25);
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge"), std::string::npos);
  // This test process: more than a megabyte resident, less than the machine.
  const double rss = value_of(text, "process_resident_memory_bytes");
  EXPECT_GT(rss, 1e6);
  EXPECT_LT(rss, 1e12);
  EXPECT_NEAR(rss, process_resident_bytes(), 64e6);
}

}  // namespace
}  // namespace handoff::serve
