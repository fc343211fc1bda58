#pragma once
// Streams a GGUF file: the header, metadata and every tensor's descriptor are written up front
// from the declared layout (so the offsets are known), then the tensors' bytes in that order,
// in as many pieces as the caller likes. A large model never sits in memory whole.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "handoff/gguf/format.h"
#include "handoff/gguf/metadata.h"

namespace handoff::gguf {

struct TensorInfo {
  std::string name;
  // Row-major shape, outermost first (as safetensors and numpy write it); the file stores the
  // reverse, ggml's ne[0] being the contiguous dimension.
  std::vector<int64_t> shape;
  TensorType type = TensorType::kF32;

  uint64_t nbytes() const;
};

class FileWriter {
 public:
  // Creates `path` and writes everything before the tensor data; throws Error naming the path.
  FileWriter(const std::string& path, const Metadata& metadata, std::vector<TensorInfo> tensors);
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  ~FileWriter();

  // The next `n` bytes of tensor data. A piece may not run past the end of the current tensor;
  // the alignment padding after a tensor is written when it is complete.
  void append(const void* data, size_t n);
  // Flushes and closes; throws Error when a tensor is incomplete or the write failed.
  void close();

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  void write_bytes(const void* data, size_t n);

  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  size_t next_ = 0;       // the tensor being written
  uint64_t written_ = 0;  // bytes of it written so far
};

}  // namespace handoff::gguf
