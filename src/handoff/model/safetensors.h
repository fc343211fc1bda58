#pragma once
// One .safetensors file: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the data. Mapped, validated
// on open (offsets inside the file, sizes matching dtype x shape, no overlap), never copied.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "handoff/tensor/mapped_file.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

struct TensorEntry {
  tensor::DType dtype;
  tensor::Shape shape;
  size_t begin = 0;  // byte offsets relative to the data section
  size_t end = 0;
};

class SafetensorsFile {
 public:
  // Throws InputError naming the path (and tensor) for a truncated file, a bad header, an
  // unknown dtype or offsets out of range.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // A zero-copy view of tensor `name`.
  tensor::Tensor get(const std::string& name) const;
  // Drops this process's resident pages of the file (MADV_DONTNEED). The mapping is read-only
  // and never written, so every view stays valid: a page read later is read from the file (the
  // page cache) again.
  void release_pages() const;

 private:
  std::shared_ptr<tensor::MappedFile> file_;
  size_t data_start_ = 0;
  std::map<std::string, TensorEntry> entries_;
};

// Streams a .safetensors file: the header is written from the declared layout up front, then
// each tensor's bytes in that order, so a large checkpoint never has to sit in memory whole.
class SafetensorsWriter {
 public:
  struct Layout {
    std::string name;
    tensor::DType dtype;
    tensor::Shape shape;
  };
  SafetensorsWriter(const std::string& path, std::vector<Layout> layout,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next tensor's bytes; `name` and `nbytes` must match the layout's next entry.
  void write(const std::string& name, const void* data, size_t nbytes);
  void write(const std::string& name, const tensor::Tensor& t);
  // Flushes and closes; throws InputError when the file is incomplete or cannot be written.
  void close();

 private:
  std::string path_;
  std::vector<Layout> layout_;
  size_t next_ = 0;
  std::FILE* file_ = nullptr;
};

// Writes tensors (contiguous, any dtype) in order, with an optional string metadata map.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, tensor::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace handoff::model
