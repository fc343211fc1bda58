#include "handoff/engine/scheduler.h"

#include <algorithm>

#include "handoff/error.h"

namespace handoff::engine {

Scheduler::Scheduler(const SchedulerOptions& options, cache::BlockManager& blocks)
    : options_(options), blocks_(blocks) {
  if (options.max_num_batched_tokens < 1) fail_input("max_num_batched_tokens must be >= 1");
  if (options.max_num_seqs < 1) fail_input("max_num_seqs must be >= 1");
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

void Scheduler::add_running(std::unique_ptr<Sequence> seq) { running_.push_back(std::move(seq)); }

int64_t Scheduler::seats() const {
  int64_t n = 0;
  for (const auto& s : running_) n += 1 + s->pending_forks;
  return n;
}

void Scheduler::preempt(size_t i) {
  std::unique_ptr<Sequence> seq = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<int64_t>(i));
  blocks_.release(seq->blocks);
  seq->num_computed = 0;
  ++seq->preemptions;
  ++preemptions_;
  // In front, and ahead of younger waiting ones: it was admitted before them. Waiting is kept
  // in arrival order, so it goes before the first younger sequence.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const auto& w) { return w->id > seq->id; });
  waiting_.insert(pos, std::move(seq));
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> out;
  copies_.clear();
  int64_t budget = options_.max_num_batched_tokens;
  bool preempted = false;
  // Running sequences, oldest first: they keep their place; the youngest gives way.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i].get();
    const int64_t n = std::min(seq->pending(), budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool dropped_self = false;
    while (!blocks_.can_write(seq->blocks, seq->num_computed, seq->num_computed + n)) {
      // Preempt the youngest running sequence that is not already in this step.
      size_t victim = running_.size() - 1;
      preempted = true;
      if (victim == i) {
        preempt(i);
        dropped_self = true;
        break;
      }
      preempt(victim);
    }
    if (dropped_self) break;  // everything after i was younger and is gone too
    blocks_.prepare_write(seq->blocks, seq->num_computed, seq->num_computed + n, copies_);
    out.push_back({seq, seq->num_computed, n,
                   seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
    budget -= n;
    ++i;
  }
  // Waiting sequences join while nothing had to give way this step.
  int64_t seats_taken = seats();
  while (!preempted && !waiting_.empty() && budget > 0 &&
         seats_taken + 1 + waiting_.front()->pending_forks <= options_.max_num_seqs) {
    Sequence* seq = waiting_.front().get();
    // A sequence with nothing computed starts after the blocks the cache holds for its tokens.
    const bool looked_up = seq->num_computed == 0 && seq->blocks.empty();
    const int64_t hit = looked_up ? blocks_.acquire_cached_prefix(seq->blocks, seq->tokens) : 0;
    if (looked_up) seq->num_computed = hit;
    const int64_t n = std::min(seq->pending(), budget);
    if (!blocks_.can_write(seq->blocks, seq->num_computed, seq->num_computed + n)) {
      if (looked_up) {  // it waits; the blocks it found stay cached
        blocks_.release(seq->blocks);
        seq->num_computed = 0;
      }
      break;
    }
    if (looked_up && blocks_.prefix_caching()) {
      prefix_queries_ += static_cast<int64_t>(seq->tokens.size());
      prefix_hits_ += hit;
    }
    blocks_.prepare_write(seq->blocks, seq->num_computed, seq->num_computed + n, copies_);
    seats_taken += 1 + seq->pending_forks;
    out.push_back({seq, seq->num_computed, n,
                   seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return out;
}

std::unique_ptr<Sequence> Scheduler::remove(uint64_t id) {
  std::unique_ptr<Sequence> seq;
  for (size_t i = 0; i < running_.size(); ++i)
    if (running_[i]->id == id) {
      seq = std::move(running_[i]);
      running_.erase(running_.begin() + static_cast<int64_t>(i));
      break;
    }
  if (!seq)
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
      if ((*it)->id == id) {
        seq = std::move(*it);
        waiting_.erase(it);
        break;
      }
  if (seq) blocks_.release(seq->blocks);
  return seq;
}

Sequence* Scheduler::find(uint64_t id) const {
  for (const auto& s : running_)
    if (s->id == id) return s.get();
  for (const auto& s : waiting_)
    if (s->id == id) return s.get();
  return nullptr;
}

std::vector<Sequence*> Scheduler::all() const {
  std::vector<Sequence*> v;
  for (const auto& s : running_) v.push_back(s.get());
  for (const auto& s : waiting_) v.push_back(s.get());
  return v;
}

}  // namespace handoff::engine
