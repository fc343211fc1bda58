// The parallel flags end to end: flags that do not apply are errors, a failing rank stops every
// rank with an error naming it, `plan --json` has the documented shape, and the MPI backend
// (one process per rank under mpirun) gives the local backend's tokens and logits.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace handoff::testing {
namespace {

const std::string kModel = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_small_bf16";
const std::string kGen =
    "generate --model " + kModel + " --prompt-ids 3,1,4,1,5,9,2,6 --max-new-tokens 4 --dtype f32 ";

TEST(ParallelCli, FlagsThatDoNotApplyAreErrors) {
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--sp on", "--sp on needs --tp > 1"},
      {"--tp 2 --pp-boundary shard --sp on", "--pp-boundary applies only with --pp > 1"},
      {"--tp 2 --pp 2 --pp-boundary shard", "--pp-boundary applies only with --sp on"},
      {"--tp 2 --pp-sp-policy guard --sp on", "--pp-sp-policy applies only with --pp > 1"},
      {"--pp 7", "pp = 7 stages but the model has only 6 layers"},
      {"--tp 3", "tp = 3 does not divide num_attention_heads = 4"},
      {"--pp 2 --pp-layers 2,2", "--pp-layers sums to 4 layers but the model has 6"},
      {"--pp-layers 6", "--pp-layers applies only with --pp > 1"},
      {"--tp 2 --fail-rank 5 --fail-at-step 0", "--fail-rank 5 is not a rank"},
      {"--tp 2 --fail-rank 1", "--fail-rank and --fail-at-step go together"},
  };
  for (const auto& c : cases) {
    const auto r = run_handoff(kGen + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags << "\n" << r.output;
  }
}

TEST(ParallelCli, FailingRankStopsEveryRankWithItsName) {
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_handoff(kGen + "--tp 2 --pp 2 --sp on --comm-timeout 20 --fail-rank 1 --fail-at-step 2");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1: injected failure at step 2"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 15.0);  // every other rank stopped at once, none waited for its timeout
}

TEST(ParallelCli, PlanJsonHasTheDocumentedShape) {
  const auto r = run_handoff("plan --config " + kModel +
                             "/config.json --tp 2 --pp 2 --sp on --tokens 5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_TRUE(j["gate"]["sp_inside_stages"].get<bool>());
  EXPECT_EQ(j["gate"]["conditions"].size(), 5u);
  const auto& layer = j["stages"][1]["layers"][1];
  EXPECT_EQ(layer["kind"], "moe");
  EXPECT_EQ(layer["sp"], true);
  EXPECT_EQ(layer["o_proj_reduce"], false);
  EXPECT_EQ(layer["input_layout"], "shard");
  EXPECT_EQ(layer["collectives"][0]["op"], "all_gather");
  EXPECT_EQ(j["stages"][0]["exit"]["contract"], "full");
  EXPECT_TRUE(j["stages"][1]["exit"]["contract"].is_null());
  EXPECT_TRUE(j.contains("totals"));
  const auto guard = run_handoff("plan --config " + kModel +
                                 "/config.json --tp 2 --pp 2 --sp on --pp-sp-policy guard");
  EXPECT_NE(guard.output.find("requested but inactive"), std::string::npos) << guard.output;
}

// One prefill step of 8 tokens: the measured report equals the plan, per stage and in total.
TEST(ParallelCli, CommReportOfAPrefillEqualsThePlan) {
  const auto dir = std::filesystem::temp_directory_path() / "handoff_comm_report_test";
  std::filesystem::create_directories(dir);
  const std::string report = (dir / "report.json").string();
  const std::string layout = "--tp 2 --pp 3 --sp on --pp-boundary shard ";
  const auto run = run_handoff("generate --model " + kModel +
                               " --prompt-ids 3,1,4,1,5,9,2,6 --max-new-tokens 0 --dtype f32 " +
                               layout + "--comm-report " + report);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto plan = run_handoff("plan --model " + kModel + " --tokens 8 --json " + layout);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto measured = nlohmann::json::parse(std::ifstream(report));
  const auto planned = nlohmann::json::parse(plan.output);
  EXPECT_EQ(measured["totals"], planned["totals"]);
  for (size_t s = 0; s < planned["stages"].size(); ++s)
    for (size_t l = 0; l < planned["stages"][s]["layers"].size(); ++l) {
      int64_t planned_bytes = 0, measured_bytes = 0;
      for (const auto& c : planned["stages"][s]["layers"][l]["collectives"])
        planned_bytes += c["bytes"].get<int64_t>();
      for (const auto& c : measured["stages"][s]["layers"][l]["collectives"])
        measured_bytes += c["bytes"].get<int64_t>();
      EXPECT_EQ(measured_bytes, planned_bytes) << "stage " << s << " layer " << l;
    }
  std::filesystem::remove_all(dir);
}

TEST(ParallelCli, MpiBackendMatchesLocalBackend) {
  const auto dir = std::filesystem::temp_directory_path() / "handoff_mpi_cli_test";
  std::filesystem::create_directories(dir);
  const std::string flags = "--tp 2 --pp 2 --sp on --comm-timeout 60 ";
  const auto local = run_handoff(kGen + flags + "--dump " + (dir / "local.json").string() +
                                 " --comm-report " + (dir / "local_report.json").string());
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const std::string mpi_cmd = std::string(HANDOFF_MPIRUN) + " -np 4 " + HANDOFF_BINARY + " " +
                              kGen + flags + "--comm mpi --dump " + (dir / "mpi.json").string() +
                              " --comm-report " + (dir / "mpi_report.json").string();
  const auto mpi = run_command(mpi_cmd);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  const auto a = nlohmann::json::parse(std::ifstream(dir / "local.json"))["prompts"][0];
  const auto b = nlohmann::json::parse(std::ifstream(dir / "mpi.json"))["prompts"][0];
  EXPECT_EQ(a["greedy_tokens"], b["greedy_tokens"]);
  EXPECT_LE(json_max_diff(a["prefill_logits"], b["prefill_logits"]), 1e-5);
  EXPECT_LE(json_max_diff(a["decode_logits"], b["decode_logits"]), 1e-5);
  // The processes' counts are gathered: the report holds every stage, measured as with threads
  // (whose counts the accounting tests equate with the plan's predictions).
  const auto local_report = nlohmann::json::parse(std::ifstream(dir / "local_report.json"));
  const auto mpi_report = nlohmann::json::parse(std::ifstream(dir / "mpi_report.json"));
  EXPECT_EQ(local_report, mpi_report);
  // A rank failing under MPI stops the whole job with its name.
  const auto failing = run_command(std::string(HANDOFF_MPIRUN) + " -np 4 " + HANDOFF_BINARY + " " +
                                   kGen + flags + "--comm mpi --fail-rank 2 --fail-at-step 1");
  EXPECT_NE(failing.exit_code, 0);
  EXPECT_NE(failing.output.find("rank 2"), std::string::npos) << failing.output;
  std::filesystem::remove_all(dir);
}

// --dump of a tp2 x pp2 SP run holds every layer of both stages (each stage records its own
// layers; the reporting rank collects the others'): as threads and as 4 mpirun processes, the
// indexer's key selections, the routed experts and the greedy tokens equal the reference's
// golden outputs exactly, the logits within 1e-4, and the two dumps equal each other.
TEST(ParallelCli, DumpOfEveryStageEqualsGoldenOnBothBackends) {
  const auto dir = std::filesystem::temp_directory_path() / "handoff_mpi_dump_test";
  std::filesystem::create_directories(dir);
  const std::string gen = "generate --model " + kModel + " --prompts-json " + kModel +
                          "/prompts.json --max-new-tokens 8 --dtype f32 --tp 2 --pp 2 --sp on " +
                          "--comm-timeout 60 --dump ";
  const auto local = run_handoff(gen + (dir / "local.json").string());
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const auto mpi = run_command(std::string(HANDOFF_MPIRUN) + " -np 4 " + HANDOFF_BINARY + " " +
                               gen + (dir / "mpi.json").string() + " --comm mpi");
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  const auto golden = nlohmann::json::parse(std::ifstream(kModel + "/golden.json"))["prompts"];
  const auto a = nlohmann::json::parse(std::ifstream(dir / "local.json"))["prompts"];
  const auto b = nlohmann::json::parse(std::ifstream(dir / "mpi.json"))["prompts"];
  ASSERT_EQ(a.size(), golden.size());
  ASSERT_EQ(b.size(), golden.size());
  for (size_t p = 0; p < golden.size(); ++p) {
    const auto& g = golden[p];
    // Every layer has its rows: 6 layers x the prompt's tokens, experts of the 5 MoE layers.
    ASSERT_EQ(g["indexer_topk_prefill"].size(), 6u);
    for (const auto& layer : b[p]["indexer_topk_prefill"])
      EXPECT_EQ(layer.size(), g["tokens"].size()) << "prompt " << p;
    EXPECT_EQ(b[p]["moe_experts_prefill"].size(), 5u) << "prompt " << p;
    for (const char* exact : {"tokens", "greedy_tokens", "indexer_topk_prefill",
                              "indexer_topk_decode", "moe_experts_prefill"}) {
      EXPECT_EQ(a[p][exact], g[exact]) << "local " << exact << " of prompt " << p;
      EXPECT_EQ(b[p][exact], g[exact]) << "mpi " << exact << " of prompt " << p;
    }
    for (const char* close : {"prefill_logits", "decode_logits"}) {
      EXPECT_LE(json_max_diff(a[p][close], g[close]), 1e-4) << "local " << close;
      EXPECT_LE(json_max_diff(b[p][close], g[close]), 1e-4) << "mpi " << close;
      EXPECT_LE(json_max_diff(a[p][close], b[p][close]), 1e-5) << close;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace handoff::testing
