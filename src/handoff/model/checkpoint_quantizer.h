#pragma once
// `handoff quantize`: writes a bf16 / f32 checkpoint as the published FP8 format (e4m3 values,
// f32 `weight_scale_inv` per 128 × 128 block, for the matrices Checkpoint::fp8_quantisable
// names; every other tensor copied as stored), so that loading the result gives exactly what
// loading the original with --quantize fp8 gives.
#include <cstddef>
#include <cstdint>
#include <string>

namespace handoff::model {

struct QuantizeOptions {
  std::string in_dir;
  std::string out_dir;  // missing or empty
  size_t max_shard_bytes = size_t{4} << 30;
};

struct QuantizeResult {
  int64_t quantised = 0;  // matrices written as FP8
  int64_t copied = 0;     // tensors written as stored
  size_t in_bytes = 0;
  size_t out_bytes = 0;
  int64_t shards = 0;
  double seconds = 0;
};

QuantizeResult quantize_checkpoint(const QuantizeOptions& options);

}  // namespace handoff::model
