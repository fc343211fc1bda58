#pragma once
// Reusable f32 buffers for one module's step. They grow to the largest step seen and are then
// reused, so the step loop does not allocate in steady state.
#include <cstddef>
#include <vector>

#include "handoff/tensor/huge_page_slab.h"

namespace handoff::model {

class Scratch {
 public:
  // `stagger`: where this Scratch's buffers start within a page, in cache lines (see get).
  explicit Scratch(size_t stagger = 0) : stagger_(stagger) {}

  // Buffers of 2 MiB and more (those profile_run or a long prefill grows) sit on huge pages:
  // a decode step touches the first row of each of dozens of them, and on 4 KiB pages of a
  // virtual machine each touch was a TLB miss with a nested page walk, 15-19 % of a bench-moe
  // decode step on Zen 5 (docs/performance.md). Such buffers all start page-aligned, so their
  // first rows would also share L1 sets and alias at 4 KiB: each starts its own number of
  // cache lines in (index and stagger).
  float* get(size_t index, size_t n) {
    if (buffers_.size() <= index) buffers_.resize(index + 1);
    auto& b = buffers_[index];
    const size_t offset = kLineFloats * ((stagger_ + index * kIndexStride) % kLinesPerPage);
    if (b.size() < offset + n) b.resize(offset + n);
    return b.data() + offset;
  }

  // A per-thread buffer for work inside parallel regions (OpenMP threads persist).
  static float* thread_local_buffer(size_t index, size_t n) {
    thread_local std::vector<std::vector<float>> buffers;
    if (buffers.size() <= index) buffers.resize(index + 1);
    auto& b = buffers[index];
    if (b.size() < n) b.resize(n);
    return b.data();
  }

 private:
  static constexpr size_t kLineFloats = 64 / sizeof(float);
  static constexpr size_t kLinesPerPage = 4096 / 64;
  static constexpr size_t kIndexStride = 5;  // co-prime to kLinesPerPage: 64 distinct offsets
  size_t stagger_;
  std::vector<std::vector<float, tensor::HugePageAllocator<float>>> buffers_;
};

// One model's layer scratch, a Scratch per module kind. Layers run one after another, so all of
// them share these buffers: activation memory is one layer's, not one copy per layer (on
// bench-moe the 12 copies held 1.3 GB at 512-token steps).
struct LayerScratch {
  // Staggered apart, so that the kinds' buffers of one index start in different lines too.
  Scratch layer{0}, attention{16}, indexer{32}, moe{48};
};

}  // namespace handoff::model
