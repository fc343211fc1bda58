// `handoff plan`: the parallel plan of a model and layout, before anything is built — which
// layers run sequence parallelism and why, who reduces o_proj, every layout and collective —
// and what every rank holds in memory: weights, cache bytes per token, tokens that fit.
#include <fmt/format.h>

#include <array>
#include <memory>
#include <nlohmann/json.hpp>

#include "handoff/cli/byte_size_flag.h"
#include "handoff/cli/commands.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/parallel_flags.h"
#include "handoff/error.h"
#include "handoff/model/config.h"
#include "handoff/parallel/memory_json.h"
#include "handoff/parallel/memory_plan.h"
#include "handoff/parallel/plan_json.h"

namespace handoff::cli {
namespace {

struct PlanArgs {
  std::string model_dir;
  std::string config_file;
  int64_t tokens = 1;
  int64_t logit_rows = 1;
  bool json = false;
  ParallelFlags parallel;
  std::string weight_dtype = "bf16";  // the engine's --dtype default
  // Empty: the engine's default for --weight-dtype (f32 caches with f32 weights, else bf16).
  std::string kv_cache_dtype;
  std::string indexer_cache_dtype;
  std::string mem_per_rank;  // empty: not given
  std::string mem_reserve;   // empty: not given (0)
};

parallel::MemoryOptions memory_options(const PlanArgs& args) {
  parallel::MemoryOptions o;
  const auto weights = parallel::parse_weight_dtype(args.weight_dtype);
  if (!weights) fail_input("--weight-dtype must be f32, bf16 or fp8, got '{}'", args.weight_dtype);
  o.weights = *weights;
  const std::string engine_default = o.weights == parallel::WeightDtype::kF32 ? "f32" : "bf16";
  const auto kv = parallel::parse_cache_dtype(args.kv_cache_dtype.empty() ? engine_default
                                                                          : args.kv_cache_dtype);
  if (!kv) fail_input("--kv-cache-dtype must be f32, bf16 or fp8, got '{}'", args.kv_cache_dtype);
  o.kv_cache = *kv;
  const auto index = parallel::parse_cache_dtype(
      args.indexer_cache_dtype.empty() ? engine_default : args.indexer_cache_dtype);
  if (!index)
    fail_input("--indexer-cache-dtype must be f32, bf16 or fp8, got '{}'",
               args.indexer_cache_dtype);
  o.indexer_cache = *index;
  if (!args.mem_per_rank.empty())
    o.mem_per_rank = byte_size_flag("--mem-per-rank", args.mem_per_rank, false);
  if (!args.mem_reserve.empty()) {
    if (!o.mem_per_rank) fail_input("--mem-reserve applies only with --mem-per-rank");
    o.reserve = byte_size_flag("--mem-reserve", args.mem_reserve, true);
  }
  return o;
}

// Binary units, the largest that keeps the value >= 1 (the exact bytes are in --json).
std::string size_text(int64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string rank_range(int first, int last) {
  return first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
}

// Ranks of a stage that hold the same bytes print as one row (they differ only where the
// vocab or an FP8 block boundary splits unevenly).
void print_memory(const nlohmann::json& m) {
  const auto& per_layer = m["cache_bytes_per_token_per_layer"];
  fmt::print(
      "memory: weights {}{}, kv cache {}, indexer cache {}\n", m["weight_dtype"].get<std::string>(),
      m.contains("fp8_weight_block")
          ? fmt::format(" (+ f32 scale per {}x{} block)", m["fp8_weight_block"][0].get<int64_t>(),
                        m["fp8_weight_block"][1].get<int64_t>())
          : "",
      m["kv_cache_dtype"].get<std::string>(), m["indexer_cache_dtype"].get<std::string>());
  if (m.contains("note")) fmt::print("  note: {}\n", m["note"].get<std::string>());
  fmt::print(
      "  cache per token per layer: latent {} B + indexer {} B = {} B (every tp rank of a stage "
      "holds its stage's layers in full)\n",
      per_layer["latent"].get<int64_t>(), per_layer["indexer"].get<int64_t>(),
      per_layer["total"].get<int64_t>());
  fmt::print("  {:>5} {:>9} {:>6} {:>28} {:>14} {:>13} {:>12}\n", "stage", "ranks", "layers",
             "weights per rank", "fp8 scales", "cache B/token", "tokens fit");
  const auto& ranks = m["ranks"];
  auto same = [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["stage"] == b["stage"] && a["weight_bytes"] == b["weight_bytes"] &&
           a["scale_bytes"] == b["scale_bytes"] && a["cache_tokens"] == b["cache_tokens"];
  };
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && same(ranks[i], ranks[j + 1])) ++j;
    const auto& r = ranks[i];
    const int64_t w = r["weight_bytes"].get<int64_t>();
    fmt::print(
        "  {:>5} {:>9} {:>6} {:>28} {:>14} {:>13} {:>12}\n", r["stage"].get<int>(),
        rank_range(r["rank"].get<int>(), ranks[j]["rank"].get<int>()), r["layers"].get<int64_t>(),
        fmt::format("{} ({} B)", size_text(w), w), size_text(r["scale_bytes"].get<int64_t>()),
        r["cache_bytes_per_token"].get<int64_t>(),
        r["cache_tokens"].is_null() ? "-" : fmt::format("{}", r["cache_tokens"].get<int64_t>()));
    std::string parts;
    for (const auto& [name, p] : r["weights"].items())
      parts += fmt::format("{}{} {}{}", parts.empty() ? "" : ", ", name,
                           size_text(p["bytes"].get<int64_t>()),
                           p["replicated"].get<bool>() ? " (replicated)" : "");
    fmt::print("        {}\n", parts);
    i = j + 1;
  }
  fmt::print("  weights over all ranks: {} ({} B)\n",
             size_text(m["weight_bytes_all_ranks"].get<int64_t>()),
             m["weight_bytes_all_ranks"].get<int64_t>());
  if (m["mem_per_rank"].is_null()) {
    fmt::print("  tokens that fit: give --mem-per-rank (needs at least {} per rank for weights)\n",
               size_text(m["min_mem_per_rank"].get<int64_t>()));
    return;
  }
  const int64_t budget = m["mem_per_rank"].get<int64_t>();
  const int64_t reserve = m["reserve_per_rank"].get<int64_t>();
  fmt::print(
      "  budget per rank: {} B ({}), of which {} B ({}) reserved for activations and "
      "scratch\n",
      budget, size_text(budget), reserve, size_text(reserve));
  fmt::print(
      "  cache tokens for the whole job: {} (the fewest of any rank: rank {}); --kv-cache-tokens "
      "at most that, in whole --block-size blocks\n",
      m["max_tokens"].get<int64_t>(), m["limiting_rank"].get<int>());
}

std::string collectives_text(const nlohmann::json& list) {
  if (list.empty()) return "-";
  std::string out;
  for (const auto& c : list)
    out += fmt::format("{}{}({}) {} B", out.empty() ? "" : ", ", c["op"].get<std::string>(),
                       c["group"].get<std::string>(), c["bytes"].get<int64_t>());
  return out;
}

void print_table(const nlohmann::json& j) {
  const auto& par = j["parallel"];
  fmt::print("plan: tp {} pp {} sp {} policy {} boundary {}, {} tokens per step\n",
             par["tp"].get<int>(), par["pp"].get<int>(), par["sp"].get<bool>() ? "on" : "off",
             par["pp_sp_policy"].get<std::string>(), par["pp_boundary"].get<std::string>(),
             j["tokens"].get<int64_t>());
  fmt::print("gate: SP inside stages {}\n",
             j["gate"]["sp_inside_stages"].get<bool>() ? "ON" : "off");
  int i = 1;
  for (const auto& c : j["gate"]["conditions"])
    fmt::print("  {}. {:<15} {}  {}\n", i++, c["name"].get<std::string>(),
               c["pass"].get<bool>() ? "pass" : "FAIL", c["reason"].get<std::string>());
  if (j.contains("warning")) fmt::print("WARNING: {}\n", j["warning"].get<std::string>());
  fmt::print("pp_intermediate_token_count({}) = {}\n", j["tokens"].get<int64_t>(),
             j["pp_intermediate_token_count"].get<int64_t>());
  for (const auto& st : j["stages"]) {
    fmt::print("stage {}: layers [{}, {}), entry {} [{}]\n", st["stage"].get<int>(),
               st["first_layer"].get<int64_t>(), st["end_layer"].get<int64_t>(),
               st["entry"]["layout"].get<std::string>(),
               collectives_text(st["entry"]["collectives"]));
    fmt::print("  {:>5} {:<5} {:<3} {:<7} {:<23} {:<5} {:<5} {}\n", "layer", "kind", "sp", "o_proj",
               "moe", "in", "out", "collectives");
    for (const auto& l : st["layers"])
      fmt::print("  {:>5} {:<5} {:<3} {:<7} {:<23} {:<5} {:<5} {}\n", l["index"].get<int64_t>(),
                 l["kind"].get<std::string>(), l["sp"].get<bool>() ? "on" : "off",
                 l["o_proj_reduce"].get<bool>() ? "reduce" : "partial",
                 l["moe_mode"].get<std::string>(), l["input_layout"].get<std::string>(),
                 l["output_layout"].get<std::string>(), collectives_text(l["collectives"]));
    const auto& ex = st["exit"];
    fmt::print("  exit: contract {}, layout {} [{}]\n",
               ex["contract"].is_null() ? "none (last stage)" : ex["contract"].get<std::string>(),
               ex["layout"].get<std::string>(), collectives_text(ex["collectives"]));
    if (st.contains("head"))
      fmt::print("  head: [{}]\n", collectives_text(st["head"]["collectives"]));
  }
  fmt::print("totals per step:");
  for (const auto& [op, t] : j["totals"].items())
    fmt::print(" {} {} calls {} B;", op, t["calls"].get<int64_t>(), t["bytes"].get<int64_t>());
  fmt::print("\n");
}

void run_plan(const PlanArgs& args) {
  if (args.model_dir.empty() == args.config_file.empty())
    fail_input("give exactly one of --model DIR or --config FILE");
  require_range("--tokens", args.tokens, 1, int64_t{1} << 24);
  require_range("--logit-rows", args.logit_rows, 0, args.tokens);
  const std::string path =
      args.config_file.empty() ? args.model_dir + "/config.json" : args.config_file;
  const parallel::ParallelOptions options = parallel_options(args.parallel);  // flags first
  const parallel::MemoryOptions memory = memory_options(args);
  const model::ModelConfig config = model::load_config(path);
  const parallel::Plan plan = parallel::make_plan(config, options);
  nlohmann::json j = parallel::plan_to_json(plan, config, args.tokens, args.logit_rows);
  j["memory"] = parallel::memory_to_json(parallel::plan_memory(config, plan, memory));
  if (args.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    print_table(j);
    print_memory(j["memory"]);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "Print the parallel plan: gate, layouts, collectives");
  cmd->add_option("--model", args->model_dir, "Model folder (reads its config.json)");
  cmd->add_option("--config", args->config_file, "A bare config.json (no weights needed)");
  cmd->add_option("--tokens", args->tokens, "Tokens in the step (default 1)");
  cmd->add_option("--logit-rows", args->logit_rows, "Rows that need logits (default 1)");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->add_option("--weight-dtype", args->weight_dtype,
                  "Weights held per rank: bf16 (default), f32 or fp8 (e4m3 + f32 128x128 block "
                  "scales; embedding, lm_head, router, norms stay as published)");
  cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype,
                  "MLA latent cache: f32, bf16 or fp8 (default: f32 with --weight-dtype f32, else "
                  "bf16, as the engine)");
  cmd->add_option("--indexer-cache-dtype", args->indexer_cache_dtype,
                  "DSA indexer key cache: f32, bf16 or fp8 (default as --kv-cache-dtype)");
  cmd->add_option("--mem-per-rank", args->mem_per_rank,
                  "Memory per rank, e.g. 80G (10^9) or 141GiB (2^30): cache tokens that fit");
  cmd->add_option("--mem-reserve", args->mem_reserve,
                  "Bytes per rank kept for activations and scratch (default 0; needs "
                  "--mem-per-rank)");
  add_parallel_flags(*cmd, args->parallel, false);
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace handoff::cli
