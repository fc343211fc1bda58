#include "handoff/tensor/tensor.h"

#include <cstdlib>
#include <cstring>

#include "handoff/error.h"
#include "handoff/tensor/huge_page_slab.h"

namespace handoff::tensor {
namespace {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

}  // namespace

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::optional<int64_t> checked_numel(const Shape& shape) {
  // Zero dimensions are skipped in the overflow check: the strides of [0, 2^62, 4] overflow
  // even though it has no elements.
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0)
      empty = true;
    else if (__builtin_mul_overflow(nonzero, d, &nonzero))
      return std::nullopt;
  }
  return empty ? 0 : nonzero;
}

int64_t shape_numel(const Shape& shape) {
  const std::optional<int64_t> n = checked_numel(shape);
  if (!n)
    fail("shape {} has a negative dimension or more elements than int64 holds", shape_str(shape));
  return *n;
}

namespace {

size_t checked_bytes(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) fail("Tensor::empty: negative dimension in {}", shape_str(shape));
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(shape_numel(shape)), dtype_size(dtype), &bytes))
    fail("Tensor::empty: {} {} needs more bytes than size_t holds", dtype_name(dtype),
         shape_str(shape));
  return bytes;
}

}  // namespace

Tensor Tensor::owning(std::shared_ptr<void> storage, Shape shape, DType dtype) {
  Tensor t;
  t.base_ = storage.get();
  t.storage_ = std::move(storage);
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  const size_t bytes = checked_bytes(shape, dtype);
  // Large tensors (caches, activations of long prompts) sit on transparent huge pages: 512x
  // fewer page faults when first written and fewer TLB misses when streamed.
  if (bytes >= kHugePageBytes)
    return owning(allocate_on_huge_pages(bytes), std::move(shape), dtype);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) fail("out of memory allocating {} bytes for a tensor", bytes);
  return owning(std::shared_ptr<void>(p, std::free), std::move(shape), dtype);
}

Tensor Tensor::empty_long_lived(Shape shape, DType dtype) {
  const size_t bytes = checked_bytes(shape, dtype);
  return owning(allocate_long_lived(bytes), std::move(shape), dtype);
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.base_, 0, t.nbytes());
  return t;
}

Tensor Tensor::from_mapping(std::shared_ptr<MappedFile> file, size_t offset, Shape shape,
                            DType dtype) {
  Tensor t;
  t.base_ = const_cast<uint8_t*>(file->data() + offset);
  t.storage_ = std::shared_ptr<void>(file, const_cast<uint8_t*>(file->data()));
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.of_file_ = true;
  return t;
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  if (d < 0) d += dim();
  if (d < 0 || d >= dim() || start < 0 || end < start || end > shape_[d])
    fail("Tensor::slice({}, {}, {}) out of range for shape {}", d, start, end, shape_str(shape_));
  Tensor t = *this;
  t.base_ = static_cast<uint8_t*>(base_) + start * strides_[d] * dtype_size(dtype_);
  t.shape_[d] = end - start;
  return t;
}

Tensor Tensor::select(int64_t i) const {
  Tensor t = slice(0, i, i + 1);
  t.shape_.erase(t.shape_.begin());
  t.strides_.erase(t.strides_.begin());
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (!is_contiguous()) fail("Tensor::reshape needs a contiguous tensor");
  if (shape_numel(shape) != numel())
    fail("Tensor::reshape {} -> {}: element count differs", shape_str(shape_), shape_str(shape));
  Tensor t = *this;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) {
    Tensor t = empty(shape_, dtype_);
    std::memcpy(t.base_, base_, nbytes());
    return t;
  }
  if (dim() != 2) fail("Tensor::contiguous: only 2-d strided views are supported");
  Tensor t = empty(shape_, dtype_);
  const size_t row_bytes = static_cast<size_t>(shape_[1]) * dtype_size(dtype_);
  if (strides_[1] != 1) fail("Tensor::contiguous: inner dimension must be dense");
  for (int64_t r = 0; r < shape_[0]; ++r)
    std::memcpy(static_cast<uint8_t*>(t.base_) + r * row_bytes,
                static_cast<const uint8_t*>(base_) + r * strides_[0] * dtype_size(dtype_),
                row_bytes);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  const Tensor src = is_contiguous() ? *this : contiguous();
  if (dtype == dtype_) return src.contiguous();
  Tensor f32 = empty(shape_, DType::kF32);
  convert_to_f32(dtype_, src.base_, f32.data<float>(), static_cast<size_t>(numel()));
  if (dtype == DType::kF32) return f32;
  Tensor out = empty(shape_, dtype);
  convert_from_f32(f32.data<float>(), dtype, out.base_, static_cast<size_t>(numel()));
  return out;
}

}  // namespace handoff::tensor
