#pragma once
// One choice of a request inside the engine: its tokens (prompt, then generated), how many of
// them the cache already holds, its blocks, and the per-choice sampling and detokenizing state.
// A request with n > 1 starts as one sequence (the leader); when its prompt is computed, the
// other n - 1 are forked from it, sharing its blocks.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/engine/request.h"
#include "handoff/engine/sampler.h"
#include "handoff/text/stream_decoder.h"

namespace handoff::engine {

struct Sequence {
  Sequence(uint64_t id, Request r, std::shared_ptr<RequestStream> s, int index = 0)
      : id(id),
        request_id(id),
        index(index),
        request(std::move(r)),
        stream(std::move(s)),
        sampler(request.seed),
        tokens(request.prompt),
        prompt_len(static_cast<int64_t>(request.prompt.size())),
        pending_forks(request.n - 1) {
    if (request.tool_call_grammar) grammar.emplace(*request.tool_call_grammar);
  }

  uint64_t id;          // arrival order: a larger id is younger
  uint64_t request_id;  // the leader's id, shared by the choices forked from it (cancel)
  int index;            // the choice index its events carry
  Request request;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;
  std::vector<int32_t> tokens;  // prompt + generated; a preempted sequence recomputes them all
  int64_t prompt_len;
  int64_t num_computed = 0;  // tokens whose cache rows are written
  cache::BlockTable blocks;
  int64_t preemptions = 0;
  int pending_forks;  // choices still to be forked from this one (at its first sample)

  PenaltyState penalties;
  // Where the output is in its forced tool call's grammar (empty: unconstrained).
  std::optional<text::ToolCallGrammarState> grammar;
  std::unique_ptr<text::StreamDecoder> decoder;  // null without a tokenizer
  std::string held_text;  // decoded text not yet emitted (it may begin a stop string)
  bool finished = false;

  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first_scheduled;  // its first step
  std::optional<std::chrono::steady_clock::time_point> first_token_time;
  std::optional<std::chrono::steady_clock::time_point> last_token_time;

  int64_t num_generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  // Tokens to feed before the next one can be sampled.
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace handoff::engine
