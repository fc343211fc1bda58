// Prefill with MLA's two forms in one process: the model loaded twice, once with every row
// absorbed (per_head_prefill_min_tokens 0) and once with the default per-head form for prompt
// rows, and the same prompt prefilled by each in turn. The machine's speed drifts between runs
// (a shared host), so the ratio of two prefills seconds apart is reported per round, with the
// median of the rounds.
//
//   prefill_form_bench MODEL_DIR [--tokens N] [--chunk C] [--rounds R] [--threads T]
//                      [--quantize fp8]
//   (bf16 weights, bf16 activations and caches: the CLI's defaults at --dtype bf16)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "handoff/engine/generator.h"
#include "handoff/engine/sampler.h"
#include "handoff/model/model.h"
#include "handoff/tensor/thread_pool.h"
#include "median.h"

namespace {}  // namespace

using handoff::bench::median;

int main(int argc, char** argv) {
  CLI::App app{"Prefill in MLA's absorbed and per-head forms, alternating in one process"};
  std::string dir, quantize;
  int64_t tokens = 512, chunk = 512;
  int threads = 2, rounds = 8;
  app.add_option("model", dir, "Model folder (config.json + safetensors)")->required();
  app.add_option("--tokens", tokens, "Prompt tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--chunk", chunk, "Prompt tokens per step (the serving default: 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--rounds", rounds, "Timed rounds (after one untimed)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--threads", threads, "Threads")->check(CLI::Range(1, 1 << 20));
  app.add_option("--quantize", quantize, "Quantise the matrices at load")
      ->check(CLI::IsMember({"fp8"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  handoff::tensor::set_num_threads(threads);
  handoff::model::LoadOptions options;
  options.dtype = handoff::tensor::DType::kBF16;
  options.activations = handoff::ops::ActivationPrecision::kBf16;
  options.latent_cache_dtype = handoff::tensor::DType::kBF16;
  options.index_cache_dtype = handoff::tensor::DType::kBF16;
  options.check_weights = false;
  options.quantize_fp8 = quantize == "fp8";
  options.per_head_prefill_min_tokens = 0;
  auto absorbed = handoff::model::Model::load(dir, options);
  options.per_head_prefill_min_tokens = handoff::model::LoadOptions{}.per_head_prefill_min_tokens;
  auto per_head = handoff::model::Model::load(dir, options);

  // Ids spread over the first 1000 of the vocabulary: the cost does not depend on which.
  std::vector<int32_t> prompt(static_cast<size_t>(tokens));
  const int64_t vocab = std::min<int64_t>(1000, absorbed->config().vocab_size);
  for (int64_t i = 0; i < tokens; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % vocab);
  const int64_t step = std::min(chunk, tokens);
  handoff::engine::Generator a(*absorbed, tokens + 1, 16, step), b(*per_head, tokens + 1, 16, step);
  handoff::engine::GenerationOptions go;
  go.max_new_tokens = 1;
  go.prefill_chunk = chunk;
  auto prefill = [&](handoff::engine::Generator& g) {
    handoff::engine::Sampler sampler(0);
    return g.run(prompt, go, sampler).prefill_seconds;
  };
  fmt::print("{} tokens in steps of {}, {} threads{}; prefill seconds (tokens/s)\n", tokens, step,
             threads, options.quantize_fp8 ? ", fp8" : "");
  std::vector<double> ta, tb, ratio;
  for (int r = 0; r <= rounds; ++r) {
    double x = 0, y = 0;
    if (r % 2 == 0) {  // alternate which goes first
      x = prefill(a);
      y = prefill(b);
    } else {
      y = prefill(b);
      x = prefill(a);
    }
    if (r == 0) continue;  // warm-up
    ta.push_back(x);
    tb.push_back(y);
    ratio.push_back(x / y);
    fmt::print("round {}: absorbed {:.3f} ({:.1f}), per-head {:.3f} ({:.1f}), ratio {:.3f}\n", r, x,
               tokens / x, y, tokens / y, x / y);
  }
  fmt::print(
      "median: absorbed {:.3f} s ({:.1f} tok/s), per-head {:.3f} s ({:.1f} tok/s); "
      "per-round ratio {:.3f}\n",
      median(ta), tokens / median(ta), median(tb), tokens / median(tb), median(ratio));
}
