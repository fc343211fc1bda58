// One decode step at a chosen context depth, without the prefill that would put it there: the
// cache is filled with random rows (a 64K prefill takes ~14 minutes on 2 cores; this takes
// seconds), then a single-token step runs at position `depth`. The step's cost does not depend
// on the values it reads, only on how many there are, so this measures what
// bench/long_context.sh's decode column measures, in a loop short enough to profile and tune.
//
//   decode_depth_bench MODEL_DIR [--depth N ...] [--threads T] [--steps S] [--batch B]
//                      [--versus B2] [--quantize fp8] [--roofline N]
//   (bf16 weights, or FP8 with --quantize fp8; bf16 latent and indexer caches:
//   bench/long_context.sh's setting)
// --batch B decodes B sequences in one step, each at the same depth over its own cache rows:
// the batched decode step of `bench offline --concurrency B`. --versus B2 alternates each step
// of B sequences with one of the first B2 of them, and reports the median over step pairs of
// the throughput ratio: on a machine whose speed drifts between runs (a shared host), a ratio
// of steps taken a few milliseconds apart holds still where one of separate runs does not.
// --roofline N (batch 1) reads the memory bandwidth as stream_read does (the faster of plain and
// non-temporal passes over 1 GiB) before the steps and after every N of them, and reports each
// block's share of the roofline: active weight bytes per token over the block's median step,
// against the mean of the readings around it. The guest's bandwidth moves 30-75 GB/s within
// minutes, so a reading seconds away from the steps it is set against says little.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/cache/paged_cache.h"
#include "handoff/model/model.h"
#include "handoff/tensor/thread_pool.h"
#include "stream_pass.h"

namespace {

using handoff::cache::PagedCache;

void fill_random(PagedCache& cache, int64_t tokens) {
  const auto& s = cache.shape();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> latent(static_cast<size_t>(s.kv_lora_rank + s.rope_dim));
  std::vector<float> key(static_cast<size_t>(std::max<int64_t>(s.index_dim, 1)));
  for (int64_t layer = 0; layer < s.num_layers; ++layer)
    for (int64_t slot = 0; slot < tokens; ++slot) {
      for (float& v : latent) v = normal(rng);
      cache.write_latent(layer, slot, latent.data(), latent.data() + s.kv_lora_rank);
      if (s.index_dim == 0) continue;
      for (float& v : key) v = normal(rng);
      cache.write_index_key(layer, slot, key.data());
    }
}

int run(int argc, char** argv) {
  CLI::App app{"One decode step at a chosen context depth, over a cache of random rows"};
  std::string dir;
  std::vector<int64_t> depths{512, 32768, 65536};
  int threads = 2, steps = 16, batch = 1, versus = 0, roofline = 0;
  std::string quantize;
  app.add_option("model", dir, "Model folder (config.json + safetensors)")->required();
  // Ranges rather than CLI::PositiveNumber, whose message for a non-number prints a 300-digit
  // bound.
  const CLI::Range positive(1, 1 << 20), non_negative(0, 1 << 20);
  app.add_option("--depth", depths, "Context depths to step at (repeatable)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->allow_extra_args(false);  // one value per --depth, so the model path may follow it
  app.add_option("--threads", threads, "Threads")->check(positive);
  app.add_option("--steps", steps, "Steps timed per depth")->check(positive);
  app.add_option("--batch", batch, "Sequences per step")->check(positive);
  app.add_option("--versus", versus,
                 "Alternate each step with one of the first B2 sequences (0: none)")
      ->check(non_negative);
  app.add_option("--quantize", quantize, "Quantise the matrices at load")
      ->check(CLI::IsMember({"fp8"}));
  app.add_option("--roofline", roofline,
                 "Read the bandwidth before the steps and after every N of them (batch 1)")
      ->check(non_negative);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help, or a usage error (as the handoff CLI exits)
  }
  if (versus > batch) {
    fmt::print(stderr, "--versus takes 1 to --batch ({}), or 0 for none; got {}\n", batch, versus);
    return 2;
  }
  if (roofline > 0 && batch != 1) {
    fmt::print(stderr, "--roofline needs --batch 1; got --batch {}\n", batch);
    return 2;
  }
  const bool fp8 = quantize == "fp8";
  handoff::tensor::set_num_threads(threads);

  handoff::model::LoadOptions options;
  options.dtype = handoff::tensor::DType::kBF16;
  options.latent_cache_dtype = handoff::tensor::DType::kBF16;
  options.index_cache_dtype = handoff::tensor::DType::kBF16;
  options.check_weights = false;
  options.quantize_fp8 = fp8;
  auto model = handoff::model::Model::load(dir, options);

  const int64_t block_size = 64;
  const int64_t max_depth = *std::max_element(depths.begin(), depths.end());
  const int64_t blocks = max_depth / block_size + 2;  // per sequence
  PagedCache cache(model->cache_shape(blocks * batch, block_size));
  fill_random(cache, (max_depth + 1) * batch);
  std::vector<handoff::cache::BlockTable> tables;
  for (int32_t s = 0; s < batch; ++s) {
    std::vector<int32_t> ids(static_cast<size_t>(blocks));
    for (int32_t b = 0; b < static_cast<int32_t>(blocks); ++b)
      ids[static_cast<size_t>(b)] = s * static_cast<int32_t>(blocks) + b;
    tables.emplace_back(ids);
  }
  model->profile_run(batch);

  fmt::print("{} threads, batch {}; ms per decode step (median of {}), tok/s\n", threads, batch,
             steps);
  // A new token per row and step, so that rows and steps route to different experts as real
  // decoding does: with one fixed token every step re-reads the same experts from cache, and
  // measured ~30 % faster than real decode on bench-moe (Zen 5, 2026-12-04).
  auto token_of = [](size_t row, int step) {
    return static_cast<int32_t>(1 + (row * 997 + static_cast<size_t>(step) * 7919) % 30000);
  };
  std::vector<int32_t> step_tokens(static_cast<size_t>(batch));  // the chunks' tokens
  std::unique_ptr<handoff::bench::StreamBuffer> stream;
  if (roofline > 0) stream = std::make_unique<handoff::bench::StreamBuffer>(int64_t{1} << 30);
  auto median_of = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (const int64_t depth : depths) {
    std::vector<handoff::model::SequenceChunk> chunks(static_cast<size_t>(batch));
    for (size_t s = 0; s < chunks.size(); ++s) {
      chunks[s].tokens = std::span<const int32_t>(&step_tokens[s], 1);
      chunks[s].start_pos = depth;
      chunks[s].blocks = &tables[s];
    }
    const std::vector<handoff::model::SequenceChunk> fewer(chunks.begin(), chunks.begin() + versus);
    auto step_ms = [&](const std::vector<handoff::model::SequenceChunk>& step, int number) {
      for (size_t r = 0; r < step.size(); ++r) step_tokens[r] = token_of(r, number);
      const auto t0 = std::chrono::steady_clock::now();
      model->forward(step, cache);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();
    };
    std::vector<double> ms, versus_ms, ratios, block, shares;
    const double bytes = static_cast<double>(model->active_weight_bytes_per_token(depth + 1));
    double bandwidth = stream ? stream->read_gbs() : 0.0;  // GB/s, read just before the block
    for (int s = 0; s < steps + 2; ++s) {
      const double took = step_ms(chunks, s);
      const double took_versus = versus > 0 ? step_ms(fewer, s) : 0.0;
      if (s < 2) continue;  // the first steps warm caches and TLBs
      ms.push_back(took);
      if (stream) {
        block.push_back(took);
        if (static_cast<int>(block.size()) == roofline) {
          const double after = stream->read_gbs(), step = median_of(block);
          shares.push_back(bytes / (step * 1e-3) / (0.5 * (bandwidth + after) * 1e9));
          fmt::print(
              "  {} steps: {:.2f} ms (median) at {:.1f} / {:.1f} GB/s: {:.1f} % of the roofline\n",
              roofline, step, bandwidth, after, 100.0 * shares.back());
          bandwidth = after;
          block.clear();
        }
      }
      if (versus == 0) continue;
      versus_ms.push_back(took_versus);
      ratios.push_back((batch / took) / (versus / took_versus));
    }
    // The mean is what bench offline's TPOT and llama-bench's t/s average (the side-by-side
    // table); the median holds still when a few steps are preempted.
    const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
    const double median = median_of(ms);  // sorts ms: min, p90 and max are read from it
    fmt::print(
        "depth {:>6}: {:7.2f} ms  {:6.2f} tok/s  (min {:.2f}, p90 {:.2f}, max {:.2f}; mean "
        "{:.2f})\n",
        depth, median, 1000.0 * batch / median, ms.front(), ms[ms.size() * 9 / 10], ms.back(),
        mean);
    if (!shares.empty()) {
      const double share = median_of(shares);
      fmt::print(
          "  roofline share: median {:.1f} % over {} blocks ({:.1f}-{:.1f} %), {:.1f} MB a token\n",
          100.0 * share, shares.size(), 100.0 * shares.front(), 100.0 * shares.back(), bytes / 1e6);
    }
    if (versus > 0) {
      const double versus_median = median_of(versus_ms);
      // Sorted here, before front() and back() are read (argument order is unspecified).
      const double ratio = median_of(ratios);
      fmt::print(
          "  batch {}: {:7.2f} ms  {:6.2f} tok/s; batch {} / batch {} throughput, median of "
          "step pairs: {:.3f} (range {:.3f}-{:.3f})\n",
          versus, versus_median, 1000.0 * versus / versus_median, batch, versus, ratio,
          ratios.front(), ratios.back());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "decode_depth_bench: {}\n", e.what());
    return 1;
  }
}
