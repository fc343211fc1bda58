#include "handoff/tensor/huge_page_slab.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "handoff/error.h"

namespace handoff::tensor {
namespace {

constexpr size_t kSlabBytes = size_t{32} << 20;
// Larger buffers get their own huge-page-aligned allocation: at most a quarter of a slab is
// left unused when a buffer does not fit in the rest of one.
constexpr size_t kMaxSlabbed = kSlabBytes / 4;
constexpr size_t kAlign = 64;

struct Slab {
  std::shared_ptr<void> memory;
  size_t used = 0;
};

}  // namespace

void* allocate_huge_pages_raw(size_t bytes) {
  const size_t rounded =
      std::max(kHugePageBytes, (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) fail("out of memory allocating {} bytes", bytes);
  ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint; may be refused
  return p;
}

std::shared_ptr<void> allocate_on_huge_pages(size_t bytes) {
  return {allocate_huge_pages_raw(bytes), std::free};
}

std::shared_ptr<void> allocate_long_lived(size_t bytes) {
  if (bytes > kMaxSlabbed) return allocate_on_huge_pages(bytes);
  thread_local Slab slab;
  const size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
  if (!slab.memory || slab.used + size > kSlabBytes) slab = {allocate_on_huge_pages(kSlabBytes), 0};
  void* p = static_cast<char*>(slab.memory.get()) + slab.used;
  slab.used += size;
  return {slab.memory, p};  // shares the slab's ownership
}

}  // namespace handoff::tensor
