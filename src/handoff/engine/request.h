#pragma once
// What a client asks the engine for, and what the engine streams back to it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "handoff/engine/sampler.h"
#include "handoff/text/tool_call_grammar.h"

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
  // Choices sampled from the prompt: they share its cache blocks (the prompt is computed once)
  // and each samples on from its first token (seed + its index mixes its sampler).
  int n = 1;
  // A forced tool call (tool_choice "required" or a named function): the output must be a text
  // of this grammar, and ends ("stop") when the call is complete. Null: unconstrained.
  std::shared_ptr<const text::ToolCallGrammar> tool_call_grammar;
};

// The sampler seed of choice k of a request seeded `seed` (choice 0 keeps the seed itself).
inline uint64_t choice_seed(uint64_t seed, int k) {
  return seed + static_cast<uint64_t>(k) * 0x9e3779b97f4a7c15ULL;
}

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
  int index = 0;  // the choice it belongs to
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
  // Seconds from the request's arrival to when the engine made this event (a token's: its
  // sampling), so a consumer that reads events late still times each token.
  double at_s = 0;
};

// The engine thread pushes, one client thread pops. Thread-safe. One stream carries every
// choice of a request (n > 1), or of several requests (a batch of prompts), each event tagged
// with its choice's index in 0 .. num_choices - 1.
class RequestStream {
 public:
  explicit RequestStream(uint64_t id, int num_choices = 1) : id_(id), num_choices_(num_choices) {}
  uint64_t id() const { return id_; }
  int num_choices() const { return num_choices_; }

  void push(RequestEvent event);
  // From now on only an event that ends a choice wakes the consumer; the others wait in the
  // queue. For consumers that need no token as it comes (a non-streamed reply, a benchmark
  // timing tokens by at_s): a wake-up per token cost the engine thread ~60 us of a ~8 ms
  // decode step on the 2-core guest (the consumer's thread took a core from the step).
  void wake_only_at_end() { wake_only_at_end_.store(true, std::memory_order_relaxed); }
  // Waits up to `timeout` for the next event; false when none came.
  bool pop(RequestEvent& event, std::chrono::milliseconds timeout);
  // Blocks until every choice's final event and returns choice 0's events merged into one.
  RequestEvent wait_all();
  // The same for every choice: element i holds choice i's events merged.
  std::vector<RequestEvent> wait_all_choices();
  // Adds the events that arrive within `timeout` to `all` (one element per choice; resized to
  // num_choices); true once every choice finished.
  bool collect(std::vector<RequestEvent>& all, std::chrono::milliseconds timeout);
  // The same for a one-choice stream.
  bool collect(RequestEvent& all, std::chrono::milliseconds timeout);

 private:
  uint64_t id_;
  int num_choices_;
  int finished_ = 0;  // choices whose final event collect() has seen
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
  std::atomic<bool> wake_only_at_end_{false};
};

}  // namespace handoff::engine
