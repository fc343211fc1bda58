// `handoff export-gguf`: writes a model folder as one GGUF file that llama.cpp runs (its
// deepseek2 / deepseek32 architectures), so the two engines can be compared on the same
// weights (bench/peer_compare.sh).
#include <fmt/format.h>

#include <memory>
#include <string>

#include "handoff/cli/commands.h"
#include "handoff/cli/log_flags.h"
#include "handoff/gguf/exporter.h"

namespace handoff::cli {
namespace {

void run_export_gguf(const gguf::ExportOptions& options) {
  const gguf::ExportResult r = gguf::export_gguf(options);
  fmt::print("wrote {}: arch {}, {} tensors ({}), {:.3f} GB of tensor data, {} metadata keys\n",
             options.out_path, r.architecture, r.tensors, r.dtype, r.bytes / 1e9, r.metadata_keys);
  if (r.tokenizer.model == "none")
    fmt::print("  tokenizer: none ({} has no tokenizer.json; llama.cpp runs on token ids only)\n",
               options.model_dir);
  else
    fmt::print("  tokenizer: {} (pre '{}'), {} tokens, {} merges\n", r.tokenizer.model,
               r.tokenizer.pre, r.tokenizer.tokens, r.tokenizer.merges);
  fmt::print("  {:.2f} s\n", r.seconds);
}

}  // namespace

void add_export_gguf_command(CLI::App& app) {
  auto options = std::make_shared<gguf::ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export-gguf",
      "Write a deepseek_v3 / deepseek_v32 model folder as a GGUF file for llama.cpp "
      "(architectures deepseek2 / deepseek32).");
  add_log_level_flag(*cmd);
  cmd->add_option("--model", options->model_dir, "model folder (config.json + safetensors)")
      ->required();
  cmd->add_option("--out", options->out_path, "the .gguf file to write (replaced if present)")
      ->required();
  cmd->add_option("--dtype", options->dtype,
                  "auto | f32 | bf16: the type of the matrices (norms, biases and routers are "
                  "always F32); auto keeps the checkpoint's (FP8 is dequantised to bf16)")
      ->capture_default_str();
  cmd->callback([options] { run_export_gguf(*options); });
}

}  // namespace handoff::cli
