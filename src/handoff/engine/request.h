#pragma once
// What a client asks the engine for, and what the engine streams back to it.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "handoff/engine/sampler.h"

namespace handoff::engine {

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  uint64_t seed = 0;
  int64_t max_tokens = 16;
  std::vector<std::string> stop;        // stop strings, checked on the decoded text
  std::vector<int32_t> stop_token_ids;  // besides eos
  bool ignore_eos = false;
  int top_logprobs = -1;  // -1: no logprobs; 0..20: the sampled token's + this many
  // How special tokens show in the text (vLLM's defaults: dropped). A tool-call parser that
  // needs special tokens turns skipping off for its request.
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
};

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;
};

// One streamed piece: a sampled token (its text may be held back while it could start a stop
// string), or the end of the request.
struct RequestEvent {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::optional<std::string> finish_reason;  // "stop", "length", "abort"
  std::string error;                         // set when the engine failed the request
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // On the final event: seconds from arrival to the first step (queue), to the first token
  // (ttft; 0 when none came) and to the finish (e2e).
  double queue_s = 0, ttft_s = 0, e2e_s = 0;
};

// The engine thread pushes, one client thread pops. Thread-safe.
class RequestStream {
 public:
  explicit RequestStream(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }

  void push(RequestEvent event);
  // Waits up to `timeout` for the next event; false when none came.
  bool pop(RequestEvent& event, std::chrono::milliseconds timeout);
  // Blocks until the final event and returns every event merged into one.
  RequestEvent wait_all();
  // Adds the events that arrive within `timeout` to `all`; true once the request finished.
  bool collect(RequestEvent& all, std::chrono::milliseconds timeout);

 private:
  uint64_t id_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
};

}  // namespace handoff::engine
