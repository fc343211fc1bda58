// The CLI's own reporting: --version, --log-level checks, progress of make-model off a
// terminal, generate printing text while it generates, and bench failing when requests fail.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include "../serve/serve_process.h"
#include "../serve/text_model.h"
#include "../text/text_test_support.h"
#include "cli_support.h"
#include "handoff/version.h"

namespace handoff::testing {
namespace {

TEST(ObservabilityCli, VersionNamesTheCommitAndTheKernels) {
  const auto r = run_handoff("--version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output,
      std::regex(R"(^handoff \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n)")))
      << r.output;
  EXPECT_NE(r.output.find(std::string("handoff ") + handoff::version()), std::string::npos);
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex(R"(\ncpu features: (amx|avx512|avx2|portable) )")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\nkernels: (amx|avx512|avx2|portable) )")))
      << r.output;
  const auto capped =
      run_command("HANDOFF_ISA=portable " + std::string(HANDOFF_BINARY) + " --version");
  EXPECT_NE(capped.output.find("\nkernels: portable "), std::string::npos) << capped.output;
  // The commit is the checkout's (when built from one).
  const auto head = run_command("git -C " + tests_dir().string() + " rev-parse --short=12 HEAD");
  if (head.exit_code == 0 && head.output.size() >= 12) {
    EXPECT_NE(r.output.find(head.output.substr(0, 12)), std::string::npos) << r.output;
  }
}

TEST(ObservabilityCli, BadLogLevelIsAUsageError) {
  const auto r = run_handoff("serve --model " + kServeModel + " --log-level chatty");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--log-level"), std::string::npos) << r.output;
}

TEST(ObservabilityCli, MakeModelReportsProgressOffATerminal) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("handoff_progress_" + std::to_string(::getpid()));
  const auto r = run_handoff("make-model --family deepseek_v32 --preset tiny --dtype f32 --out " +
                             dir.string());
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Not a terminal (a pipe): log lines, no carriage returns.
  EXPECT_EQ(r.output.find('\r'), std::string::npos);
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(Z INFO writing weights:   0% \()")))
      << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output,
      std::regex(
          R"(Z INFO writing weights: 100% \([0-9.]+/[0-9.]+ [kM]B, (\d+)/\1 tensors, \d+\.\d s\))")))
      << r.output;
}

TEST(ObservabilityCli, GenerateStreamsTextAsItIsGenerated) {
  if (!require_node_modules()) return;
  const std::string dir = small_text_model();
  // Read stdout as it comes: the text must start well before the process ends.
  const std::string command =
      std::string(HANDOFF_BINARY) + " generate --model " + dir +
      " --prompt 'Once upon a time' --max-new-tokens 80 --dtype f32 --threads 1 "
      "--temperature 1 --seed 3 2>/dev/null";
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  double first_text_s = -1;
  char buffer[256];
  size_t n;
  while ((n = fread(buffer, 1, 1, pipe)) > 0) {
    out.append(buffer, n);
    const size_t at = out.find("generated text: ");
    if (first_text_s < 0 && at != std::string::npos && out.size() > at + 16 + 8)
      first_text_s = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const int status = pclose(pipe);
  const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(status, 0) << out;
  ASSERT_GT(first_text_s, 0) << out;
  // The summary with the ids comes after the streamed text.
  EXPECT_LT(out.find("generated text: "), out.find("prompt 0: ")) << out;
  EXPECT_LT(first_text_s, total_s * 0.7) << "first text at " << first_text_s << " s of " << total_s;
}

TEST(ObservabilityCli, BenchFailsWhenRequestsFail) {
  // Nothing listens on this port: every request fails.
  const auto none = run_handoff(
      "bench serve --url http://127.0.0.1:9 --num-prompts 3 --concurrency 1 --input-len 4 "
      "--output-len 2");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("3 of 3 requests failed; the first: HTTP error"), std::string::npos)
      << none.output;
  // A server that answers: exit 0 (bench's prompts are ids up to 30000: a real vocabulary).
  if (!require_node_modules()) return;
  ServeProcess server("--kv-cache-tokens 4096", small_text_model());
  ASSERT_GT(server.port(), 0) << server.log();
  const auto ok =
      run_handoff("bench serve --url http://127.0.0.1:" + std::to_string(server.port()) +
                  " --num-prompts 2 --concurrency 2 --input-len 4 --output-len 2");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  // Offline, an engine whose step fails fails every request: exit 1.
  const auto offline = run_handoff("bench offline --model " + kServeModel +
                                   " --dtype f32 --threads 1 --num-prompts 2 --input-len 4 "
                                   "--output-len 2 --tp 2 --fail-rank 1 --fail-at-step 0");
  EXPECT_EQ(offline.exit_code, 1) << offline.output;
  EXPECT_NE(offline.output.find("2 of 2 requests failed"), std::string::npos) << offline.output;
}

}  // namespace
}  // namespace handoff::testing
