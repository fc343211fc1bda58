#pragma once
// Which GGUF tensors a Handoff (HuggingFace-layout) checkpoint becomes for llama.cpp's
// deepseek2 / deepseek32 architectures, and where each one's bytes come from:
//   * names mapped to llama.cpp's (token_embd, blk.N.attn_q_a, ..., output);
//   * the routed experts of a layer stacked into one [experts, rows, cols] tensor per matrix;
//   * kv_b_proj split per head into attn_k_b (its k_nope rows, transposed: [heads, kv_lora,
//     nope]) and attn_v_b (its v rows: [heads, v_dim, kv_lora]), the form llama.cpp's absorbed
//     MLA multiplies by;
//   * types as llama.cpp's own converter picks them: norms, biases, the router and the indexer's
//     head weights in F32, every other matrix in the chosen main type.
#include <string>
#include <vector>

#include "handoff/gguf/file_writer.h"
#include "handoff/model/config.h"
#include "handoff/tensor/tensor.h"

namespace handoff::gguf {

enum class Source {
  kCopy,          // one checkpoint tensor as it is
  kStackExperts,  // sources[e] is expert e's matrix
  kKeyB,          // the k_nope rows of kv_b_proj, transposed per head
  kValueB,        // the v rows of kv_b_proj
};

struct PlannedTensor {
  TensorInfo info;
  Source source = Source::kCopy;
  std::vector<std::string> sources;  // checkpoint tensor names
  tensor::Shape source_shape;        // the shape of each source tensor
};

// The llama.cpp architecture name of a family: deepseek_v3 -> deepseek2, deepseek_v32 ->
// deepseek32; InputError for the others.
std::string gguf_architecture(model::Family family);

// Every tensor of the main model (MTP layers are not exported), in checkpoint order.
// `main_type` is the type of the matrices (F32 or BF16).
std::vector<PlannedTensor> plan_tensors(const model::ModelConfig& config, TensorType main_type);

}  // namespace handoff::gguf
