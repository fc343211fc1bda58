#pragma once
// A strided n-d array over shared storage: owned (64-byte aligned heap) or a view into a
// memory-mapped file. Views share storage and never copy.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "handoff/tensor/dtype.h"
#include "handoff/tensor/mapped_file.h"

namespace handoff::tensor {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);
// The element count, or nullopt when a dimension is negative or the product leaves int64 (a
// hostile header or config can declare such shapes).
std::optional<int64_t> checked_numel(const Shape& shape);
// The element count; throws Error when checked_numel has none.
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised owned storage.
  static Tensor empty(Shape shape, DType dtype);
  // Uninitialised storage on huge pages for data kept as long as the model (packed weights),
  // shared with other such tensors (huge_page_slab.h): never for temporaries.
  static Tensor empty_long_lived(Shape shape, DType dtype);
  static Tensor zeros(Shape shape, DType dtype);
  // A view of `file` bytes [offset, offset + numel*size); the caller validated the range.
  static Tensor from_mapping(std::shared_ptr<MappedFile> file, size_t offset, Shape shape,
                             DType dtype);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const { return shape_.at(d < 0 ? d + dim() : d); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  // Whether the elements are (a view of) a mapped file's bytes rather than memory of its own:
  // such pages may be dropped and faulted back in (Checkpoint::release_pages).
  bool is_view_of_file() const { return of_file_; }

  void* raw() { return base_; }
  const void* raw() const { return base_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(base_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(base_);
  }

  // View of rows [start, end) along dimension `d`.
  Tensor slice(int64_t d, int64_t start, int64_t end) const;
  // View of index `i` along dimension 0, dropping that dimension.
  Tensor select(int64_t i) const;
  // Same storage, new shape; requires a contiguous tensor.
  Tensor reshape(Shape shape) const;
  // Contiguous copy converted to `dtype` (float types only).
  Tensor to(DType dtype) const;
  // Contiguous copy with the same dtype.
  Tensor contiguous() const;

 private:
  static Tensor owning(std::shared_ptr<void> storage, Shape shape, DType dtype);
  std::shared_ptr<void> storage_;  // keeps the buffer or mapping alive
  void* base_ = nullptr;           // first element of this view
  Shape shape_;
  Shape strides_;  // in elements
  DType dtype_ = DType::kF32;
  bool of_file_ = false;  // set by from_mapping; views keep it
};

}  // namespace handoff::tensor
