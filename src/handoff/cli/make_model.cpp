// `handoff make-model`: writes a random-weight checkpoint of a preset size.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "handoff/cli/commands.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/log_flags.h"
#include "handoff/error.h"
#include "handoff/model/model_maker.h"
#include "handoff/text/chat_template.h"
#include "handoff/text/tokenizer.h"

namespace handoff::cli {
namespace {

struct MakeModelFlags {
  std::string family = "deepseek_v32";
  std::string preset;
  uint64_t seed = 0;
  std::string dtype = "bf16";
  std::string out;
  int64_t max_shard_mb = 2048;
  std::string tokenizer_from;
  std::string chat_template;  // written as chat_template.jinja
};

// The files of a HuggingFace tokenizer a model folder carries.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                           "chat_template.jinja", "special_tokens_map.json",
                                           "generation_config.json"};

void run_make_model(const MakeModelFlags& flags) {
  // 1 MiB .. 1 TiB per shard: the byte count below cannot overflow.
  require_range("--max-shard-mb", flags.max_shard_mb, 1, int64_t{1} << 20);
  model::MakeModelOptions options;
  options.config = model::preset_config(flags.preset, model::parse_family(flags.family));
  if (flags.dtype != "f32" && flags.dtype != "bf16")
    fail_input("--dtype: unsupported '{}' (expected f32 or bf16)", flags.dtype);
  options.dtype = tensor::parse_dtype(flags.dtype);
  options.seed = flags.seed;
  options.out_dir = flags.out;
  options.max_shard_bytes = static_cast<size_t>(flags.max_shard_mb) << 20;
  // Check the tokenizer before writing anything: every id must be a row of the embedding.
  if (!flags.tokenizer_from.empty()) {
    const auto tok = text::Tokenizer::load(flags.tokenizer_from);
    if (tok->vocab_size() > options.config.vocab_size)
      fail_input(
          "--tokenizer-from {}: the tokenizer's highest id is {} but the model's vocab_size is {} "
          "(choose a preset whose vocabulary covers it, e.g. small-text or demo)",
          flags.tokenizer_from, tok->vocab_size() - 1, options.config.vocab_size);
  }
  std::string template_source;
  if (!flags.chat_template.empty()) {
    template_source = text::read_template_file(flags.chat_template, "--chat-template");
    try {
      text::JinjaTemplate check(template_source);  // refuse a broken template before writing
    } catch (const InputError& e) {
      fail_input("--chat-template {}: {}", flags.chat_template, e.what());
    }
  }
  const model::MakeModelResult r = model::make_model(options);
  if (!flags.tokenizer_from.empty()) {
    namespace fs = std::filesystem;
    for (const char* name : kTokenizerFiles) {
      const fs::path src = fs::path(flags.tokenizer_from) / name;
      if (!fs::exists(src)) continue;
      fs::copy_file(src, fs::path(flags.out) / name, fs::copy_options::overwrite_existing);
    }
    fmt::print("copied the tokenizer from {}\n", flags.tokenizer_from);
  }
  if (!template_source.empty()) {
    // chat_template.jinja wins over tokenizer_config.json's template when the model loads.
    std::ofstream out(std::filesystem::path(flags.out) / "chat_template.jinja", std::ios::binary);
    out << template_source;
    if (!out) fail("cannot write {}/chat_template.jinja", flags.out);
    fmt::print("wrote the chat template {}\n", flags.chat_template);
  }
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
  add_log_level_flag(*cmd);
  cmd->add_option("--family", flags->family, "glm_moe_dsa | deepseek_v32 | deepseek_v3")
      ->capture_default_str();
  cmd->add_option("--preset", flags->preset, "tiny | small-text | demo | bench-moe")->required();
  cmd->add_option("--seed", flags->seed, "RNG seed")->capture_default_str();
  cmd->add_option("--dtype", flags->dtype, "f32 | bf16 (the router bias is always f32)")
      ->capture_default_str();
  cmd->add_option("--out", flags->out, "output folder")->required();
  cmd->add_option("--max-shard-mb", flags->max_shard_mb,
                  "split into model-XXXXX-of-YYYYY.safetensors shards above this size")
      ->capture_default_str();
  cmd->add_option("--tokenizer-from", flags->tokenizer_from,
                  "copy tokenizer.json, tokenizer_config.json (and a chat template) from this "
                  "folder; its ids must fit the preset's vocab_size");
  cmd->add_option("--chat-template", flags->chat_template,
                  "write this Jinja file as the model's chat_template.jinja (it wins over the "
                  "tokenizer's template)");
  cmd->callback([flags] { run_make_model(*flags); });
}

}  // namespace handoff::cli
