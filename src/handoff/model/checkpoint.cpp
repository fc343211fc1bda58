#include "handoff/model/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/model/checkpoint_layout.h"

namespace handoff::model {
namespace {

namespace fs = std::filesystem;

// Default block size of DeepSeek/GLM FP8 releases, used when a checkpoint has F8 tensors but
// its config carries no quantization_config.
constexpr int64_t kDefaultBlock = 128;

// The layer index of "model.layers.{i}.…", or -1.
int64_t layer_of(const std::string& name) {
  static constexpr std::string_view kPrefix = "model.layers.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  int64_t layer = -1;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == end || *ptr != '.') return -1;
  return layer;
}

std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  std::ifstream in(index_path);
  if (!in) fail_input("{}: cannot open", index_path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error or out_of_range (1e999)
    fail_input("{}: invalid JSON: {}", index_path, e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
    fail_input("{}: missing 'weight_map' object", index_path);
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j.at("weight_map").items()) {
    if (!file.is_string())
      fail_input("{}: weight_map entry '{}' is not a file name", index_path, name);
    map.emplace(name, file.get<std::string>());
  }
  return map;
}

bool is_float_dtype(tensor::DType d) {
  return d == tensor::DType::kF32 || d == tensor::DType::kBF16 || d == tensor::DType::kF16 ||
         d == tensor::DType::kF8E4M3;
}

}  // namespace

std::set<std::string> Checkpoint::fp8_quantisable(const ModelConfig& config) {
  std::set<std::string> out;
  for (const TensorSpec& t : checkpoint_tensors(config))
    if (t.kind == TensorKind::kMatrix && t.name != "lm_head.weight") out.insert(t.name);
  return out;
}

Checkpoint Checkpoint::open(const std::string& dir, const ModelConfig& config, bool quantize_fp8) {
  Checkpoint ck;
  ck.dir_ = dir;
  ck.quantize_fp8_ = quantize_fp8;
  if (config.weight_block_rows > 0) ck.block_rows_ = config.weight_block_rows;
  if (config.weight_block_cols > 0) ck.block_cols_ = config.weight_block_cols;
  if (!fs::is_directory(dir)) fail_input("{}: checkpoint folder does not exist", dir);
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(index_path)) {
    const auto weight_map = read_weight_map(index_path.string());
    std::map<std::string, const SafetensorsFile*> by_file;
    for (const auto& [name, file] : weight_map) {
      if (by_file.count(file)) continue;
      const fs::path shard = fs::path(dir) / file;
      if (!fs::exists(shard))
        fail_input("{}: shard file '{}' listed in {} does not exist", shard.string(), file,
                   index_path.string());
      ck.files_.push_back(SafetensorsFile::open(shard.string()));
      by_file.emplace(file, ck.files_.back().get());
    }
    for (const auto& [name, file] : weight_map) {
      const SafetensorsFile* st = by_file.at(file);
      if (!st->has(name))
        fail_input("{}: tensor '{}' listed in {} is not in this shard", st->path(), name,
                   index_path.string());
      ck.index_.emplace(name, st);
    }
  } else if (fs::exists(single_path)) {
    ck.files_.push_back(SafetensorsFile::open(single_path.string()));
    for (const auto& [name, entry] : ck.files_.back()->entries())
      ck.index_.emplace(name, ck.files_.back().get());
  } else {
    fail_input(
        "{}: no weights found (expected model.safetensors or "
        "model.safetensors.index.json)",
        dir);
  }
  std::set<int64_t> mtp_layers;
  for (const auto& [name, file] : ck.index_) {
    const int64_t layer = layer_of(name);
    if (layer >= config.num_hidden_layers) mtp_layers.insert(layer);
  }
  if (quantize_fp8) {
    for (const auto& [name, file] : ck.index_)
      if (file->entries().at(name).dtype == tensor::DType::kF8E4M3)
        fail_input(
            "--quantize fp8: {} is already an FP8 checkpoint (tensor '{}' is F8_E4M3); load it "
            "without --quantize",
            dir, name);
    // Quantised on the published grid (128 x 128) whatever the config says.
    ck.block_rows_ = ck.block_cols_ = kDefaultBlock;
    ck.quantisable_ = fp8_quantisable(config);
  }
  if (!mtp_layers.empty())
    log::info(
        "{}: skipping {} MTP layer(s) starting at layer {} (multi-token prediction is not "
        "used)",
        dir, mtp_layers.size(), *mtp_layers.begin());
  return ck;
}

bool Checkpoint::has(const std::string& name) const { return index_.count(name) != 0; }

tensor::DType Checkpoint::stored_dtype(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail_input("{}: checkpoint has no tensor {}", dir_, name);
  return it->second->entries().at(name).dtype;
}

const tensor::Shape& Checkpoint::stored_shape(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail_input("{}: checkpoint has no tensor {}", dir_, name);
  return it->second->entries().at(name).shape;
}

const std::string& Checkpoint::path_of(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail_input("{}: checkpoint has no tensor {}", dir_, name);
  return it->second->path();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, file] : index_) out.push_back(name);
  return out;
}

size_t Checkpoint::stored_bytes(const std::string& name) const {
  size_t bytes = 0;
  for (const std::string& n : {name, name + "_scale_inv"}) {
    const auto it = index_.find(n);
    if (it == index_.end()) continue;
    const TensorEntry& e = it->second->entries().at(n);
    bytes += e.end - e.begin;
  }
  return bytes;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, file] : index_) {
    const TensorEntry& e = file->entries().at(name);
    total += e.end - e.begin;
  }
  return total;
}

const SafetensorsFile& Checkpoint::file_with(const std::string& name,
                                             const tensor::Shape& expected) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail_input("{}: tensor '{}' is missing from the checkpoint", dir_, name);
  const TensorEntry& entry = it->second->entries().at(name);
  if (entry.shape != expected)
    fail_input("{}: tensor '{}' has shape {}, expected {}", it->second->path(), name,
               tensor::shape_str(entry.shape), tensor::shape_str(expected));
  return *it->second;
}

tensor::Tensor Checkpoint::load(const std::string& name, const tensor::Shape& expected,
                                tensor::DType dtype) const {
  const SafetensorsFile& file = file_with(name, expected);
  const TensorEntry& entry = file.entries().at(name);
  if (!is_float_dtype(entry.dtype))
    fail_input(
        "{}: tensor '{}' has dtype {}; a float weight (F32, BF16, F16 or F8_E4M3) is "
        "required",
        file.path(), name, tensor::dtype_name(entry.dtype));
  if (!is_float_dtype(dtype) || dtype == tensor::DType::kF8E4M3)
    fail("Checkpoint::load('{}'): unsupported target dtype {}", name, tensor::dtype_name(dtype));
  if (is_fp8(name)) {
    const tensor::Tensor w = load_fp8(name, expected).dequantize();
    return dtype == tensor::DType::kF32 ? w : w.to(dtype);
  }
  const tensor::Tensor raw = file.get(name);
  if (entry.dtype == dtype) return raw;  // zero-copy view of the mapping
  return raw.to(dtype);
}

bool Checkpoint::is_fp8(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) return false;
  return it->second->entries().at(name).dtype == tensor::DType::kF8E4M3 ||
         quantisable_.count(name) != 0;
}

tensor::Fp8Blocks Checkpoint::load_fp8(const std::string& name,
                                       const tensor::Shape& expected) const {
  const SafetensorsFile& file = file_with(name, expected);
  const TensorEntry& entry = file.entries().at(name);
  if (entry.dtype != tensor::DType::kF8E4M3) {
    if (quantisable_.count(name) == 0)
      fail("Checkpoint::load_fp8('{}'): the tensor is {}, not FP8", name,
           tensor::dtype_name(entry.dtype));
    if (!is_float_dtype(entry.dtype))
      fail_input("{}: tensor '{}' has dtype {}; a float weight is required", file.path(), name,
                 tensor::dtype_name(entry.dtype));
    return tensor::quantize_fp8_blocks(file.get(name), block_rows_, block_cols_);
  }

  // FP8 block quantisation: W = fp8 · scale_inv[i / br, j / bc] (scale_inv is a multiplier).
  const std::string scale_name = name + "_scale_inv";
  if (entry.shape.size() != 2)
    fail_input("{}: F8_E4M3 tensor '{}' must be 2-d, has shape {}", file.path(), name,
               tensor::shape_str(entry.shape));
  auto sit = index_.find(scale_name);
  if (sit == index_.end())
    fail_input("{}: F8_E4M3 tensor '{}' has no companion '{}' in {}", file.path(), name, scale_name,
               dir_);
  const SafetensorsFile& sfile = *sit->second;
  const TensorEntry& sentry = sfile.entries().at(scale_name);
  const int64_t rows = entry.shape[0];
  const int64_t cols = entry.shape[1];
  const int64_t br = block_rows_;
  const int64_t bc = block_cols_;
  const tensor::Shape grid = {(rows + br - 1) / br, (cols + bc - 1) / bc};
  if (sentry.shape != grid)
    fail_input("{}: tensor '{}' has shape {}, expected {} (the {}x{} block grid of '{}' {})",
               sfile.path(), scale_name, tensor::shape_str(sentry.shape), tensor::shape_str(grid),
               br, bc, name, tensor::shape_str(entry.shape));
  if (!is_float_dtype(sentry.dtype) || sentry.dtype == tensor::DType::kF8E4M3)
    fail_input("{}: tensor '{}' has dtype {}; F32 block scales are required", sfile.path(),
               scale_name, tensor::dtype_name(sentry.dtype));
  tensor::Fp8Blocks out;
  out.values = file.get(name);
  out.scales = sfile.get(scale_name);
  if (sentry.dtype != tensor::DType::kF32) out.scales = out.scales.to(tensor::DType::kF32);
  out.block_rows = br;
  out.block_cols = bc;
  return out;
}

tensor::Tensor Checkpoint::load_slice(const std::string& name, const tensor::Shape& expected,
                                      tensor::DType dtype, int64_t dim, int64_t begin,
                                      int64_t end) const {
  const tensor::DType stored = stored_dtype(name);
  if (is_fp8(name)) {
    // Only the slice is dequantised, on the whole tensor's block grid.
    const tensor::Tensor w = load_fp8(name, expected).slice(dim, begin, end).dequantize();
    return dtype == tensor::DType::kF32 ? w : w.to(dtype);
  }
  // Validated as a whole, viewed on the mapping, converted only where this rank reads.
  const tensor::Tensor part = load(name, expected, stored).slice(dim, begin, end);
  return stored == dtype ? part : part.to(dtype);
}

void Checkpoint::release_pages() const {
  for (const auto& file : files_) file->release_pages();
}

}  // namespace handoff::model
