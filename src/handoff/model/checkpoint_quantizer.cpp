#include "handoff/model/checkpoint_quantizer.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "handoff/error.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/model/load_progress.h"
#include "handoff/model/safetensors.h"
#include "handoff/tensor/fp8_blocks.h"

namespace handoff::model {
namespace {

namespace fs = std::filesystem;
using tensor::DType;

// Files of a HuggingFace model folder besides its weights and config, copied as they are.
constexpr const char* kSideFiles[] = {"tokenizer.json",
                                      "tokenizer_config.json",
                                      "chat_template.jinja",
                                      "special_tokens_map.json",
                                      "generation_config.json",
                                      "vocab.json",
                                      "merges.txt",
                                      "tokenizer.model"};

constexpr int64_t kBlock = 128;

struct OutTensor {
  std::string name;     // as written
  std::string source;   // the input tensor it comes from
  bool scales = false;  // the source's weight_scale_inv
  DType dtype;
  tensor::Shape shape;
  size_t bytes() const {
    return static_cast<size_t>(tensor::shape_numel(shape)) * tensor::dtype_size(dtype);
  }
};

}  // namespace

QuantizeResult quantize_checkpoint(const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.in_dir.empty() || options.out_dir.empty())
    fail_input("quantize: --in and --out are required");
  const fs::path in(options.in_dir), out(options.out_dir);
  if (fs::exists(out) && fs::equivalent(in, out))
    fail_input("quantize: --out {} is the input folder", options.out_dir);
  if (fs::exists(out) && (!fs::is_directory(out) || !fs::is_empty(out)))
    fail_input("quantize: --out {} exists and is not an empty folder", options.out_dir);

  const std::string config_path = (in / "config.json").string();
  const ModelConfig config = load_config(config_path);
  if (config.weight_block_rows > 0)
    fail_input("quantize: {} is already quantised (its config.json has a quantization_config)",
               options.in_dir);
  // Opened as --quantize fp8 loads it: the same tensors become FP8, the same way.
  const Checkpoint ck = Checkpoint::open(options.in_dir, config, /*quantize_fp8=*/true);

  std::vector<OutTensor> plan;
  for (const std::string& name : ck.names()) {
    const tensor::Shape& shape = ck.stored_shape(name);
    if (ck.is_fp8(name)) {
      plan.push_back({name, name, false, DType::kF8E4M3, shape});
      plan.push_back({name + "_scale_inv",
                      name,
                      true,
                      DType::kF32,
                      {(shape[0] + kBlock - 1) / kBlock, (shape[1] + kBlock - 1) / kBlock}});
    } else {
      plan.push_back({name, name, false, ck.stored_dtype(name), shape});
    }
  }
  std::vector<std::vector<const OutTensor*>> shards(1);
  size_t shard_bytes = 0, total = 0;
  for (const OutTensor& t : plan) {
    // A matrix and its scales stay in one shard.
    if (shard_bytes > 0 && !t.scales && shard_bytes + t.bytes() > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += t.bytes();
    total += t.bytes();
  }

  fs::create_directories(out);
  nlohmann::ordered_json cfg;
  {
    std::ifstream cin(config_path);
    cfg = nlohmann::ordered_json::parse(cin);  // load_config parsed it already
  }
  cfg["quantization_config"] = {{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"weight_block_size", {kBlock, kBlock}}};
  {
    std::ofstream f(out / "config.json");
    f << cfg.dump(2) << "\n";
    if (!f) fail_input("{}: cannot write config.json", options.out_dir);
  }
  for (const char* name : kSideFiles)
    if (fs::exists(in / name)) fs::copy_file(in / name, out / name);

  QuantizeResult result;
  result.in_bytes = ck.total_bytes();
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  LoadProgress progress("quantising weights", ck.total_bytes(), ck.names().size());
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors",
                                                              s + 1, shards.size());
    std::vector<SafetensorsWriter::Layout> layout;
    for (const OutTensor* t : shards[s]) layout.push_back({t->name, t->dtype, t->shape});
    SafetensorsWriter writer((out / file).string(), layout, metadata);
    tensor::Fp8Blocks blocks;  // the matrix whose scales come next
    for (const OutTensor* t : shards[s]) {
      if (t->scales) {
        writer.write(t->name, blocks.scales);
        blocks = {};
      } else if (t->dtype == DType::kF8E4M3) {
        blocks = ck.load_fp8(t->source, t->shape);
        writer.write(t->name, blocks.values);
        ++result.quantised;
      } else {
        writer.write(t->name, ck.load(t->source, t->shape, t->dtype));
        ++result.copied;
      }
      weight_map[t->name] = file;
      if (!t->scales) progress.advance(ck.stored_bytes(t->source));
    }
    writer.close();
    ck.release_pages();
  }
  progress.finish();
  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    std::ofstream idx(out / "model.safetensors.index.json");
    idx << index.dump(2) << "\n";
    if (!idx) fail_input("{}: cannot write model.safetensors.index.json", options.out_dir);
  }
  result.out_bytes = total;
  result.shards = static_cast<int64_t>(shards.size());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace handoff::model
