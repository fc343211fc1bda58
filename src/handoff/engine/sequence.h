#pragma once
// One request inside the engine: its tokens (prompt, then generated), how many of them the
// cache already holds, its blocks, and the per-request sampling and detokenizing state.
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
  Sequence(uint64_t id, Request r, std::shared_ptr<RequestStream> s)
      : id(id),
        request(std::move(r)),
        stream(std::move(s)),
        sampler(request.seed),
        tokens(request.prompt),
        prompt_len(static_cast<int64_t>(request.prompt.size())) {}

  uint64_t id;  // arrival order: a larger id is younger
  Request request;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;
  std::vector<int32_t> tokens;  // prompt + generated; a preempted sequence recomputes them all
  int64_t prompt_len;
  int64_t num_computed = 0;  // tokens whose cache rows are written
  cache::BlockTable blocks;
  int64_t preemptions = 0;

  PenaltyState penalties;
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
