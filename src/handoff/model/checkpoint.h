#pragma once
// A HuggingFace model folder's weights: model.safetensors or the shards listed in
// model.safetensors.index.json, read through mmap. FP8 (F8_E4M3) weights come with their
// `weight_scale_inv` block multipliers (MODEL_SPEC §6): load_fp8 keeps them as they are (the
// linear weights stay 1 byte per weight), load dequantises them. With `quantize_fp8` the loader
// sees a bf16/f32 checkpoint as the published FP8 one would be: the same matrices quantised
// (ops::quantize_fp8_blocks), the rest unchanged.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "handoff/model/config.h"
#include "handoff/model/safetensors.h"
#include "handoff/tensor/fp8_blocks.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

class Checkpoint {
 public:
  // Opens every shard and validates every header; errors name the file.
  // `quantize_fp8` (--quantize fp8): InputError when a tensor is already F8_E4M3.
  static Checkpoint open(const std::string& dir, const ModelConfig& config,
                         bool quantize_fp8 = false);
  // The matrices the published FP8 checkpoints quantise: every linear weight of attention
  // (indexer included), MLP and experts; not the embedding, lm_head, router, indexer
  // weights_proj or norms.
  static std::set<std::string> fp8_quantisable(const ModelConfig& config);

  bool has(const std::string& name) const;
  // The dtype the tensor is stored in; throws InputError naming it when it is missing.
  tensor::DType stored_dtype(const std::string& name) const;
  const tensor::Shape& stored_shape(const std::string& name) const;
  std::vector<std::string> names() const;
  // The file holding tensor `name` (for error messages); throws InputError when it is missing.
  const std::string& path_of(const std::string& name) const;

  // The tensor `name`, checked against `expected` shape (InputError naming file, tensor,
  // expected and actual shape otherwise) and returned in `dtype` (kF32 or kBF16; a view of
  // the mapping when no conversion is needed). F8_E4M3 tensors need a companion
  // `<name>_scale_inv` (for X.weight: X.weight_scale_inv) of shape
  // [ceil(rows/block_rows), ceil(cols/block_cols)] and are dequantised through it.
  tensor::Tensor load(const std::string& name, const tensor::Shape& expected,
                      tensor::DType dtype) const;
  // Whether `name` is read as FP8 blocks: stored F8_E4M3, or quantised at load.
  bool is_fp8(const std::string& name) const;
  // FP8 tensor `name` (is_fp8) whole, its values a view of the mapping when stored FP8: checked
  // against `expected` and its scale grid against the block size.
  tensor::Fp8Blocks load_fp8(const std::string& name, const tensor::Shape& expected) const;
  int64_t block_rows() const { return block_rows_; }
  int64_t block_cols() const { return block_cols_; }
  // Only rows [begin, end) along dimension `dim` of it: a rank's slice is converted (and so
  // read) alone, never the whole tensor; an FP8 tensor is dequantised whole, then sliced.
  tensor::Tensor load_slice(const std::string& name, const tensor::Shape& expected,
                            tensor::DType dtype, int64_t dim, int64_t begin, int64_t end) const;
  // Drops this process's resident pages of every file: after a part of the model was copied out,
  // so a rank's peak memory holds its own weights, not the pages of the tensors it sliced.
  void release_pages() const;

  // Progress of loading, reported on a terminal by the caller.
  size_t total_bytes() const;
  // Bytes tensor `name` (with its scale grid, if any) occupies in its file.
  size_t stored_bytes(const std::string& name) const;

 private:
  // The file holding tensor `name`, after checking it is there with shape `expected`.
  const SafetensorsFile& file_with(const std::string& name, const tensor::Shape& expected) const;

  std::string dir_;
  bool quantize_fp8_ = false;
  std::set<std::string> quantisable_;  // with quantize_fp8_
  int64_t block_rows_ = 128;
  int64_t block_cols_ = 128;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> index_;  // tensor name -> file holding it
};

}  // namespace handoff::model
