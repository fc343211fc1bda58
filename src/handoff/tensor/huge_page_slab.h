#pragma once
// Storage for buffers that live as long as the model (packed weights), on transparent huge
// pages whatever their size. A 2 MiB-aligned allocation of its own per buffer would waste most
// of a huge page on each expert matrix (FP8 bench-moe: 0.5-1 MiB apiece), and below 2 MiB the
// heap leaves them on 4 KiB pages, where decode's weight stream misses the TLB every 4 KiB; on a
// KVM guest each miss is a two-level page walk, and FP8 decode ran at 9-30 ms per token from run
// to run instead of 9-10 (docs/performance.md). So small buffers are carved in sequence out of
// shared 32 MiB slabs, each slab kept alive by the buffers in it.
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace handoff::tensor {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// An uninitialised buffer of `bytes` of its own, 2 MiB aligned and rounded up to whole huge
// pages, advised onto transparent huge pages (a hint the kernel may refuse).
std::shared_ptr<void> allocate_on_huge_pages(size_t bytes);

// A 64-byte aligned, uninitialised buffer of `bytes`, owned by the returned pointer. The current
// slab is the calling thread's (loading ranks do not contend); a freed buffer's space is not
// reused, so the call is for long-lived data only.
std::shared_ptr<void> allocate_long_lived(size_t bytes);

// Raw halves of allocate_on_huge_pages, for containers: release with std::free.
void* allocate_huge_pages_raw(size_t bytes);

// For growable buffers: from kHugePageBytes up, on huge pages of their own; below, the heap
// (64-byte aligned).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugePageBytes) return static_cast<T*>(allocate_huge_pages_raw(bytes));
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace handoff::tensor
