#pragma once
// Runs prompts one at a time through the model: (chunked) prefill, then one token per decode
// step, greedy or sampled, optionally teacher-forced, optionally recording everything a golden
// comparison needs.
#include <cstdint>
#include <functional>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/cache/paged_cache.h"
#include "handoff/engine/sampler.h"
#include "handoff/model/model.h"

namespace handoff::engine {

struct GenerationOptions {
  int64_t max_new_tokens = 16;
  int64_t prefill_chunk = 0;  // 0: the whole prompt in one step
  SamplingParams sampling;
  bool record = false;  // keep logits and traces
  // Sample only ids below this (the tokenizer's size when the model's vocab is padded past
  // it); 0: the whole vocabulary.
  int64_t sample_vocab = 0;
  // Fault injection for tests: world rank `fail_rank` throws before its forward number
  // `fail_at_step` (0-based, counting every forward this generator ran).
  int fail_rank = -1;
  int64_t fail_at_step = -1;
  // Called with each generated token as soon as it is sampled (e.g. to print it).
  std::function<void(int32_t)> on_token;
};

struct GenerationResult {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  // Recorded only with options.record:
  std::vector<std::vector<float>> prefill_logits;                       // [T][V]
  std::vector<std::vector<float>> decode_logits;                        // [n][V]
  std::vector<std::vector<std::vector<int32_t>>> indexer_topk_prefill;  // [layer][t]
  std::vector<std::vector<std::vector<int32_t>>> indexer_topk_decode;   // [step][layer]
  std::vector<std::vector<std::vector<int32_t>>> experts_prefill;       // [layer][t]
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

class Generator {
 public:
  // Runs one forward, honouring fault injection.
  tensor::Tensor forward(const GenerationOptions& options, const model::SequenceChunk& chunk,
                         model::StepTrace* trace);

  // Sizes the cache for sequences of up to max_context tokens. step_tokens (0: max_context) is
  // the most tokens one forward carries: the profiling pass that sizes the scratch runs that
  // many, so a long context costs cache, not a whole-context forward.
  Generator(model::Model& model, int64_t max_context, int64_t block_size = 16,
            int64_t step_tokens = 0);

  // `forced`: the tokens to feed at each decode step instead of the sampled one (empty: none).
  GenerationResult run(const std::vector<int32_t>& prompt, const GenerationOptions& options,
                       Sampler& sampler, const std::vector<int32_t>& forced = {});

  const cache::PagedCache& cache() const { return cache_; }

 private:
  model::Model& model_;
  int64_t max_context_;
  cache::BlockManager blocks_;
  cache::PagedCache cache_;
  int64_t forwards_ = 0;
};

}  // namespace handoff::engine
