// Long-lived tensors carved from shared huge-page slabs: aligned, disjoint, each keeping its
// slab alive on its own, and large ones outside the slabs.
#include "handoff/tensor/huge_page_slab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "handoff/tensor/tensor.h"

namespace handoff::tensor {
namespace {

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()); }

TEST(HugePageSlab, SmallTensorsAreCarvedInSequenceFromAHugePageAlignedSlab) {
  // On a new thread the first buffer opens a slab, so where each one lands is known.
  std::thread([] {
    const Tensor a = Tensor::empty_long_lived({1000}, DType::kF8E4M3);
    const Tensor b = Tensor::empty_long_lived({3}, DType::kF32);
    const Tensor c = Tensor::empty_long_lived({64, 64}, DType::kBF16);
    EXPECT_EQ(address(a) % (size_t{2} << 20), 0u);
    EXPECT_EQ(address(b), address(a) + 1024);  // 1000 bytes rounded up to 64
    EXPECT_EQ(address(c), address(b) + 64);
    // A buffer above a quarter of a slab gets its own allocation, huge-page aligned too.
    const Tensor big = Tensor::empty_long_lived({(int64_t{8} << 20) + 1}, DType::kF8E4M3);
    EXPECT_EQ(address(big) % (size_t{2} << 20), 0u);
    const Tensor d = Tensor::empty_long_lived({5}, DType::kF32);
    EXPECT_EQ(address(d), address(c) + 64 * 64 * 2);  // the slab continues after it
  }).join();
}

TEST(HugePageSlab, TensorsStayDisjointAndIntactWhateverIsFreedFirst) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> size(0, 3 << 20);  // some span two slabs' ends
  std::vector<Tensor> tensors;
  for (int i = 0; i < 64; ++i) {
    tensors.push_back(Tensor::empty_long_lived({size(rng)}, DType::kF8E4M3));
    Tensor& t = tensors.back();
    EXPECT_EQ(address(t) % 64, 0u);
    std::memset(t.raw(), i, t.nbytes());
  }
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const Tensor& t : tensors)
    if (t.nbytes() > 0) spans.emplace_back(address(t), address(t) + t.nbytes());
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  // Drop every other tensor (in a shuffled order); the rest keep their slabs and contents.
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < order.size(); i += 2) tensors[order[i]] = Tensor();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    const auto* p = t.data<uint8_t>();
    EXPECT_TRUE(std::all_of(p, p + t.nbytes(), [&](uint8_t v) { return v == i; })) << i;
  }
}

}  // namespace
}  // namespace handoff::tensor
