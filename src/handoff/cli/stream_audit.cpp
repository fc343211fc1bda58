#include "handoff/cli/stream_audit.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace handoff::cli {
namespace {

using nlohmann::json;

int severity(Verdict v) {
  switch (v) {
    case Verdict::kServerError:
      return 4;
    case Verdict::kDuplicated:
      return 3;
    case Verdict::kTruncated:
      return 2;
    case Verdict::kInconsistent:
      return 1;
    case Verdict::kOk:
      break;
  }
  return 0;
}

std::string error_message(const json& j) {
  const json& e = j["error"];
  if (e.is_object() && e.contains("message") && e["message"].is_string())
    return e["message"].get<std::string>();
  return e.dump();
}

// The checks a stream and a whole response share: a known finish reason, and token counts that
// fit the request (a "length" finish used every allowed token, unless the context was full).
std::string count_problem(const AuditExpectation& expect, const std::string& finish_reason,
                          int64_t prompt_tokens, int64_t completion_tokens) {
  if (finish_reason != "stop" && finish_reason != "length")
    return fmt::format("finish_reason '{}' (expected stop or length)", finish_reason);
  if (completion_tokens < 0 || completion_tokens > expect.max_tokens)
    return fmt::format("{} completion tokens for max_tokens {}", completion_tokens,
                       expect.max_tokens);
  // prompt_tokens < 0: not reported (a stream without usage), so the context may have been full.
  const bool context_full = prompt_tokens < 0 || expect.max_model_len <= 0 ||
                            prompt_tokens + completion_tokens >= expect.max_model_len;
  if (finish_reason == "length" && completion_tokens < expect.max_tokens && !context_full)
    return fmt::format("finish_reason length after {} of max_tokens {}", completion_tokens,
                       expect.max_tokens);
  return "";
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kTruncated:
      return "truncated";
    case Verdict::kDuplicated:
      return "duplicated";
    case Verdict::kInconsistent:
      return "inconsistent";
    case Verdict::kServerError:
      return "server error";
  }
  return "?";
}

void StreamAudit::note(Verdict v, std::string detail) {
  if (severity(v) > severity(problem_)) {
    problem_ = v;
    problem_detail_ = std::move(detail);
  }
}

void StreamAudit::feed(std::string_view bytes) {
  pending_.append(bytes);
  size_t end;
  while ((end = pending_.find("\n\n")) != std::string::npos) {
    const std::string block = pending_.substr(0, end);
    pending_.erase(0, end + 2);
    // An SSE event may span lines; only data lines carry the payload.
    std::string payload;
    size_t at = 0;
    while (at <= block.size()) {
      size_t nl = block.find('\n', at);
      if (nl == std::string::npos) nl = block.size();
      const std::string_view line(block.data() + at, nl - at);
      if (line.rfind("data:", 0) == 0) {
        std::string_view data = line.substr(5);
        if (!data.empty() && data.front() == ' ') data.remove_prefix(1);
        if (!payload.empty()) payload += '\n';
        payload.append(data);
      }
      at = nl + 1;
    }
    if (!payload.empty()) event(payload);
  }
}

void StreamAudit::event(std::string_view payload) {
  if (done_markers_ > 0) {
    ++done_markers_;  // anything after [DONE] repeats the end
    note(Verdict::kDuplicated, fmt::format("data after [DONE]: {}", payload.substr(0, 80)));
    return;
  }
  if (payload == "[DONE]") {
    ++done_markers_;
    return;
  }
  const json j = json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    note(Verdict::kInconsistent, fmt::format("unparseable chunk: {}", payload.substr(0, 80)));
    return;
  }
  if (j.contains("error")) {
    note(Verdict::kServerError, "error event: " + error_message(j));
    return;
  }
  if (!j.contains("choices") || !j["choices"].is_array()) {
    note(Verdict::kInconsistent, "chunk without choices");
    return;
  }
  const json& choices = j["choices"];
  if (choices.empty()) {
    if (!j.contains("usage") || !j["usage"].is_object()) {
      note(Verdict::kInconsistent, "chunk with no choice and no usage");
      return;
    }
    if (++usage_chunks_ > 1) note(Verdict::kDuplicated, "a second usage chunk");
    usage_prompt_tokens_ = j["usage"].value("prompt_tokens", int64_t{0});
    usage_completion_tokens_ = j["usage"].value("completion_tokens", int64_t{-1});
    return;
  }
  if (choices.size() != 1) {
    note(Verdict::kDuplicated, fmt::format("a chunk with {} choices", choices.size()));
    return;
  }
  const json& choice = choices[0];
  if (expect_.chat && choice.contains("delta") && choice["delta"].is_object() &&
      choice["delta"].contains("role")) {
    if (++role_chunks_ > 1) note(Verdict::kDuplicated, "a second role chunk");
    if (token_chunks_ > 0) note(Verdict::kInconsistent, "the role chunk after tokens");
    return;
  }
  if (finishes_ > 0) note(Verdict::kDuplicated, "a token chunk after the finish_reason");
  if (usage_chunks_ > 0) note(Verdict::kInconsistent, "a token chunk after the usage chunk");
  ++token_chunks_;
  if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) {
    if (++finishes_ > 1) note(Verdict::kDuplicated, "a second finish_reason");
    finish_reason_ = choice["finish_reason"].is_string()
                         ? choice["finish_reason"].get<std::string>()
                         : choice["finish_reason"].dump();
  }
}

AuditResult StreamAudit::result() const {
  AuditResult r;
  r.finish_reason = finish_reason_;
  r.completion_tokens = usage_chunks_ > 0 ? usage_completion_tokens_ : token_chunks_;
  auto verdict = [&](Verdict v, std::string detail) {
    r.verdict = v;
    r.detail = std::move(detail);
    return r;
  };
  if (problem_ == Verdict::kServerError || problem_ == Verdict::kDuplicated)
    return verdict(problem_, problem_detail_);
  if (finishes_ == 0)
    return verdict(Verdict::kTruncated,
                   fmt::format("no finish_reason after {} token chunks", token_chunks_));
  if (done_markers_ == 0) return verdict(Verdict::kTruncated, "no [DONE]");
  if (!pending_.empty() && pending_.find_first_not_of("\r\n") != std::string::npos)
    return verdict(Verdict::kDuplicated, "an unterminated event after [DONE]");
  if (problem_ != Verdict::kOk) return verdict(problem_, problem_detail_);
  if (expect_.include_usage && usage_chunks_ == 0)
    return verdict(Verdict::kInconsistent, "include_usage asked, no usage chunk");
  if (usage_chunks_ > 0 && usage_completion_tokens_ != token_chunks_)
    return verdict(Verdict::kInconsistent,
                   fmt::format("usage counts {} completion tokens, the stream had {} chunks",
                               usage_completion_tokens_, token_chunks_));
  const std::string counts = count_problem(
      expect_, finish_reason_, usage_chunks_ > 0 ? usage_prompt_tokens_ : -1, r.completion_tokens);
  if (!counts.empty()) return verdict(Verdict::kInconsistent, counts);
  return r;
}

AuditResult audit_response(std::string_view body, const AuditExpectation& expect) {
  AuditResult r;
  auto verdict = [&](Verdict v, std::string detail) {
    r.verdict = v;
    r.detail = std::move(detail);
    return r;
  };
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return verdict(Verdict::kTruncated, fmt::format("unparseable body: {}", body.substr(0, 80)));
  if (j.contains("error")) return verdict(Verdict::kServerError, error_message(j));
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
    return verdict(Verdict::kTruncated, "no choices");
  if (j["choices"].size() != 1)
    return verdict(Verdict::kDuplicated, fmt::format("{} choices", j["choices"].size()));
  const json& choice = j["choices"][0];
  if (!choice.contains("finish_reason") || !choice["finish_reason"].is_string())
    return verdict(Verdict::kTruncated, "no finish_reason");
  r.finish_reason = choice["finish_reason"].get<std::string>();
  const bool has_text = expect.chat ? choice.contains("message") && choice["message"].is_object() &&
                                          choice["message"].contains("content")
                                    : choice.contains("text") && choice["text"].is_string();
  if (!has_text) return verdict(Verdict::kInconsistent, "the choice has no text");
  if (!j.contains("usage") || !j["usage"].is_object())
    return verdict(Verdict::kInconsistent, "no usage");
  r.completion_tokens = j["usage"].value("completion_tokens", int64_t{-1});
  const std::string counts = count_problem(
      expect, r.finish_reason, j["usage"].value("prompt_tokens", int64_t{0}), r.completion_tokens);
  if (!counts.empty()) return verdict(Verdict::kInconsistent, counts);
  return r;
}

}  // namespace handoff::cli
