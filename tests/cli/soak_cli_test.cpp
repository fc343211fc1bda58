// The soak mode end to end: against an in-process fake server that breaks streams on purpose
// (the soak must count each break), and against `handoff serve` on a tiny model (nothing lost,
// the clients' own disconnects and malformed bodies counted apart).
#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../text/text_test_support.h"
#include "cli_support.h"
#include "handoff/cli/soak.h"

extern char** environ;

namespace handoff::testing {
namespace {

using nlohmann::json;

// Answers like an OpenAI server, except that streams with max_tokens % 4 == 0 lose their
// [DONE], those with % 4 == 1 finish twice, and whole answers with % 4 == 2 hold two choices.
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"data":[{"id":"fake","max_model_len":4096}]})", "application/json");
    });
    server_.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
      res.status = 400;
      res.set_content(R"({"error":{"message":"no chat template"}})", "application/json");
    });
    server_.Post("/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body, nullptr, false);
      const int64_t max_tokens = body.is_object() ? body.value("max_tokens", int64_t{0}) : 0;
      if (max_tokens < 1) {
        res.status = 400;
        res.set_content(R"({"error":{"message":"bad request"}})", "application/json");
        return;
      }
      auto choice = [](int index, const char* finish) {
        return json{{"index", index},
                    {"text", "x"},
                    {"finish_reason", finish ? json(finish) : json(nullptr)}};
      };
      if (!body.value("stream", false)) {
        json j = {{"choices", json::array({choice(0, "length")})},
                  {"usage", {{"prompt_tokens", 1}, {"completion_tokens", max_tokens}}}};
        if (max_tokens % 4 == 2) j["choices"].push_back(choice(1, "length"));
        res.set_content(j.dump(), "application/json");
        return;
      }
      std::string sse;
      for (int64_t i = 0; i < max_tokens; ++i)
        sse += "data: " +
               json{{"choices", {choice(0, i + 1 == max_tokens ? "length" : nullptr)}}}.dump() +
               "\n\n";
      if (max_tokens % 4 == 1)
        sse += "data: " + json{{"choices", {choice(0, "length")}}}.dump() + "\n\n";
      if (body.contains("stream_options"))
        sse += "data: " +
               json{{"choices", json::array()},
                    {"usage", {{"prompt_tokens", 1}, {"completion_tokens", max_tokens}}}}
                   .dump() +
               "\n\n";
      if (max_tokens % 4 != 0) sse += "data: [DONE]\n\n";
      res.set_content(sse, "text/event-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // Bound and listening already: requests queue until the accept loop runs.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(SoakFakeServer, CountsEveryBrokenStreamAndNothingElse) {
  FakeServer fake;
  cli::SoakOptions o;
  o.url = fmt::format("http://127.0.0.1:{}", fake.port());
  o.num_prompts = 60;
  o.concurrency = 6;
  o.seed = 3;
  o.shape.min_input_len = 1;
  o.shape.max_input_len = 4;
  o.shape.max_output_len = 12;
  o.shape.disconnect_percent = 0;
  o.shape.malformed_percent = 10;
  o.health_interval_s = 0.01;
  o.request_timeout_s = 30;
  // What the fake breaks, request by request, from the same seeded plan.
  int64_t truncated = 0, duplicated = 0, malformed = 0;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    const cli::SoakRequest r = cli::plan_request(o.seed, i, o.shape, "fake");
    if (r.kind == cli::SoakKind::kMalformed) {
      ++malformed;
      continue;
    }
    if (r.stream && r.max_tokens % 4 == 0) ++truncated;
    if ((r.stream && r.max_tokens % 4 == 1) || (!r.stream && r.max_tokens % 4 == 2)) ++duplicated;
  }
  ASSERT_GT(truncated, 0);
  ASSERT_GT(duplicated, 0);
  const cli::SoakReport report = cli::run_soak(o);
  EXPECT_EQ(report.truncated, truncated);
  EXPECT_EQ(report.duplicated, duplicated);
  EXPECT_EQ(report.lost, 0);
  EXPECT_EQ(report.disconnects, 0);
  EXPECT_FALSE(report.chat);
  // The fake refuses only bodies without a positive max_tokens; the other malformed bodies it
  // accepts are real failures of a server (a 200 to a body it must refuse).
  EXPECT_EQ(report.malformed + report.failures, malformed);
  EXPECT_EQ(report.ok + report.truncated + report.duplicated + report.failures + report.malformed,
            o.num_prompts);
  EXPECT_FALSE(report.passed());
  EXPECT_GT(report.health_latencies.size(), 0u);
  EXPECT_EQ(report.health_failures, 0);
  EXPECT_FALSE(report.at_start.available);  // the fake has no /metrics
}

TEST(SoakFakeServer, SlowlorisHoldsItsConnectionsOneByteASecond) {
  FakeServer fake;
  const cli::LoopbackTarget target =
      cli::loopback_target(fmt::format("http://127.0.0.1:{}", fake.port()));
  cli::Slowloris slow(target, 3, std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  slow.stop();
  // Ticks at 0 s and 1 s (the second may slip on a loaded machine): every connection opened
  // once, one byte per tick each, none answered (the header never ends).
  EXPECT_EQ(slow.opened(), 3);
  EXPECT_GE(slow.bytes_sent(), 3);
  EXPECT_LE(slow.bytes_sent(), 6);
  EXPECT_EQ(slow.bytes_sent() % 3, 0);
  EXPECT_EQ(slow.closed_by_server(), 0);
}

// `handoff serve` in the background on a free port, SIGTERMed (and reaped) at the end.
class ServeProcess {
 public:
  ServeProcess(const std::string& args, const std::filesystem::path& log) {
    const std::string command = "exec " + std::string(HANDOFF_BINARY) + " serve " + args +
                                " --port 0 > " + log.string() + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
      pid_ = -1;
    for (int i = 0; i < 600 && pid_ > 0 && url_.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::ifstream in(log);
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      const size_t at = text.find("listening on http://");
      if (at != std::string::npos)
        url_ = text.substr(at + 13, text.find_first_of(" \n", at + 13) - at - 13);
      if (waitpid(pid_, &status_, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
    }
  }
  ~ServeProcess() { stop(); }
  // SIGTERM; the exit status (0: drained and stopped cleanly).
  int stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, &status_, 0);
      pid_ = -1;
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  std::string url_;
};

TEST(SoakCli, ShortSoakOnATinyModelLosesNothing) {
  if (!require_node_modules()) return;
  const auto dir = std::filesystem::temp_directory_path() / "handoff_soak_cli";
  std::filesystem::create_directories(dir);
  const auto model = dir / "small-text";
  if (!std::filesystem::exists(model / "tokenizer.json")) {
    const auto made = run_handoff(
        "make-model --family deepseek_v32 --preset small-text --seed 1 "
        "--dtype f32 --out " +
        model.string() + " --tokenizer-from " + deepseek_v3_dir().string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  ServeProcess server(
      "--model " + model.string() + " --dtype f32 --kv-cache-tokens 8192 --http-threads 32",
      dir / "serve.log");
  ASSERT_FALSE(server.url().empty()) << "the server did not start; see " << dir / "serve.log";
  const auto report_path = dir / "report.json";
  std::filesystem::remove(report_path);
  const auto soak = run_handoff(
      "bench serve --soak --url " + server.url() +
      " --num-prompts 40 --concurrency 8 --seed 1 --min-input-len 8 --max-input-len 48"
      " --max-output-len 8 --disconnect-percent 20 --malformed-percent 10 --report-json " +
      report_path.string());
  EXPECT_EQ(soak.exit_code, 0) << soak.output;
  std::ifstream in(report_path);
  const json report = json::parse(in, nullptr, false);
  ASSERT_TRUE(report.is_object()) << soak.output;
  EXPECT_EQ(report["requests"], 40);
  EXPECT_EQ(report["lost"], 0) << report.dump(2);
  EXPECT_EQ(report["truncated"], 0) << report.dump(2);
  EXPECT_EQ(report["duplicated"], 0) << report.dump(2);
  EXPECT_EQ(report["failures"], 0) << report.dump(2);
  EXPECT_TRUE(report["chat"].get<bool>());
  // The clients' own disconnects and malformed bodies, counted apart, as the seeded plan has them
  // (a leaving client whose answer ends first on a stop string is an ordinary answer).
  cli::SoakShape shape;
  shape.min_input_len = 8;
  shape.max_input_len = 48;
  shape.max_output_len = 8;
  shape.disconnect_percent = 20;
  shape.malformed_percent = 10;
  shape.chat = true;
  int64_t planned_disconnects = 0, planned_malformed = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const cli::SoakRequest r = cli::plan_request(1, i, shape, "small-text");
    planned_disconnects += r.kind == cli::SoakKind::kDisconnect;
    planned_malformed += r.kind == cli::SoakKind::kMalformed;
  }
  ASSERT_GT(planned_malformed, 0);
  EXPECT_EQ(report["expected_refusals"].get<int64_t>(), planned_malformed) << report.dump(2);
  EXPECT_GT(report["expected_disconnects"].get<int64_t>(), 0);
  EXPECT_LE(report["expected_disconnects"].get<int64_t>(), planned_disconnects);
  EXPECT_EQ(report["ok"].get<int>() + report["expected_disconnects"].get<int>() +
                report["expected_refusals"].get<int>(),
            40);
  EXPECT_GT(report["health"]["count"].get<int>(), 0);
  EXPECT_EQ(report["health_failures"], 0);
  // /metrics carries the server's RSS and referenced cache blocks
  EXPECT_GT(report["metrics"]["start"]["rss_bytes"].get<double>(), 1e6);
  EXPECT_TRUE(report["metrics"]["end"]["cache_blocks_used"].is_number());
  EXPECT_EQ(server.stop(), 0);

  // Loopback targets only, refused before any request.
  const auto remote = run_handoff("bench serve --soak --url http://192.0.2.1:8000");
  EXPECT_EQ(remote.exit_code, 2) << remote.output;
  EXPECT_NE(remote.output.find("loopback"), std::string::npos) << remote.output;
}

}  // namespace
}  // namespace handoff::testing
