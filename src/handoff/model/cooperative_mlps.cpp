#include "handoff/model/cooperative_mlps.h"

#include <algorithm>

#include "handoff/error.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::model {
namespace {

// Blocks claimed at once: two 64-row blocks of a routed expert's gate_up are 256 KiB at bf16,
// long enough that a claim's call overhead is noise, short enough to even out the end.
constexpr int64_t kClaimBlocks = 2;

}  // namespace

CooperativeMlps::CooperativeMlps(size_t capacity) : jobs_(capacity) { order_.reserve(capacity); }

void CooperativeMlps::add(const Mlp& mlp, const float* x, int64_t rows, float* y, float* scratch) {
  if (count_ == jobs_.size()) fail("CooperativeMlps: more than {} MLPs in a step", jobs_.size());
  if (!mlp.small_m(rows)) fail("CooperativeMlps: {} rows are not on the small-M kernels", rows);
  Job& j = jobs_[count_++];
  j.mlp = &mlp;
  j.x = x;
  j.rows = rows;
  j.y = y;
  j.gate_up = scratch;
  j.act = scratch + rows * 2 * mlp.intermediate();
  j.gate_up_blocks = mlp.gate_up().row_blocks();
  j.blocks = j.gate_up_blocks + mlp.down().row_blocks();
  j.bytes = mlp.weight_bytes();
  // Published to the region's threads by parallel_for.
  j.next.store(0, std::memory_order_relaxed);
  j.gate_up_done.store(0, std::memory_order_relaxed);
  j.act_ready.store(false, std::memory_order_relaxed);
}

void CooperativeMlps::run_after(const void* add_more, void (*call)(const void*)) {
  if (add_more == nullptr) {
    if (count_ == 0) return;
    order_.clear();
    for (size_t i = 0; i < count_; ++i) order_.push_back(i);
    const auto slots = static_cast<int64_t>(std::min<size_t>(tensor::num_threads(), count_));
    share_out(slots);
    tensor::parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) run_slot(s, slots);
    });
    return;
  }
  const size_t early = count_;
  const int64_t slots = tensor::num_threads();
  // Until slot 0 shares out, every share is empty: if add_more throws, the others only finish
  // the early MLPs and leave.
  order_.clear();
  first_job_.assign(static_cast<size_t>(slots) + 1, 0);
  shared_out_.store(false, std::memory_order_relaxed);
  // Slot 0 is the calling thread's own chunk of the region (or taken by a thread that finished
  // its own), never queued behind a slot that waits for it.
  tensor::parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      if (s == 0) {
        struct Publish {
          std::atomic<bool>& done;
          ~Publish() { done.store(true, std::memory_order_release); }
        } publish{shared_out_};
        call(add_more);
        // The early MLPs go last, into the last slot's share: its thread has started on them.
        for (size_t i = early; i < count_; ++i) order_.push_back(i);
        for (size_t i = 0; i < early; ++i) order_.push_back(i);
        share_out(slots);
      } else {
        for (size_t i = 0; i < early; ++i) drain(jobs_[i]);
        tensor::wait_until([&] { return shared_out_.load(std::memory_order_acquire); });
      }
      run_slot(s, slots);
    }
  });
}

void CooperativeMlps::share_out(int64_t slots) {
  // Slot s takes the MLPs whose byte midpoints fall in its s-th of the total: contiguous
  // shares of about equal bytes.
  size_t total = 0;
  for (size_t i : order_) total += jobs_[i].bytes;
  first_job_.assign(static_cast<size_t>(slots) + 1, order_.size());
  size_t before = 0, next_slot = 0;
  for (size_t place = 0; place < order_.size(); ++place) {
    const size_t bytes = jobs_[order_[place]].bytes;
    const double mid = static_cast<double>(before) + 0.5 * static_cast<double>(bytes);
    const auto slot =
        std::min(static_cast<size_t>(slots) - 1,
                 static_cast<size_t>(mid * static_cast<double>(slots) /
                                     static_cast<double>(std::max<size_t>(total, 1))));
    for (; next_slot <= slot; ++next_slot) first_job_[next_slot] = place;
    before += bytes;
  }
}

void CooperativeMlps::run_slot(int64_t slot, int64_t slots) {
  const auto s = static_cast<size_t>(slot);
  for (size_t p = first_job_[s]; p < first_job_[s + 1]; ++p) drain(jobs_[order_[p]]);
  for (int64_t k = 1; k < slots; ++k) {
    const auto other = static_cast<size_t>((slot + k) % slots);
    for (size_t p = first_job_[other + 1]; p-- > first_job_[other];) drain(jobs_[order_[p]]);
  }
}

void CooperativeMlps::drain(Job& job) {
  while (true) {
    const int64_t b0 = job.next.fetch_add(kClaimBlocks, std::memory_order_relaxed);
    if (b0 >= job.blocks) return;
    compute(job, b0, std::min(job.blocks, b0 + kClaimBlocks));
  }
}

void CooperativeMlps::compute(Job& job, int64_t b0, int64_t b1) {
  const int64_t g = job.gate_up_blocks;
  if (b0 < g) {
    const int64_t e = std::min(b1, g);
    try {
      job.mlp->gate_up().forward_blocks(job.x, job.rows, job.gate_up, b0, e);
    } catch (...) {
      // The region rethrows this; nobody may wait for an activation that never comes.
      job.act_ready.store(true, std::memory_order_release);
      throw;
    }
    // The thread that finishes gate_up's last blocks activates; down's blocks wait for it.
    if (job.gate_up_done.fetch_add(e - b0, std::memory_order_acq_rel) + (e - b0) == g) {
      job.mlp->activate(job.gate_up, job.rows, job.act);
      job.act_ready.store(true, std::memory_order_release);
    }
  }
  if (b1 > g) {
    // Only gate_up blocks claimed by a running thread are outstanding, so this wait is short.
    tensor::wait_until([&] { return job.act_ready.load(std::memory_order_acquire); });
    job.mlp->down().forward_blocks(job.act, job.rows, job.y, std::max(b0, g) - g, b1 - g);
  }
}

}  // namespace handoff::model
