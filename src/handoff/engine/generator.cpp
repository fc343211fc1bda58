#include "handoff/engine/generator.h"

#include <algorithm>
#include <chrono>

#include "handoff/error.h"

namespace handoff::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<float> row(const tensor::Tensor& logits, int64_t r) {
  const float* p = logits.data<float>() + r * logits.size(1);
  return {p, p + logits.size(1)};
}

}  // namespace

Generator::Generator(model::Model& model, int64_t max_context, int64_t block_size,
                     int64_t step_tokens)
    : model_(model),
      max_context_(max_context),
      blocks_((max_context + block_size - 1) / block_size, block_size),
      cache_(model.cache_shape((max_context + block_size - 1) / block_size, block_size)) {
  model.profile_run(step_tokens > 0 ? std::min(step_tokens, max_context) : max_context);
}

tensor::Tensor Generator::forward(const GenerationOptions& options,
                                  const model::SequenceChunk& chunk, model::StepTrace* trace) {
  const int rank = model_.world_rank();
  if (rank == options.fail_rank && forwards_ == options.fail_at_step)
    fail("rank {}: injected failure at step {} (--fail-rank {} --fail-at-step {})", rank, forwards_,
         options.fail_rank, options.fail_at_step);
  ++forwards_;
  return model_.forward({chunk}, cache_, trace);
}

GenerationResult Generator::run(const std::vector<int32_t>& prompt,
                                const GenerationOptions& options, Sampler& sampler,
                                const std::vector<int32_t>& forced) {
  if (prompt.empty()) fail_input("a prompt must have at least one token");
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t total = prompt_len + options.max_new_tokens;
  if (total > max_context_)
    fail_input("prompt ({} tokens) + max_new_tokens ({}) exceeds the context of {} tokens",
               prompt_len, options.max_new_tokens, max_context_);
  if (!forced.empty() && static_cast<int64_t>(forced.size()) < options.max_new_tokens)
    fail_input("forced tokens: {} given, {} decode steps requested", forced.size(),
               options.max_new_tokens);
  const int64_t vocab = model_.config().vocab_size;
  GenerationResult result;
  result.prompt = prompt;
  cache::BlockTable table;
  blocks_.reserve(table, total);
  model::StepTrace trace;
  model::StepTrace* tr = options.record ? &trace : nullptr;

  // Prefill, in chunks when asked; the last chunk's last row predicts the first new token.
  const auto start = std::chrono::steady_clock::now();
  const int64_t chunk = options.prefill_chunk > 0 ? options.prefill_chunk : prompt_len;
  tensor::Tensor logits;
  if (options.record) {
    result.indexer_topk_prefill.assign(static_cast<size_t>(model_.config().num_hidden_layers), {});
    result.experts_prefill.assign(static_cast<size_t>(model_.config().num_hidden_layers), {});
  }
  for (int64_t begin = 0; begin < prompt_len; begin += chunk) {
    const int64_t n = std::min(chunk, prompt_len - begin);
    model::SequenceChunk c{std::span<const int32_t>(prompt.data() + begin, static_cast<size_t>(n)),
                           begin, &table, options.record};
    logits = forward(options, c, tr);
    if (options.record) {
      if (logits.defined())
        for (int64_t r = 0; r < n; ++r) result.prefill_logits.push_back(row(logits, r));
      for (size_t l = 0; l < trace.indexer_topk.size(); ++l) {
        auto& dst = result.indexer_topk_prefill[l];
        dst.insert(dst.end(), trace.indexer_topk[l].begin(), trace.indexer_topk[l].end());
        auto& edst = result.experts_prefill[l];
        edst.insert(edst.end(), trace.experts[l].begin(), trace.experts[l].end());
      }
    }
  }
  result.prefill_seconds = seconds_since(start);

  const auto decode_start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    // The last stage samples; with several ranks its first tp rank broadcasts the token.
    int32_t sampled = 0;
    if (logits.defined()) {
      const float* last = logits.data<float>() + (logits.size(0) - 1) * vocab;
      const int64_t n = options.sample_vocab > 0 ? std::min(vocab, options.sample_vocab) : vocab;
      try {
        require_finite_logits(last, n);
      } catch (const NonFiniteLogitsError& e) {
        throw NonFiniteLogitsError(fmt::format("after {} generated tokens: {}", step, e.what()));
      }
      sampled = sampler.sample(last, n, options.sampling);
    }
    sampled = model_.share_sampled_token(sampled);
    const int32_t fed = forced.empty() ? sampled : forced[static_cast<size_t>(step)];
    result.generated.push_back(sampled);
    if (options.on_token) options.on_token(sampled);
    model::SequenceChunk c{std::span<const int32_t>(&fed, 1), prompt_len + step, &table, false};
    logits = forward(options, c, tr);
    if (options.record) {
      if (logits.defined()) result.decode_logits.push_back(row(logits, 0));
      std::vector<std::vector<int32_t>> per_layer;
      for (auto& rows : trace.indexer_topk)
        per_layer.push_back(rows.empty() ? std::vector<int32_t>{} : rows[0]);
      result.indexer_topk_decode.push_back(std::move(per_layer));
    }
  }
  result.decode_seconds = seconds_since(decode_start);
  blocks_.release(table);
  return result;
}

}  // namespace handoff::engine
