#pragma once
// What one forward step computes: chunks of new tokens from one or more sequences, each
// continuing its sequence at `start_pos` and writing the cache through its block table.
#include <cstdint>
#include <span>
#include <vector>

#include "handoff/cache/block_manager.h"

namespace handoff::model {

struct SequenceChunk {
  std::span<const int32_t> tokens;
  int64_t start_pos = 0;
  const cache::BlockTable* blocks = nullptr;
  bool all_logits = false;  // logits for every token of the chunk, not just the last
};

// Per-token metadata the layers share, derived once per step from the chunks.
struct StepMeta {
  struct Sequence {
    int64_t start_pos = 0;
    int64_t num_tokens = 0;
    int64_t first_token = 0;         // row of its first token in the step's activations
    std::vector<int64_t> key_slots;  // cache rows of positions 0 .. start_pos + num_tokens - 1
  };
  std::vector<Sequence> sequences;
  std::vector<int32_t> token_seq;   // sequence index of each token row
  std::vector<int64_t> token_pos;   // absolute position of each token row
  std::vector<int64_t> token_slot;  // cache row each token writes
  int64_t num_tokens() const { return static_cast<int64_t>(token_pos.size()); }
};

// Optional record of the decisions a step made, for dumps and golden tests.
struct StepTrace {
  // [layer][token row] -> sorted key positions the indexer selected
  std::vector<std::vector<std::vector<int32_t>>> indexer_topk;
  // [layer][token row] -> sorted routed expert ids (empty for dense layers)
  std::vector<std::vector<std::vector<int32_t>>> experts;
};

}  // namespace handoff::model
