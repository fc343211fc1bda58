// `handoff generate`: token ids in, generated ids and speed out; --dump writes everything a
// golden comparison needs.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "handoff/cli/activations_flag.h"
#include "handoff/cli/commands.h"
#include "handoff/cli/engine_flags.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/log_flags.h"
#include "handoff/cli/parallel_flags.h"
#include "handoff/cli/peak_memory.h"
#include "handoff/cli/quantize_flag.h"
#include "handoff/cli/rank_gather.h"
#include "handoff/engine/dump.h"
#include "handoff/engine/generator.h"
#include "handoff/engine/sampler.h"
#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/model/model.h"
#include "handoff/parallel/plan_json.h"
#include "handoff/runtime/count_gather.h"
#include "handoff/runtime/rank_launcher.h"
#include "handoff/tensor/thread_pool.h"
#include "handoff/text/chat_template.h"
#include "handoff/text/stream_decoder.h"
#include "handoff/text/tokenizer.h"

namespace handoff::cli {
namespace {

// --max-new-tokens and --prefill-chunk: far beyond any context these models have.
constexpr int64_t kMaxTokensFlag = int64_t{1} << 24;

// The roofline's denominator: weight bytes per decode step, averaged over the run's steps (a
// step's bytes depend on how many keys it attends: Model::active_weight_bytes_per_token). Token
// j >= 1 of a generation comes from the step over position prompt + j - 1.
size_t mean_decode_bytes(const model::Model& model,
                         const std::vector<engine::GenerationResult>& results) {
  double sum = 0;
  int64_t steps = 0;
  for (const auto& r : results) {
    const auto prompt = static_cast<int64_t>(r.prompt.size());
    for (int64_t j = 1; j < static_cast<int64_t>(r.generated.size()); ++j, ++steps)
      sum += static_cast<double>(model.active_weight_bytes_per_token(prompt + j));
  }
  if (steps == 0) {  // no decode step ran: the one after the first prompt
    const int64_t prompt = results.empty() ? 0 : static_cast<int64_t>(results[0].prompt.size());
    return model.active_weight_bytes_per_token(prompt + 1);
  }
  return static_cast<size_t>(sum / static_cast<double>(steps) + 0.5);
}

struct GenerateArgs {
  std::string model_dir;
  std::string prompt_ids;
  std::string prompt_text;
  bool chat = false;
  std::string prompts_json;
  std::string force_tokens;
  std::string dump;
  std::string dtype = "bf16";
  std::string quantize;     // empty or "fp8"
  std::string activations;  // empty, "bf16" or "exact"
  CacheDtypeFlags cache_dtypes;
  int64_t max_new_tokens = 16;
  int64_t prefill_chunk = 512;  // as serve's --max-num-batched-tokens
  std::optional<int> threads;   // not given: all cores
  bool no_check_weights = false;
  uint64_t seed = 0;
  engine::SamplingParams sampling;
  ParallelFlags parallel;
  std::string comm_report;
  int fail_rank = -1;
  int64_t fail_at_step = -1;
};

std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail_input("--prompt-ids: '{}' is not a token id", item);
    }
  }
  if (ids.empty()) fail_input("--prompt-ids is empty");
  return ids;
}

nlohmann::json read_json(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) fail_input("{} {}: cannot open", flag, path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail_input("{} {}: invalid JSON: {}", flag, path, e.what());
  }
}

std::vector<std::vector<int32_t>> read_id_lists(const std::string& path, const char* flag) {
  const nlohmann::json j = read_json(path, flag);
  if (!j.is_array()) fail_input("{} {}: expected a JSON list of token-id lists", flag, path);
  std::vector<std::vector<int32_t>> lists;
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_array()) fail_input("{} {}: entry {} is not a list", flag, path, i);
    std::vector<int32_t> ids;
    for (const auto& v : j[i]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        fail_input("{} {}: entry {} holds a non-token value {}", flag, path, i, v.dump());
      ids.push_back(v.get<int32_t>());
    }
    lists.push_back(std::move(ids));
  }
  return lists;
}

// Every flag on its own, before any file is read: a typo fails at once, not after the load.
void check_flags(const GenerateArgs& args) {
  if (static_cast<int>(!args.prompt_ids.empty()) + static_cast<int>(!args.prompts_json.empty()) +
          static_cast<int>(!args.prompt_text.empty()) !=
      1)
    fail_input("give exactly one of --prompt, --prompt-ids or --prompts-json");
  if (args.chat && args.prompt_text.empty()) fail_input("--chat needs --prompt");
  require_range("--max-new-tokens", args.max_new_tokens, 0, kMaxTokensFlag);
  require_range("--prefill-chunk", args.prefill_chunk, 0, kMaxTokensFlag);
  if (args.threads) require_range("--threads", *args.threads, 1, kMaxThreadsFlag);
  require_range("--fail-rank", args.fail_rank, -1, INT32_MAX);
  require_range("--fail-at-step", args.fail_at_step, -1, INT64_MAX);
  if ((args.fail_rank >= 0) != (args.fail_at_step >= 0))
    fail_input("--fail-rank and --fail-at-step go together");
  // The sampling parameters share their checks with the API; the message names the flag.
  const std::pair<const char*, engine::SamplingParams> one_at_a_time[] = {
      {"--temperature", {.temperature = args.sampling.temperature}},
      {"--top-p", {.top_p = args.sampling.top_p}},
      {"--top-k", {.top_k = args.sampling.top_k}},
  };
  for (const auto& [flag, params] : one_at_a_time) {
    try {
      engine::validate(params);
    } catch (const InputError& e) {
      fail_input("{}: {}", flag, e.what());
    }
  }
  engine::validate(args.sampling);
  const parallel::ParallelOptions popts = parallel_options(args.parallel);
  if (args.fail_rank >= popts.tp * popts.pp)
    fail_input("--fail-rank {} is not a rank of a {}-rank run", args.fail_rank,
               popts.tp * popts.pp);
}

void run_generate(const GenerateArgs& args) {
  check_flags(args);
  // Text prompts go through the model folder's tokenizer (and chat template with --chat).
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::vector<int32_t> text_ids;
  if (!args.prompt_text.empty()) {
    tokenizer = text::Tokenizer::load(args.model_dir);
    if (args.chat) {
      const auto tmpl = text::ChatTemplate::load(args.model_dir);
      text::ChatRequest request;
      request.messages.push_back({{"role", "user"}, {"content", args.prompt_text}});
      request.add_generation_prompt = true;
      text_ids = tokenizer->encode(tmpl->render(request), false);  // the template adds BOS
    } else {
      text_ids = tokenizer->encode(args.prompt_text, true);
    }
  }
  if (args.threads) tensor::set_num_threads(*args.threads);
  std::vector<std::vector<int32_t>> prompts =
      !text_ids.empty()         ? std::vector<std::vector<int32_t>>{text_ids}
      : args.prompt_ids.empty() ? read_id_lists(args.prompts_json, "--prompts-json")
                                : std::vector<std::vector<int32_t>>{parse_id_list(args.prompt_ids)};
  std::vector<std::vector<int32_t>> forced;
  if (!args.force_tokens.empty()) {
    forced = read_id_lists(args.force_tokens, "--force-tokens");
    if (forced.size() != prompts.size())
      fail_input("--force-tokens {}: {} lists for {} prompts", args.force_tokens, forced.size(),
                 prompts.size());
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty()) fail_input("prompt {} is empty", i);

  const parallel::ParallelOptions popts = parallel_options(args.parallel);
  // Plan before any rank starts: a layout that cannot run fails here, once, with its reason.
  const model::ModelConfig config = model::load_config(args.model_dir + "/config.json");
  const parallel::Plan plan = parallel::make_plan(config, popts);
  {  // the cache flags fail here, before any rank loads (the ranks apply them again below)
    model::LoadOptions check;
    check.dtype = tensor::parse_dtype(args.dtype);
    apply_cache_dtype_flags(args.cache_dtypes, config, check);
    apply_quantize_flag(args.quantize, config, check);
    apply_activations_flag(args.activations, check);
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    for (int32_t id : prompts[i])
      if (id >= config.vocab_size)
        fail_input("prompt {}: token id {} is outside the vocabulary of {}", i, id,
                   config.vocab_size);
  if (plan.sp_requested_but_inactive())
    log::warn("--sp on is requested but inactive in every layer: {}", [&] {
      std::string why;
      for (const auto& c : plan.gate.conditions)
        if (!c.pass) why += (why.empty() ? "" : "; ") + c.reason;
      return why;
    }());
  int64_t max_context = 0;
  for (const auto& p : prompts)
    max_context =
        std::max<int64_t>(max_context, static_cast<int64_t>(p.size()) + args.max_new_tokens);
  // Checked before the load: the cache is sized for max_context.
  if (max_context > config.max_position_embeddings)
    fail_input(
        "the longest prompt plus --max-new-tokens {} is {} tokens, beyond the model's "
        "max_position_embeddings {}",
        args.max_new_tokens, max_context, config.max_position_embeddings);
  engine::GenerationOptions options;
  options.max_new_tokens = args.max_new_tokens;
  options.prefill_chunk = args.prefill_chunk;
  options.sampling = args.sampling;
  options.record = !args.dump.empty();
  options.fail_rank = args.fail_rank;
  if (tokenizer) options.sample_vocab = tokenizer->vocab_size();
  options.fail_at_step = args.fail_at_step;

  const int ranks = popts.tp * popts.pp;
  const int root = (popts.pp - 1) * popts.tp;  // the last stage's first tp rank samples
  std::vector<engine::GenerationResult> results;
  std::vector<comm::CommCounts> counts(static_cast<size_t>(ranks));
  bool is_root = false;
  size_t active_bytes = 0;
  std::mutex mutex;
  runtime::run_ranks(
      backend(args.parallel), popts.tp, popts.pp, comm_timeout(args.parallel),
      [&](comm::Communicator& comm) {
        model::LoadOptions load;
        load.dtype = tensor::parse_dtype(args.dtype);
        load.parallel = popts;
        load.comm = &comm;
        load.check_weights = !args.no_check_weights;
        apply_cache_dtype_flags(args.cache_dtypes, config, load);
        apply_quantize_flag(args.quantize, config, load);
        apply_activations_flag(args.activations, load);
        auto model = model::Model::load(args.model_dir, load);
        engine::Generator generator(*model, max_context, 16, args.prefill_chunk);
        log::info("rank {}: {}", comm.topology().rank, generator.cache().summary());
        engine::Sampler sampler(args.seed);
        std::vector<engine::GenerationResult> mine;
        // The reporting rank prints the text as it is generated, not when the run is done.
        const bool prints_text = tokenizer && comm.topology().rank == root;
        for (size_t i = 0; i < prompts.size(); ++i) {
          engine::GenerationOptions o = options;
          std::optional<text::StreamDecoder> decoder;
          if (prints_text) {
            fmt::print("prompt text: {}\ngenerated text: ", tokenizer->decode(prompts[i]));
            std::fflush(stdout);
            decoder.emplace(*tokenizer);
            o.on_token = [&](int32_t id) {
              try {
                fmt::print("{}", decoder->push(id));
              } catch (const InputError&) {
                // an id without text (a gap in the tokenizer's ids) shows nothing
              }
              std::fflush(stdout);
            };
          }
          mine.push_back(generator.run(prompts[i], o, sampler,
                                       forced.empty() ? std::vector<int32_t>{} : forced[i]));
          if (prints_text) {
            fmt::print("{}\n", decoder->flush());
            std::fflush(stdout);  // the line ends before the next log line on stderr
          }
        }
        // A rank records the layers of its own stage: the reporter collects the others'.
        if (options.record && popts.pp > 1) gather_stage_traces(comm, plan, root, mine);
        // Under MPI each process holds its own rank's counts: gather them to the reporter.
        std::vector<comm::CommCounts> gathered =
            backend(args.parallel) == runtime::Backend::kMpi && ranks > 1
                ? runtime::gather_counts(comm, root)
                : std::vector<comm::CommCounts>{};
        if (backend(args.parallel) == runtime::Backend::kMpi)
          log::info("rank {}: peak resident memory (VmHWM) {:.1f} MiB", comm.topology().rank,
                    static_cast<double>(peak_resident_bytes()) / (1 << 20));
        std::lock_guard lock(mutex);
        if (!gathered.empty())
          counts = std::move(gathered);
        else
          counts[static_cast<size_t>(comm.topology().rank)] = comm.counts();
        if (comm.topology().rank == root) {
          results = std::move(mine);
          is_root = true;
          active_bytes = mean_decode_bytes(*model, results);
        }
      });
  if (!is_root) return;  // another MPI process reports
  if (backend(args.parallel) == runtime::Backend::kLocal)
    log::info("peak resident memory (VmHWM) of this process ({} rank{}): {:.1f} MiB", ranks,
              ranks == 1 ? "" : "s as threads",
              static_cast<double>(peak_resident_bytes()) / (1 << 20));

  double prefill_s = 0, decode_s = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    fmt::print("prompt {}: {} tokens -> generated: {}\n", i, r.prompt.size(),
               fmt::join(r.generated, ","));
    prefill_s += r.prefill_seconds;
    decode_s += r.decode_seconds;
    prefill_tokens += static_cast<int64_t>(r.prompt.size());
    decode_tokens += static_cast<int64_t>(r.generated.size());
  }
  fmt::print("prefill: {} tokens in {:.3f} s = {:.1f} tokens/s\n", prefill_tokens, prefill_s,
             prefill_s > 0 ? static_cast<double>(prefill_tokens) / prefill_s : 0.0);
  fmt::print("decode: {} tokens in {:.3f} s = {:.1f} tokens/s\n", decode_tokens, decode_s,
             decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0.0);
  // The decode roofline's denominator (bench/bench_moe.sh divides read bandwidth by it).
  fmt::print("active weight bytes per token: {}\n", active_bytes);
  if (!args.dump.empty()) {
    std::ofstream out(args.dump);
    if (!out) fail_input("--dump {}: cannot write ({})", args.dump, std::strerror(errno));
    out << engine::golden_format_dump(config, results).dump();
    if (!out) fail("--dump {}: write failed", args.dump);
  }
  if (!args.comm_report.empty()) {
    std::vector<comm::CommCounts> per_stage;
    for (int s = 0; s < popts.pp; ++s)
      per_stage.push_back(counts[static_cast<size_t>(s * popts.tp)]);
    std::ofstream out(args.comm_report);
    if (!out)
      fail_input("--comm-report {}: cannot write ({})", args.comm_report, std::strerror(errno));
    out << parallel::report_to_json(plan, per_stage).dump(2);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens from a text or token-id prompt");
  add_log_level_flag(*cmd);
  cmd->add_option("--model", args->model_dir, "Model folder (config.json + safetensors)")
      ->required();
  cmd->add_option("--prompt-ids", args->prompt_ids, "Comma-separated prompt token ids");
  cmd->add_option("--prompt", args->prompt_text,
                  "Text prompt (encoded with the model folder's tokenizer, BOS added)");
  cmd->add_flag("--chat", args->chat,
                "Render --prompt as one user message through the chat template");
  cmd->add_option("--prompts-json", args->prompts_json, "JSON list of token-id lists");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens to generate per prompt");
  cmd->add_option("--temperature", args->sampling.temperature, "0 = greedy");
  cmd->add_option("--top-p", args->sampling.top_p, "Nucleus sampling mass");
  cmd->add_option("--top-k", args->sampling.top_k, "Keep the k most likely tokens (0 = all)");
  cmd->add_option("--seed", args->seed, "Sampling seed");
  cmd->add_option("--dtype", args->dtype, "Weight dtype: bf16 (default) or f32")
      ->check(CLI::IsMember({"f32", "bf16"}));
  add_quantize_flag(*cmd, args->quantize);
  add_activations_flag(*cmd, args->activations);
  add_cache_dtype_flags(*cmd, args->cache_dtypes);
  cmd->add_option("--force-tokens", args->force_tokens,
                  "JSON list (per prompt) of tokens to feed at each decode step");
  cmd->add_option("--dump", args->dump, "Write logits, indexer and expert choices (golden format)");
  cmd->add_option("--prefill-chunk", args->prefill_chunk,
                  "Feed prompts in chunks of N tokens (0: the whole prompt in one step)");
  cmd->add_option_function<int>(
      "--threads", [args](const int& n) { args->threads = n; },
      "Kernel threads (default: all cores)");
  cmd->add_flag("--no-check-weights", args->no_check_weights,
                "Skip the NaN/Inf scan of every weight at load (saves one pass over the weights)");
  add_parallel_flags(*cmd, args->parallel, true);
  cmd->add_option("--comm-report", args->comm_report,
                  "Write the measured collectives (calls, bytes per layer) as JSON");
  cmd->add_option("--fail-rank", args->fail_rank, "Fault injection: this rank throws ...");
  cmd->add_option("--fail-at-step", args->fail_at_step, "... before this forward (0-based)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace handoff::cli
