#pragma once
// vLLM's /tokenize and /detokenize: text or chat messages to token ids (as the completions and
// chat routes would feed them to the model) and ids back to text.
//   POST /tokenize   {model?, prompt, add_special_tokens?=true, return_token_strs?}
//                    {model?, messages, add_generation_prompt?=true, add_special_tokens?=false,
//                     tools?, chat_template_kwargs?, return_token_strs?}
//                 -> {count, max_model_len, tokens[, token_strs]}
//   POST /detokenize {model?, tokens} -> {prompt}
#include <nlohmann/json.hpp>
#include <string>

#include "handoff/serve/openai_protocol.h"

namespace handoff::serve {

// Both throw ApiError (400 naming the field, 404 for an unknown model).
nlohmann::json tokenize(const std::string& body, const ProtocolContext& ctx);
nlohmann::json detokenize(const std::string& body, const ProtocolContext& ctx);

}  // namespace handoff::serve
