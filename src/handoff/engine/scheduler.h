#pragma once
// Decides what each step computes (continuous batching): running sequences first (a decode
// token each, or the next chunk of their prompt), then waiting ones join at the step boundary
// while the token budget, max_num_seqs and the cache allow. A long prompt is fed in chunks
// across steps (chunked prefill). When the cache runs out, the youngest running sequence is
// preempted by recompute: its blocks are freed and it waits again with everything it has
// (prompt + generated tokens) to be fed anew. With prefix caching a sequence that joins starts
// after the leading blocks the cache already holds for its tokens; a sequence about to write
// into a block it shares with a forked sibling gets its own copy (the step's block copies).
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/engine/sequence.h"

namespace handoff::engine {

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 512;  // token budget of one step
  int64_t max_num_seqs = 64;             // running sequences at most
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;  // first token fed (== seq->num_computed before the step)
  int64_t num_tokens = 0;
  // The chunk reaches the end of the known tokens: its last row's logits sample a new token.
  bool samples = false;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, cache::BlockManager& blocks);

  void add(std::unique_ptr<Sequence> seq);  // joins the waiting queue
  // A sequence forked from a running one (it holds its blocks already): joins the running ones.
  void add_running(std::unique_ptr<Sequence> seq);
  // The next step's chunks (empty when there is nothing to run). Reserves their blocks.
  std::vector<ScheduledChunk> schedule();
  // The block copies the last schedule() made: every rank applies them before the step runs.
  const std::vector<cache::BlockCopy>& copies() const { return copies_; }
  // Removes a finished or cancelled sequence wherever it is and frees its blocks.
  std::unique_ptr<Sequence> remove(uint64_t id);

  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  // Prefix caching, in tokens: looked up when a sequence joined, and found in the cache.
  int64_t prefix_queries() const { return prefix_queries_; }
  int64_t prefix_hits() const { return prefix_hits_; }
  bool empty() const { return waiting_.empty() && running_.empty(); }
  Sequence* find(uint64_t id) const;
  std::vector<Sequence*> all() const;

 private:
  void preempt(size_t running_index);
  // Running sequences plus the choices still to be forked from them (max_num_seqs counts both).
  int64_t seats() const;

  SchedulerOptions options_;
  cache::BlockManager& blocks_;
  std::deque<std::unique_ptr<Sequence>> waiting_;   // oldest first; preempted ones go in front
  std::vector<std::unique_ptr<Sequence>> running_;  // oldest first
  std::vector<cache::BlockCopy> copies_;
  int64_t preemptions_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace handoff::engine
