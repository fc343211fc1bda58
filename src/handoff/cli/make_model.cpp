// `handoff make-model`: writes a random-weight checkpoint of a preset size.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "handoff/cli/commands.h"
#include "handoff/error.h"
#include "handoff/model/model_maker.h"

namespace handoff::cli {
namespace {

struct MakeModelFlags {
  std::string family = "deepseek_v32";
  std::string preset;
  uint64_t seed = 0;
  std::string dtype = "bf16";
  std::string out;
  size_t max_shard_mb = 2048;
};

void run_make_model(const MakeModelFlags& flags) {
  model::MakeModelOptions options;
  options.config = model::preset_config(flags.preset, model::parse_family(flags.family));
  if (flags.dtype != "f32" && flags.dtype != "bf16")
    fail_input("--dtype: unsupported '{}' (expected f32 or bf16)", flags.dtype);
  options.dtype = tensor::parse_dtype(flags.dtype);
  options.seed = flags.seed;
  options.out_dir = flags.out;
  if (flags.max_shard_mb == 0) fail_input("--max-shard-mb must be positive");
  options.max_shard_bytes = flags.max_shard_mb << 20;
  const model::MakeModelResult r = model::make_model(options);
  fmt::print(
      "wrote {}: {} preset '{}', {}, seed {}\n"
      "  {} tensors, {:.3f} GB in {} file(s), {:.2f} s\n"
      "  total params: {} ({:.3f} B)\n"
      "  active params per token: {} ({:.1f} M)\n",
      flags.out, flags.family, flags.preset, flags.dtype, flags.seed, r.tensors, r.bytes / 1e9,
      r.shards, r.seconds, r.params.total, r.params.total / 1e9, r.params.active_per_token,
      r.params.active_per_token / 1e6);
}

}  // namespace

void add_make_model_command(CLI::App& app) {
  auto flags = std::make_shared<MakeModelFlags>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a random-weight checkpoint (config.json + model.safetensors). The --out folder "
      "must be missing, empty, or hold only a previous model, which is replaced.");
  cmd->add_option("--family", flags->family, "glm_moe_dsa | deepseek_v32 | deepseek_v3")
      ->capture_default_str();
  cmd->add_option("--preset", flags->preset, "tiny | demo | bench-moe")->required();
  cmd->add_option("--seed", flags->seed, "RNG seed")->capture_default_str();
  cmd->add_option("--dtype", flags->dtype, "f32 | bf16 (the router bias is always f32)")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "output folder")->required();
  cmd->add_option("--max-shard-mb", flags->max_shard_mb,
                  "split into model-XXXXX-of-YYYYY.safetensors shards above this size")
      ->capture_default_str();
  cmd->callback([flags] { run_make_model(*flags); });
}

}  // namespace handoff::cli
