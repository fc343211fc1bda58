#include "handoff/model/safetensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "handoff/error.h"

namespace handoff::model {
namespace {

using nlohmann::json;

// A header this large is certainly corrupt (real ones are a few MB); refusing early avoids
// parsing random bytes as JSON.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;

bool parse_st_dtype(const std::string& name, tensor::DType& out) {
  using tensor::DType;
  if (name == "F32")
    out = DType::kF32;
  else if (name == "BF16")
    out = DType::kBF16;
  else if (name == "F16")
    out = DType::kF16;
  else if (name == "F8_E4M3")
    out = DType::kF8E4M3;
  else if (name == "I32")
    out = DType::kI32;
  else if (name == "I64")
    out = DType::kI64;
  else
    return false;
  return true;
}

std::string st_dtype_name(tensor::DType dtype) {
  using tensor::DType;
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
  }
  return "?";
}

// A non-negative integer that fits int64 (JSON may hold up to 2^64 - 1).
bool is_non_negative_int(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t{INT64_MAX};
  return v.is_number_integer() && v.get<int64_t>() >= 0;
}

TensorEntry parse_entry(const std::string& path, const std::string& name, const json& v,
                        size_t data_size) {
  if (!v.is_object()) fail_input("{}: tensor '{}': header entry is not an object", path, name);
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) fail_input("{}: tensor '{}': header entry lacks '{}'", path, name, key);
  TensorEntry e;
  const json& dt = v.at("dtype");
  if (!dt.is_string()) fail_input("{}: tensor '{}': 'dtype' is not a string", path, name);
  if (!parse_st_dtype(dt.get<std::string>(), e.dtype))
    fail_input(
        "{}: tensor '{}': unsupported dtype '{}' (expected F32, BF16, F16, F8_E4M3, I32 "
        "or I64)",
        path, name, dt.get<std::string>());
  const json& shape = v.at("shape");
  if (!shape.is_array()) fail_input("{}: tensor '{}': 'shape' is not a list", path, name);
  for (const json& d : shape) {
    if (!is_non_negative_int(d))
      fail_input("{}: tensor '{}': bad shape {}", path, name, shape.dump());
    e.shape.push_back(d.get<int64_t>());
  }
  const json& off = v.at("data_offsets");
  if (!off.is_array() || off.size() != 2 || !is_non_negative_int(off[0]) ||
      !is_non_negative_int(off[1]))
    fail_input("{}: tensor '{}': 'data_offsets' must be two non-negative integers, got {}", path,
               name, off.dump());
  e.begin = off[0].get<size_t>();
  e.end = off[1].get<size_t>();
  if (e.end < e.begin)
    fail_input("{}: tensor '{}': data_offsets [{}, {}] end before begin", path, name, e.begin,
               e.end);
  if (e.end > data_size)
    fail_input(
        "{}: tensor '{}': data_offsets [{}, {}] beyond the data section of {} bytes "
        "(truncated file?)",
        path, name, e.begin, e.end, data_size);
  // Checked: a declared shape of 2^63 elements must be an error, not a wrapped byte count.
  const std::optional<int64_t> numel = tensor::checked_numel(e.shape);
  size_t expected = 0;
  if (!numel ||
      __builtin_mul_overflow(static_cast<size_t>(*numel), tensor::dtype_size(e.dtype), &expected))
    fail_input("{}: tensor '{}': shape {} of {} has more bytes than a file can hold", path, name,
               tensor::shape_str(e.shape), st_dtype_name(e.dtype));
  if (e.end - e.begin != expected)
    fail_input("{}: tensor '{}': {} bytes stored, but {} {} needs {} bytes", path, name,
               e.end - e.begin, st_dtype_name(e.dtype), tensor::shape_str(e.shape), expected);
  return e;
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto file = tensor::MappedFile::open(path);
  if (file->size() < 8)
    fail_input("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", path,
               file->size());
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file->data()[i];
  if (header_len > kMaxHeaderBytes || header_len > file->size() - 8)
    fail_input(
        "{}: header length {} goes beyond the file size of {} bytes (truncated or not a "
        "safetensors file)",
        path, header_len, file->size());
  const char* text = reinterpret_cast<const char*>(file->data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    fail_input("{}: invalid JSON header: {}", path, e.what());
  }
  if (!header.is_object()) fail_input("{}: header is not a JSON object", path);

  auto st = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  st->file_ = file;
  st->data_start_ = 8 + static_cast<size_t>(header_len);
  const size_t data_size = file->size() - st->data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") continue;
    st->entries_.emplace(name, parse_entry(path, name, value, data_size));
  }
  // Overlapping tensors would alias each other's bytes: a writer bug we should not hide.
  std::vector<std::pair<size_t, const std::string*>> spans;
  for (const auto& [name, e] : st->entries_)
    if (e.end > e.begin) spans.emplace_back(e.begin, &name);
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    const TensorEntry& prev = st->entries_.at(*spans[i - 1].second);
    if (spans[i].first < prev.end)
      fail_input("{}: tensor '{}' overlaps tensor '{}' in the data section", path, *spans[i].second,
                 *spans[i - 1].second);
  }
  return st;
}

void SafetensorsFile::release_pages() const {
  // Advice only: should the kernel refuse, the pages stay resident and nothing else changes.
  if (file_->size() > 0)
    ::madvise(const_cast<uint8_t*>(file_->data()), file_->size(), MADV_DONTNEED);
}

tensor::Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail_input("{}: no tensor '{}'", path(), name);
  const TensorEntry& e = it->second;
  tensor::Tensor view =
      tensor::Tensor::from_mapping(file_, data_start_ + e.begin, e.shape, e.dtype);
  // The format does not require alignment (HF pads the header, but an unpadded one is valid):
  // a misaligned tensor is copied once into aligned storage, so kernels may load it as typed
  // elements.
  if (reinterpret_cast<uintptr_t>(view.raw()) % tensor::dtype_size(e.dtype) != 0)
    return view.contiguous();
  return view;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Layout> layout,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), layout_(std::move(layout)) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  size_t offset = 0;
  for (const Layout& t : layout_) {
    if (header.contains(t.name)) fail("write_safetensors {}: duplicate tensor '{}'", path, t.name);
    const size_t bytes =
        static_cast<size_t>(tensor::shape_numel(t.shape)) * tensor::dtype_size(t.dtype);
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // HF pads with spaces so the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) fail_input("{}: cannot create: {}", path, std::strerror(errno));
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  if (std::fwrite(len_bytes, 1, 8, file_) != 8 ||
      std::fwrite(text.data(), 1, text.size(), file_) != text.size())
    fail_input("{}: write failed: {}", path, std::strerror(errno));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void SafetensorsWriter::write(const std::string& name, const void* data, size_t nbytes) {
  if (next_ >= layout_.size() || layout_[next_].name != name)
    fail("{}: tensor '{}' written out of the declared order", path_, name);
  const Layout& t = layout_[next_];
  const size_t expected =
      static_cast<size_t>(tensor::shape_numel(t.shape)) * tensor::dtype_size(t.dtype);
  if (nbytes != expected)
    fail("{}: tensor '{}' has {} bytes, declared {}", path_, name, nbytes, expected);
  if (file_ == nullptr) fail("{}: write after close", path_);
  if (std::fwrite(data, 1, nbytes, file_) != nbytes)
    fail_input("{}: write failed: {}", path_, std::strerror(errno));
  ++next_;
}

void SafetensorsWriter::write(const std::string& name, const tensor::Tensor& t) {
  if (next_ < layout_.size() &&
      (t.dtype() != layout_[next_].dtype || t.shape() != layout_[next_].shape))
    fail("{}: tensor '{}' does not match its declared dtype/shape", path_, name);
  const tensor::Tensor c = t.is_contiguous() ? t : t.contiguous();
  write(name, c.raw(), c.nbytes());
}

void SafetensorsWriter::close() {
  if (file_ == nullptr) return;
  if (next_ != layout_.size())
    fail("{}: closed after {} of {} tensors", path_, next_, layout_.size());
  std::FILE* f = std::exchange(file_, nullptr);
  const bool flushed = std::fflush(f) == 0;
  if (std::fclose(f) != 0 || !flushed)
    fail_input("{}: write failed: {}", path_, std::strerror(errno));
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, tensor::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Layout> layout;
  layout.reserve(tensors.size());
  for (const auto& [name, t] : tensors) layout.push_back({name, t.dtype(), t.shape()});
  SafetensorsWriter writer(path, std::move(layout), metadata);
  for (const auto& [name, t] : tensors) writer.write(name, t);
  writer.close();
}

}  // namespace handoff::model
