#include "handoff/gguf/metadata.h"

#include <bit>
#include <cstring>

#include "handoff/error.h"

namespace handoff::gguf {

namespace {
template <typename T>
void put_raw(std::string& out, T v) {
  static_assert(std::endian::native == std::endian::little, "GGUF is little-endian");
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}
}  // namespace

void put_u32(std::string& out, uint32_t v) { put_raw(out, v); }
void put_u64(std::string& out, uint64_t v) { put_raw(out, v); }
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

void Metadata::begin(const std::string& key, ValueType type) {
  if (!keys_.insert(key).second) fail("gguf metadata: key '{}' added twice", key);
  put_string(bytes_, key);
  put_u32(bytes_, static_cast<uint32_t>(type));
  ++count_;
}

void Metadata::add_u32(const std::string& key, uint32_t value) {
  begin(key, ValueType::kUint32);
  put_raw(bytes_, value);
}

void Metadata::add_i32(const std::string& key, int32_t value) {
  begin(key, ValueType::kInt32);
  put_raw(bytes_, value);
}

void Metadata::add_f32(const std::string& key, float value) {
  begin(key, ValueType::kFloat32);
  put_raw(bytes_, value);
}

void Metadata::add_bool(const std::string& key, bool value) {
  begin(key, ValueType::kBool);
  put_raw(bytes_, static_cast<uint8_t>(value ? 1 : 0));
}

void Metadata::add_string(const std::string& key, const std::string& value) {
  begin(key, ValueType::kString);
  put_string(bytes_, value);
}

void Metadata::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  begin(key, ValueType::kArray);
  put_u32(bytes_, static_cast<uint32_t>(ValueType::kString));
  put_u64(bytes_, values.size());
  for (const std::string& v : values) put_string(bytes_, v);
}

void Metadata::add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  begin(key, ValueType::kArray);
  put_u32(bytes_, static_cast<uint32_t>(ValueType::kInt32));
  put_u64(bytes_, values.size());
  for (int32_t v : values) put_raw(bytes_, v);
}

}  // namespace handoff::gguf
