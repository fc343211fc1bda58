#pragma once
// Random-weight checkpoints in HF layout (config.json + model.safetensors, sharded above a size
// limit) for tests, demos and benchmarks, with the init and antithetic indexer heads of the
// golden checkpoints.
#include <cstdint>
#include <string>
#include <string_view>

#include "handoff/model/checkpoint_layout.h"
#include "handoff/model/config.h"
#include "handoff/tensor/dtype.h"

namespace handoff::model {

// The config of a named preset ("tiny", "demo", "bench-moe") for `family`; InputError otherwise.
ModelConfig preset_config(std::string_view preset, Family family);

struct MakeModelOptions {
  ModelConfig config;
  uint64_t seed = 0;
  tensor::DType dtype = tensor::DType::kBF16;  // kF32 or kBF16; router bias always F32
  std::string out_dir;
  // Shards are cut when a file would exceed this many bytes (HF uses a few GB too).
  size_t max_shard_bytes = size_t{2} << 30;
};

struct MakeModelResult {
  ParamCounts params;
  size_t bytes = 0;
  int64_t tensors = 0;
  int64_t shards = 0;
  double seconds = 0;
};

// Writes the model into out_dir. The folder may be missing, empty, or hold only a previous
// model (config.json, model.safetensors, model.safetensors.index.json, model-*-of-*.safetensors),
// which is replaced; anything else there is an InputError so we never delete user files.
MakeModelResult make_model(const MakeModelOptions& options);

}  // namespace handoff::model
