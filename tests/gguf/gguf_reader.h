#pragma once
// A GGUF v3 reader for the tests, written from the format description independently of the
// writer (src/handoff/gguf): it parses every key/value of any type, every tensor descriptor, and
// checks the structure as llama.cpp's loader would (magic, version, sizes that end exactly where
// the data section starts, aligned offsets, tensors inside the file and not overlapping).
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace handoff::testing {

struct GgufValue {
  uint32_t type = 0;  // gguf_type
  uint32_t array_type = 0;
  // Scalars: integers in i (bool as 0/1), floats in f, strings in s; arrays in the vectors.
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> ne;  // as stored: ne[0] is the contiguous dimension
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
};

struct GgufFile {
  uint32_t version = 0;
  uint64_t kv_count = 0;
  std::vector<std::string> key_order;
  std::map<std::string, GgufValue> kv;
  std::vector<GgufTensor> tensors;
  std::map<std::string, size_t> index;
  uint64_t data_start = 0;
  std::string bytes;  // the whole file

  const GgufTensor& tensor(const std::string& name) const {
    const auto it = index.find(name);
    if (it == index.end()) throw std::runtime_error("no tensor " + name);
    return tensors[it->second];
  }
  const char* data(const GgufTensor& t) const { return bytes.data() + data_start + t.offset; }
};

class GgufParser {
 public:
  explicit GgufParser(std::string bytes) { file_.bytes = std::move(bytes); }

  GgufFile parse() {
    if (u32() != 0x46554747u) throw std::runtime_error("bad magic");
    file_.version = u32();
    if (file_.version != 3) throw std::runtime_error("version " + std::to_string(file_.version));
    const uint64_t n_tensors = u64();
    file_.kv_count = u64();
    uint64_t alignment = 32;
    for (uint64_t k = 0; k < file_.kv_count; ++k) {
      const std::string key = str();
      GgufValue v;
      v.type = u32();
      if (v.type == 9) {
        v.array_type = u32();
        const uint64_t n = u64();
        for (uint64_t j = 0; j < n; ++j) scalar(v.array_type, v, true);
      } else {
        scalar(v.type, v, false);
      }
      if (file_.kv.count(key)) throw std::runtime_error("duplicate key " + key);
      if (key == "general.alignment") alignment = static_cast<uint64_t>(v.i);
      file_.key_order.push_back(key);
      file_.kv[key] = std::move(v);
    }
    for (uint64_t t = 0; t < n_tensors; ++t) {
      GgufTensor g;
      g.name = str();
      const uint32_t nd = u32();
      if (nd == 0 || nd > 4) throw std::runtime_error(g.name + ": bad n_dims");
      uint64_t n = 1;
      for (uint32_t d = 0; d < nd; ++d) {
        g.ne.push_back(u64());
        n *= g.ne.back();
      }
      g.type = u32();
      if (g.type != 0 && g.type != 1 && g.type != 30)
        throw std::runtime_error(g.name + ": unexpected type " + std::to_string(g.type));
      g.nbytes = n * (g.type == 0 ? 4 : 2);
      g.offset = u64();
      if (g.offset % alignment != 0) throw std::runtime_error(g.name + ": offset not aligned");
      if (file_.index.count(g.name)) throw std::runtime_error("duplicate tensor " + g.name);
      file_.index[g.name] = file_.tensors.size();
      file_.tensors.push_back(g);
    }
    file_.data_start = (pos_ + alignment - 1) / alignment * alignment;
    for (size_t p = pos_; p < file_.data_start; ++p)
      if (file_.bytes.at(p) != 0) throw std::runtime_error("non-zero padding before the data");
    uint64_t end = 0;
    for (const GgufTensor& g : file_.tensors) {
      if (g.offset < end) throw std::runtime_error(g.name + ": overlaps the previous tensor");
      end = g.offset + g.nbytes;
      if (file_.data_start + end > file_.bytes.size())
        throw std::runtime_error(g.name + ": past the end of the file");
    }
    return std::move(file_);
  }

 private:
  void need(size_t n) {
    if (pos_ + n > file_.bytes.size()) throw std::runtime_error("truncated");
  }
  template <typename T>
  T raw() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, file_.bytes.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32() { return raw<uint32_t>(); }
  uint64_t u64() { return raw<uint64_t>(); }
  std::string str() {
    const uint64_t n = u64();
    need(n);
    std::string s = file_.bytes.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void scalar(uint32_t type, GgufValue& v, bool array) {
    int64_t i = 0;
    double f = 0;
    std::string s;
    bool is_int = true, is_str = false;
    switch (type) {
      case 0:
        i = raw<uint8_t>();
        break;
      case 1:
        i = raw<int8_t>();
        break;
      case 2:
        i = raw<uint16_t>();
        break;
      case 3:
        i = raw<int16_t>();
        break;
      case 4:
        i = raw<uint32_t>();
        break;
      case 5:
        i = raw<int32_t>();
        break;
      case 6:
        f = raw<float>();
        is_int = false;
        break;
      case 7:
        i = raw<uint8_t>();
        break;
      case 8:
        s = str();
        is_int = false;
        is_str = true;
        break;
      case 10:
        i = static_cast<int64_t>(raw<uint64_t>());
        break;
      case 11:
        i = raw<int64_t>();
        break;
      case 12:
        f = raw<double>();
        is_int = false;
        break;
      default:
        throw std::runtime_error("bad value type " + std::to_string(type));
    }
    if (array) {
      if (is_str)
        v.strings.push_back(s);
      else if (is_int)
        v.ints.push_back(i);
      else
        v.floats.push_back(f);
    } else {
      v.i = i;
      v.f = f;
      v.s = s;
    }
  }

  GgufFile file_;
  size_t pos_ = 0;
};

inline GgufFile read_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return GgufParser(s.str()).parse();
}

}  // namespace handoff::testing
