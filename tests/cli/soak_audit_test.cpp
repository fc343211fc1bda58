// The soak client's rules, without a server: stream and response accounting, the seeded plan,
// /metrics parsing and the loopback-only target.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "handoff/cli/server_probes.h"
#include "handoff/cli/soak.h"
#include "handoff/cli/soak_plan.h"
#include "handoff/cli/stream_audit.h"
#include "handoff/error.h"

namespace handoff::cli {
namespace {

std::string chunk(const std::string& text, const char* finish = nullptr) {
  nlohmann::json c = {{"choices", {{{"index", 0}, {"text", text}}}}};
  c["choices"][0]["finish_reason"] = finish ? nlohmann::json(finish) : nlohmann::json(nullptr);
  return "data: " + c.dump() + "\n\n";
}

std::string usage(int64_t prompt, int64_t completion) {
  return "data: " +
         nlohmann::json{{"choices", nlohmann::json::array()},
                        {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", completion}}}}
             .dump() +
         "\n\n";
}

const std::string kDone = "data: [DONE]\n\n";

AuditResult audit_stream(const std::string& sse, AuditExpectation e, size_t piece = 7) {
  StreamAudit audit(e);
  for (size_t at = 0; at < sse.size(); at += piece) audit.feed(sse.substr(at, piece));
  return audit.result();
}

AuditExpectation completions(int64_t max_tokens, bool usage = false) {
  return {false, usage, max_tokens, 4096};
}

TEST(SoakAudit, WholeStreamIsOkInAnyPieces) {
  const std::string sse = chunk("a") + chunk("b") + chunk("c", "length") + usage(5, 3) + kDone;
  for (size_t piece : {1, 2, 7, 1000}) {
    const AuditResult r = audit_stream(sse, completions(3, true), piece);
    EXPECT_EQ(r.verdict, Verdict::kOk) << piece << ": " << r.detail;
    EXPECT_EQ(r.completion_tokens, 3);
    EXPECT_EQ(r.finish_reason, "length");
  }
}

TEST(SoakAudit, StreamWithoutDoneOrFinishIsTruncated) {
  const AuditResult no_done = audit_stream(chunk("a") + chunk("b", "stop"), completions(4));
  EXPECT_EQ(no_done.verdict, Verdict::kTruncated);
  EXPECT_EQ(no_done.detail, "no [DONE]");
  const AuditResult no_finish = audit_stream(chunk("a") + chunk("b") + kDone, completions(4));
  EXPECT_EQ(no_finish.verdict, Verdict::kTruncated);
  EXPECT_NE(no_finish.detail.find("no finish_reason after 2"), std::string::npos);
  // A connection cut inside an event leaves a partial event, not a finish.
  const std::string cut = chunk("a") + chunk("b", "stop").substr(0, 20);
  EXPECT_EQ(audit_stream(cut, completions(4)).verdict, Verdict::kTruncated);
}

TEST(SoakAudit, RepeatedEndingsAreDuplicated) {
  EXPECT_EQ(audit_stream(chunk("a", "stop") + chunk("b", "stop") + kDone, completions(4)).verdict,
            Verdict::kDuplicated);
  EXPECT_EQ(audit_stream(chunk("a", "stop") + kDone + kDone, completions(4)).verdict,
            Verdict::kDuplicated);
  EXPECT_EQ(audit_stream(chunk("a", "stop") + kDone + chunk("b"), completions(4)).verdict,
            Verdict::kDuplicated);
  EXPECT_EQ(
      audit_stream(chunk("a", "stop") + usage(1, 1) + usage(1, 1) + kDone, completions(4, true))
          .verdict,
      Verdict::kDuplicated);
}

TEST(SoakAudit, CountsMustAgreeWithTheRequest) {
  // usage says 3, the stream carried 2 token chunks
  const AuditResult miscount =
      audit_stream(chunk("a") + chunk("b", "stop") + usage(5, 3) + kDone, completions(4, true));
  EXPECT_EQ(miscount.verdict, Verdict::kInconsistent);
  EXPECT_NE(miscount.detail.find("usage counts 3"), std::string::npos) << miscount.detail;
  // more tokens than max_tokens
  EXPECT_EQ(
      audit_stream(chunk("a") + chunk("b") + chunk("c", "stop") + kDone, completions(2)).verdict,
      Verdict::kInconsistent);
  // a "length" finish before max_tokens with room left in the context
  EXPECT_EQ(audit_stream(chunk("a", "length") + usage(5, 1) + kDone, completions(4, true)).verdict,
            Verdict::kInconsistent);
  // ... which is fine when the context is full
  AuditExpectation full = completions(4, true);
  full.max_model_len = 6;
  EXPECT_EQ(audit_stream(chunk("a", "length") + usage(5, 1) + kDone, full).verdict, Verdict::kOk);
  // include_usage asked, none sent
  EXPECT_EQ(audit_stream(chunk("a", "stop") + kDone, completions(4, true)).verdict,
            Verdict::kInconsistent);
  // an abort is never the end of a stream the client kept reading
  EXPECT_EQ(audit_stream(chunk("a", "abort") + kDone, completions(4)).verdict,
            Verdict::kInconsistent);
}

TEST(SoakAudit, ErrorEventIsAServerError) {
  const AuditResult r = audit_stream(
      chunk("a") + "data: {\"error\": {\"message\": \"boom\"}}\n\n" + kDone, completions(4));
  EXPECT_EQ(r.verdict, Verdict::kServerError);
  EXPECT_NE(r.detail.find("boom"), std::string::npos);
}

TEST(SoakAudit, ChatRoleChunkIsNotAToken) {
  const std::string role =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
      "\"finish_reason\":null}]}\n\n";
  const std::string token =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}"
      "\n\n";
  const std::string last =
      "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
  AuditExpectation chat{true, true, 8, 4096};
  const AuditResult ok = audit_stream(role + token + last + usage(9, 2) + kDone, chat);
  EXPECT_EQ(ok.verdict, Verdict::kOk) << ok.detail;
  EXPECT_EQ(ok.completion_tokens, 2);
  EXPECT_EQ(audit_stream(role + role + token + last + usage(9, 2) + kDone, chat).verdict,
            Verdict::kDuplicated);
}

TEST(SoakAudit, WholeResponseNeedsExactlyOneFinishedChoice) {
  auto body = [](int choices, const char* finish, int64_t completion) {
    nlohmann::json j = {{"choices", nlohmann::json::array()},
                        {"usage", {{"prompt_tokens", 4}, {"completion_tokens", completion}}}};
    for (int i = 0; i < choices; ++i)
      j["choices"].push_back({{"index", i},
                              {"text", "t"},
                              {"finish_reason", finish ? nlohmann::json(finish) : nullptr}});
    return j.dump();
  };
  const AuditExpectation e = completions(4);
  EXPECT_EQ(audit_response(body(1, "length", 4), e).verdict, Verdict::kOk);
  EXPECT_EQ(audit_response(body(2, "length", 4), e).verdict, Verdict::kDuplicated);
  EXPECT_EQ(audit_response(body(0, "length", 4), e).verdict, Verdict::kTruncated);
  EXPECT_EQ(audit_response(body(1, nullptr, 4), e).verdict, Verdict::kTruncated);
  EXPECT_EQ(audit_response(body(1, "length", 2), e).verdict, Verdict::kInconsistent);
  EXPECT_EQ(audit_response(body(1, "stop", 9), e).verdict, Verdict::kInconsistent);
  EXPECT_EQ(audit_response(body(1, "stop", 4).substr(0, 30), e).verdict, Verdict::kTruncated);
  EXPECT_EQ(audit_response("{\"error\":{\"message\":\"x\"}}", e).verdict, Verdict::kServerError);
}

TEST(SoakPlan, SeededMixWithinTheShape) {
  SoakShape shape;
  shape.chat = true;
  int64_t disconnects = 0, malformed = 0, streams = 0, chats = 0, stops = 0;
  std::set<int64_t> lengths;
  for (int64_t i = 0; i < 2000; ++i) {
    const SoakRequest r = plan_request(7, i, shape, "m");
    const SoakRequest again = plan_request(7, i, shape, "m");
    ASSERT_EQ(r.body, again.body) << "request " << i << " is not reproducible";
    ASSERT_GE(r.input_len, 16);
    ASSERT_LE(r.input_len, 1024);
    ASSERT_GE(r.max_tokens, 1);
    ASSERT_LE(r.max_tokens, 256);
    lengths.insert(r.max_tokens);
    disconnects += r.kind == SoakKind::kDisconnect;
    malformed += r.kind == SoakKind::kMalformed;
    streams += r.stream;
    chats += r.chat;
    if (r.kind == SoakKind::kDisconnect) {
      ASSERT_TRUE(r.stream);
      ASSERT_GE(r.disconnect_after, 1);
      ASSERT_LT(r.disconnect_after, r.max_tokens);
    }
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (r.kind == SoakKind::kMalformed) {
      ASSERT_FALSE(r.malformation.empty());
      continue;
    }
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["max_tokens"], r.max_tokens);
    EXPECT_EQ(j["model"], "m");
    EXPECT_EQ(j.value("stream", false), r.stream);
    stops += j.contains("stop");
    if (r.chat)
      EXPECT_EQ(r.path, "/v1/chat/completions");
    else
      EXPECT_EQ(static_cast<int64_t>(j["prompt"].size()), r.input_len);
  }
  // ~10 % and ~1 % of 2000, ~half streamed, ~half chat, ~30 % with stop strings
  EXPECT_NEAR(disconnects, 200, 60);
  EXPECT_NEAR(malformed, 20, 15);
  EXPECT_NEAR(streams, 1100, 150);
  EXPECT_NEAR(chats, 1000, 150);
  EXPECT_NEAR(stops, 600, 120);
  EXPECT_GT(lengths.size(), 200u);
  EXPECT_NE(plan_request(8, 0, shape, "m").body, plan_request(7, 0, shape, "m").body);
}

TEST(SoakProbes, ParsesTheGaugesOfMetrics) {
  const MetricsSnapshot m = parse_metrics(
      "# HELP handoff_num_requests_running x\nhandoff_num_requests_running 3\n"
      "handoff_kv_cache_blocks_used_total 99\nhandoff_kv_cache_blocks_used 12\n"
      "process_resident_memory_bytes 1.5e+08\n");
  EXPECT_TRUE(m.available);
  EXPECT_EQ(m.running, 3);
  EXPECT_EQ(m.cache_blocks_used, 12);
  EXPECT_EQ(m.rss_bytes, 1.5e8);
  EXPECT_EQ(m.waiting, -1);  // not reported
}

TEST(SoakReport, CacheBlocksStillReferencedAtTheEndFail) {
  cli::SoakReport r;
  r.ok = 10;
  EXPECT_TRUE(r.passed());  // no /metrics: nothing known about blocks
  r.at_end.available = true;
  r.at_end.cache_blocks_used = 0;
  EXPECT_TRUE(r.passed());
  r.at_end.cache_blocks_used = 3;
  EXPECT_TRUE(r.leaked_blocks());
  EXPECT_FALSE(r.passed());
}

TEST(SoakProbes, OnlyLoopbackTargets) {
  EXPECT_EQ(loopback_target("http://127.0.0.1:8000").port, 8000);
  EXPECT_EQ(loopback_target("http://localhost:9/").url, "http://localhost:9");
  EXPECT_EQ(loopback_target("http://[::1]:80").host, "[::1]");
  for (const char* bad :
       {"http://10.0.0.1:80", "http://example.com:80", "https://127.0.0.1:1", "http://127.0.0.1",
        "http://127.0.0.1:0", "http://127.0.0.1:99999", "http://127.0.0.1.evil.com:80"})
    EXPECT_THROW(loopback_target(bad), InputError) << bad;
}

}  // namespace
}  // namespace handoff::cli
