#pragma once
// The key/value section of a GGUF file, built in order and serialised as GGUF v3 encodes it.
// Each value keeps the exact type llama.cpp's loader expects for its key (it refuses, for
// example, a uint64 block count), so callers choose the typed adder.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "handoff/gguf/format.h"

namespace handoff::gguf {

class Metadata {
 public:
  void add_u32(const std::string& key, uint32_t value);
  void add_i32(const std::string& key, int32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string(const std::string& key, const std::string& value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values);

  size_t count() const { return count_; }
  bool has(const std::string& key) const { return keys_.count(key) != 0; }
  // The serialised pairs, ready to follow the file header.
  const std::string& bytes() const { return bytes_; }

 private:
  void begin(const std::string& key, ValueType type);  // refuses a repeated key

  std::string bytes_;
  std::set<std::string> keys_;
  size_t count_ = 0;
};

// Little-endian encoders shared by the metadata and the tensor descriptors.
void put_u32(std::string& out, uint32_t v);
void put_u64(std::string& out, uint64_t v);
void put_string(std::string& out, const std::string& s);  // uint64 length + bytes

}  // namespace handoff::gguf
