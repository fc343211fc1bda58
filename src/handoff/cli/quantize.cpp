// `handoff quantize`: writes a bf16 / f32 checkpoint in the published FP8 block format.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "handoff/cli/commands.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/log_flags.h"
#include "handoff/model/checkpoint_quantizer.h"

namespace handoff::cli {
namespace {

struct QuantizeFlags {
  std::string in;
  std::string out;
  int64_t max_shard_mb = 4096;
};

void run_quantize(const QuantizeFlags& flags) {
  require_range("--max-shard-mb", flags.max_shard_mb, 1, int64_t{1} << 20);
  model::QuantizeOptions options;
  options.in_dir = flags.in;
  options.out_dir = flags.out;
  options.max_shard_bytes = static_cast<size_t>(flags.max_shard_mb) << 20;
  const model::QuantizeResult r = model::quantize_checkpoint(options);
  fmt::print(
      "wrote {}: {} matrices in fp8 (e4m3, 128x128 block scales), {} tensors copied\n"
      "  {:.3f} GB -> {:.3f} GB in {} file(s), {:.2f} s\n",
      flags.out, r.quantised, r.copied, r.in_bytes / 1e9, r.out_bytes / 1e9, r.shards, r.seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto flags = std::make_shared<QuantizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Write a bf16/f32 checkpoint as an FP8 one (e4m3 values, f32 weight_scale_inv per 128x128 "
      "block) for the matrices published FP8 checkpoints quantise; loads to the same logits as "
      "--quantize fp8 on the original");
  add_log_level_flag(*cmd);
  cmd->add_option("--in", flags->in, "bf16/f32 model folder")->required();
  cmd->add_option("--out", flags->out, "output folder (missing or empty)")->required();
  cmd->add_option("--max-shard-mb", flags->max_shard_mb,
                  "split into model-XXXXX-of-YYYYY.safetensors shards above this size")
      ->capture_default_str();
  cmd->callback([flags] { run_quantize(*flags); });
}

}  // namespace handoff::cli
