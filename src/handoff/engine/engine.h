#pragma once
// The serving engine: a request queue in front of a Scheduler, and a background thread that
// runs steps through an Executor, samples each finished row with its request's parameters and
// streams tokens back. Requests join running batches at step boundaries (continuous batching).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/engine/grammar_mask.h"
#include "handoff/engine/request.h"
#include "handoff/engine/scheduler.h"
#include "handoff/engine/stats.h"
#include "handoff/error.h"
#include "handoff/runtime/executor.h"
#include "handoff/text/tokenizer.h"

namespace handoff::engine {

// 400 context_length_exceeded: the prompt (plus max_tokens) does not fit the context.
class PromptTooLongError : public InputError {
 public:
  using InputError::InputError;
};
// 503: the queue is full or the engine is shutting down.
class OverloadedError : public Error {
 public:
  using Error::Error;
};

struct EngineOptions {
  SchedulerOptions scheduler;
  int64_t block_size = 16;
  int64_t num_blocks = 2048;     // cache capacity = num_blocks * block_size tokens
  int64_t max_model_len = 4096;  // prompt + generated tokens of one request
  int64_t max_waiting = 1024;    // queued requests beyond this are refused (503)
  // Full blocks are kept by the hash of their tokens and reused by later sequences that begin
  // with the same tokens (--no-prefix-caching turns it off).
  bool prefix_caching = true;
};

class Engine {
 public:
  // `tokenizer` (may be null: no text, no stop strings) must outlive the engine.
  Engine(const EngineOptions& options, std::unique_ptr<runtime::Executor> executor,
         const text::Tokenizer* tokenizer);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const model::ModelConfig& config() const { return executor_->config(); }
  const EngineOptions& options() const { return options_; }

  // Starts / stops the background step loop. stop() ends every unfinished request ("abort").
  void start();
  void stop();

  // Thread-safe. Validates the request (InputError, PromptTooLongError, OverloadedError) and
  // queues it; events arrive on the returned stream (its id is the request's), one choice per
  // index 0 .. request.n - 1.
  std::shared_ptr<RequestStream> submit(Request request);
  // The same into a stream shared with other requests (a batch of prompts): its choices carry
  // indices first_index .. first_index + n - 1 of `stream`. Returns the request's id.
  uint64_t submit(Request request, const std::shared_ptr<RequestStream>& stream, int first_index);
  // Thread-safe: ends the request (every choice: "abort") and frees its blocks at the next step
  // boundary.
  void cancel(uint64_t id);

  // The first step failure, after which the engine serves nothing (every request fails, submit
  // throws OverloadedError): an executor that threw has lost a rank. Empty while healthy.
  std::string failure() const;
  // Called once, from the step thread, when the engine fails (before start()).
  void on_failure(std::function<void(const std::string&)> callback);

  // Test-only (HANDOFF_TEST_HOOKS): the k-th request submitted from now on generates
  // scripts[k % size] (then samples as usual). Call before start(). Each id must be in the
  // vocabulary (InputError).
  void script_outputs(std::vector<std::vector<int32_t>> scripts);

  // Runs one step in the calling thread (only while the loop is not started); false when idle.
  bool step();
  // Steps until every submitted request has finished (tests, offline bench).
  void run_until_idle();

  EngineStats stats() const;
  // Collectives counted so far by every rank of the model (empty for one rank), summed.
  runtime::CollectiveCounts comm_counts() const { return executor_->comm_counts(); }
  int64_t in_flight() const;

 private:
  std::vector<std::vector<int32_t>> scripts_;  // test-only, see script_outputs
  size_t scripted_requests_ = 0;
  void loop();
  void take_incoming();
  // Validates; returns the request's id. Creates the stream when `stream` is null.
  uint64_t enqueue(Request request, std::shared_ptr<RequestStream>& stream, int first_index);
  void sample(Sequence& seq, const float* logits);
  // Masks in row_ the tokens a forced tool call does not allow next (copying logits there
  // first unless `row` already is row_). Returns the row to sample, or null when no token fits
  // (the request then fails).
  const float* constrain(Sequence& seq, const float* row);
  // At a leader's first sample: forks its other choices, which share its blocks, and samples
  // their first tokens from the same logits.
  void fork_choices(Sequence& leader, const float* logits);
  void finish(Sequence& seq, RequestEvent& event, const std::string& reason);
  void fail_all(const std::string& message);
  // Copies the scheduler's and the cache's gauges into stats_: called after every change, so
  // /metrics never shows a finished request as running or its freed blocks as used.
  void refresh_gauges();

  EngineOptions options_;
  std::unique_ptr<runtime::Executor> executor_;
  const text::Tokenizer* tokenizer_;
  std::optional<int32_t> eos_;
  cache::BlockManager blocks_;
  Scheduler scheduler_;  // the step thread's alone

  mutable std::mutex mutex_;  // guards the fields below
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Sequence>> incoming_;
  std::set<uint64_t> cancelled_;
  uint64_t next_id_ = 1;
  int64_t in_flight_ = 0;
  bool stopping_ = false;
  std::string failure_;
  EngineStats stats_;
  std::function<void(const std::string&)> on_failure_;

  std::vector<float> row_;                   // penalised / masked copy of a logits row
  std::unique_ptr<TokenTable> token_table_;  // token bytes for forced tool calls (with a tokenizer)
  std::vector<uint8_t> allowed_;             // the tokens a forced tool call allows next
  runtime::Step step_;                       // the step being run (reused: no allocation per step)
  std::vector<Sequence*> forked_;            // choices forked during this step
  std::thread thread_;
};

}  // namespace handoff::engine
