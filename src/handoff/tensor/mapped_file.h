#pragma once
// A read-only memory mapping of a whole file; tensors viewing it keep it alive.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace handoff::tensor {

class MappedFile {
 public:
  // Throws InputError naming the path when it cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace handoff::tensor
