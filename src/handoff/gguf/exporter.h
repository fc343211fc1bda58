#pragma once
// Handoff checkpoint folder -> one GGUF file for llama.cpp (deepseek2 / deepseek32).
#include <cstdint>
#include <string>

#include "handoff/gguf/tokenizer_metadata.h"

namespace handoff::gguf {

struct ExportOptions {
  std::string model_dir;
  std::string out_path;
  // "auto" (the checkpoint's own: bf16 when its matrices are bf16 or FP8, f32 when f32), "f32"
  // or "bf16": the type of the matrices; norms, biases and routers are F32 whatever it is.
  std::string dtype = "auto";
};

struct ExportResult {
  std::string architecture;
  std::string dtype;  // the main type chosen
  size_t tensors = 0;
  size_t metadata_keys = 0;
  uint64_t bytes = 0;  // tensor data
  TokenizerSummary tokenizer;
  double seconds = 0;
};

// FP8 (F8_E4M3 + weight_scale_inv) checkpoints are dequantised through their block scales (the
// values are exact in bf16 only up to the scale's rounding, so "auto" picks bf16 and "f32" is
// exact). Writes to a temporary file beside `out_path` and renames it on success, so a failed
// export leaves no half file. InputError for an unsupported family, dtype or layout.
ExportResult export_gguf(const ExportOptions& options);

}  // namespace handoff::gguf
