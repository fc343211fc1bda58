#pragma once
// The soak client's checks of one answer of an OpenAI server: a stream must end with exactly one
// finish_reason and exactly one [DONE], with nothing after it and as many token chunks as the
// usage counts; a whole response must hold exactly one finished choice. Pure (no I/O), so the
// rules are tested without a server.
#include <cstdint>
#include <string>
#include <string_view>

namespace handoff::cli {

enum class Verdict {
  kOk,
  kTruncated,     // no finish_reason or no [DONE]: the answer stopped short
  kDuplicated,    // a second finish_reason, [DONE], role or usage chunk, or data after [DONE]
  kInconsistent,  // token counts, finish reason or the body's shape disagree with the request
  kServerError,   // the server answered with an error object (in the body or as an event)
};

const char* verdict_name(Verdict v);

// What the request asked for, to check the answer against.
struct AuditExpectation {
  bool chat = false;
  bool include_usage = false;  // streams only: a usage chunk must come before [DONE]
  int64_t max_tokens = 1;
  int64_t max_model_len = 0;  // 0: unknown (a short "length" finish is then not checked)
};

struct AuditResult {
  Verdict verdict = Verdict::kOk;
  std::string detail;  // empty when ok
  std::string finish_reason;
  int64_t completion_tokens = 0;
};

// Fed the raw bytes of an SSE response as they arrive, in pieces of any size.
class StreamAudit {
 public:
  explicit StreamAudit(AuditExpectation expect) : expect_(expect) {}
  void feed(std::string_view bytes);
  // Token chunks so far (chat role chunks and the usage chunk excluded).
  int64_t token_chunks() const { return token_chunks_; }
  bool done() const { return done_markers_ > 0; }
  // The verdict once the connection has closed.
  AuditResult result() const;

 private:
  void event(std::string_view payload);
  void note(Verdict v, std::string detail);

  AuditExpectation expect_;
  std::string pending_;
  int64_t token_chunks_ = 0;
  int64_t finishes_ = 0;
  int64_t done_markers_ = 0;
  int64_t role_chunks_ = 0;
  int64_t usage_chunks_ = 0;
  int64_t usage_prompt_tokens_ = 0;
  int64_t usage_completion_tokens_ = 0;
  std::string finish_reason_;
  // The first problem seen while parsing, kept by severity (server error over duplicate over
  // inconsistency).
  Verdict problem_ = Verdict::kOk;
  std::string problem_detail_;
};

// A whole (not streamed) 200 response body.
AuditResult audit_response(std::string_view body, const AuditExpectation& expect);

}  // namespace handoff::cli
