#include "handoff/gguf/file_writer.h"

#include <cerrno>
#include <cstring>
#include <set>

#include "handoff/error.h"

namespace handoff::gguf {

uint64_t TensorInfo::nbytes() const {
  uint64_t n = tensor_type_size(type);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

FileWriter::FileWriter(const std::string& path, const Metadata& metadata,
                       std::vector<TensorInfo> tensors)
    : path_(path), tensors_(std::move(tensors)) {
  std::set<std::string> names;
  std::string head;
  put_u32(head, kMagic);
  put_u32(head, kVersion);
  put_u64(head, tensors_.size());
  put_u64(head, metadata.count());
  head += metadata.bytes();
  uint64_t offset = 0;
  for (const TensorInfo& t : tensors_) {
    if (!names.insert(t.name).second) fail("gguf {}: tensor '{}' declared twice", path, t.name);
    if (t.shape.empty() || t.shape.size() > 4)
      fail("gguf {}: tensor '{}' has {} dimensions (1..4 allowed)", path, t.name, t.shape.size());
    put_string(head, t.name);
    put_u32(head, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) {
      if (*d <= 0) fail("gguf {}: tensor '{}' has a dimension of {}", path, t.name, *d);
      put_u64(head, static_cast<uint64_t>(*d));
    }
    put_u32(head, static_cast<uint32_t>(t.type));
    put_u64(head, offset);  // relative to the data section
    offset = align_up(offset + t.nbytes());
  }
  head.resize(align_up(head.size()), '\0');  // the data section starts aligned
  file_.reset(std::fopen(path.c_str(), "wb"));
  if (!file_) fail("cannot create {}: {}", path, std::strerror(errno));
  write_bytes(head.data(), head.size());
}

FileWriter::~FileWriter() = default;

void FileWriter::write_bytes(const void* data, size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, file_.get()) != n)
    fail("cannot write {}: {}", path_, std::strerror(errno));
}

void FileWriter::append(const void* data, size_t n) {
  if (!file_) fail("gguf {}: append after close", path_);
  if (next_ >= tensors_.size()) fail("gguf {}: data past the last tensor", path_);
  const TensorInfo& t = tensors_[next_];
  const uint64_t size = t.nbytes();
  if (written_ + n > size)
    fail("gguf {}: {} bytes for tensor '{}' past its {} bytes", path_, written_ + n, t.name, size);
  write_bytes(data, n);
  written_ += n;
  if (written_ == size) {
    static constexpr char kZeros[kAlignment] = {};
    write_bytes(kZeros, align_up(size) - size);
    ++next_;
    written_ = 0;
  }
}

void FileWriter::close() {
  if (!file_) return;
  if (next_ != tensors_.size())
    fail("gguf {}: closed with tensor '{}' incomplete ({} of {} tensors written)", path_,
         tensors_[next_].name, next_, tensors_.size());
  std::FILE* f = file_.release();
  const bool flushed = std::fflush(f) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) fail("cannot write {}: {}", path_, std::strerror(errno));
}

}  // namespace handoff::gguf
