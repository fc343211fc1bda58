// `handoff plan`: the parallel plan of a model and layout, before anything is built — which
// layers run sequence parallelism and why, who reduces o_proj, every layout and collective.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "handoff/cli/commands.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/parallel_flags.h"
#include "handoff/error.h"
#include "handoff/model/config.h"
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
};

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
  const model::ModelConfig config = model::load_config(path);
  const parallel::Plan plan = parallel::make_plan(config, options);
  const nlohmann::json j = parallel::plan_to_json(plan, config, args.tokens, args.logit_rows);
  if (args.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    print_table(j);
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
  add_parallel_flags(*cmd, args->parallel, false);
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace handoff::cli
