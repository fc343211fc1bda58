// The weight-load progress and the log line format: what an operator sees on a terminal and in
// a service log.
#include "handoff/model/load_progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <thread>

#include "handoff/log.h"

namespace handoff::model {
namespace {

const std::regex kLogLine(
    R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR) .*)");

TEST(LogFormat, LinesHaveAUtcTimestampAndLevel) {
  const std::string line = log::format_line(log::Level::kWarn, "disk is slow");
  EXPECT_TRUE(std::regex_match(line, kLogLine)) << line;
  EXPECT_NE(line.find("Z WARNING disk is slow"), std::string::npos) << line;
  // The timestamp is now (UTC), to the second.
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char year[8];
  std::strftime(year, sizeof year, "%Y", &utc);
  EXPECT_EQ(line.substr(0, 4), year);
  EXPECT_EQ(log::parse_level("warning"), log::Level::kWarn);
  EXPECT_EQ(log::parse_level("debug"), log::Level::kDebug);
  EXPECT_EQ(log::parse_level("error"), log::Level::kError);
  EXPECT_EQ(log::parse_level("verbose"), std::nullopt);
}

TEST(LogFormat, TheLevelFiltersLines) {
  const log::Level saved = log::level();
  log::set_level(log::Level::kWarn);
  ::testing::internal::CaptureStderr();
  log::info("hidden {}", 1);
  log::warn("shown {}", 2);
  log::error("shown {}", 3);
  const std::string out = ::testing::internal::GetCapturedStderr();
  log::set_level(saved);
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("WARNING shown 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ERROR shown 3\n"), std::string::npos) << out;
}

TEST(LoadProgressTest, CountsAndClamps) {
  ::testing::internal::CaptureStderr();
  LoadProgress p("loading weights", 1000, 0, LoadProgress::Output::kLog);
  p.advance(400);
  EXPECT_EQ(p.done_bytes(), 400u);
  p.advance(800);
  EXPECT_EQ(p.done_bytes(), 1000u);
  p.finish();
  p.finish();  // idempotent
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;  // the start and the end
}

TEST(LoadProgress, OffATerminalItLogsAtStartPeriodicallyAndAtTheEnd) {
  ::testing::internal::CaptureStderr();
  {
    LoadProgress p("loading weights", 4'000'000, 4, LoadProgress::Output::kLog,
                   std::chrono::milliseconds(300));
    p.advance(1'000'000);  // within the interval: no line
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    p.advance(1'000'000);  // past it: a line with an ETA
    p.advance(1'000'000);
    p.advance(1'000'000);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find('\r'), std::string::npos) << "no carriage returns in a log";
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = out.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(out.substr(at, end - at));
  ASSERT_EQ(lines.size(), 3u) << out;
  for (const auto& l : lines) EXPECT_TRUE(std::regex_match(l, kLogLine)) << l;
  EXPECT_NE(lines[0].find("loading weights:   0% (0.0/4.0 MB, 0/4 tensors, ETA --)"),
            std::string::npos)
      << lines[0];
  EXPECT_TRUE(std::regex_search(lines[1],
                                std::regex(R"( 50% \(2\.0/4\.0 MB, 2/4 tensors, ETA \d+\.\d s\))")))
      << lines[1];
  EXPECT_TRUE(
      std::regex_search(lines[2], std::regex(R"(100% \(4\.0/4\.0 MB, 4/4 tensors, \d+\.\d s\)$)")))
      << lines[2];
}

TEST(LoadProgress, OnATerminalItRewritesOneLine) {
  ::testing::internal::CaptureStderr();
  {
    LoadProgress p("writing weights", 3'000'000'000, 0, LoadProgress::Output::kTerminal);
    p.advance(1'000'000'000);
    p.advance(2'000'000'000);
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("\rwriting weights:  33% (1.00/3.00 GB, 1 tensors, ETA"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\rwriting weights: 100% (3.00/3.00 GB, 2 tensors, "), std::string::npos)
      << out;
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line, rewritten in place";
}

}  // namespace
}  // namespace handoff::model
