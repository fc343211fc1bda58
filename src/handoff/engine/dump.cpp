#include "handoff/engine/dump.h"

#include <string>

#include "handoff/engine/sampler.h"

namespace handoff::engine {

nlohmann::json golden_format_dump(const model::ModelConfig& config,
                                  const std::vector<GenerationResult>& results) {
  nlohmann::json prompts = nlohmann::json::array();
  for (const GenerationResult& r : results) {
    nlohmann::json p;
    p["tokens"] = r.prompt;
    p["n_decode"] = r.generated.size();
    p["prefill_logits"] = r.prefill_logits;
    p["prefill_last_logits"] = r.prefill_logits.empty() ? nlohmann::json(nullptr)
                                                        : nlohmann::json(r.prefill_logits.back());
    p["greedy_tokens"] = r.generated;
    p["decode_logits"] = r.decode_logits;
    if (!r.decode_logits.empty()) {
      const auto& last = r.decode_logits.back();
      p["next_token_after_decode"] = argmax(last.data(), static_cast<int64_t>(last.size()));
    }
    p["indexer_topk_prefill"] = r.indexer_topk_prefill;
    p["indexer_topk_decode"] = r.indexer_topk_decode;
    nlohmann::json experts = nlohmann::json::object();
    for (size_t l = 0; l < r.experts_prefill.size(); ++l)
      if (config.is_moe_layer(static_cast<int64_t>(l)))
        experts[std::to_string(l)] = r.experts_prefill[l];
    p["moe_experts_prefill"] = experts;
    prompts.push_back(std::move(p));
  }
  nlohmann::json out;
  out["format"] = "dsv32-oracle-golden/1";
  out["engine"] = "handoff";
  out["prompts"] = std::move(prompts);
  return out;
}

}  // namespace handoff::engine
