#include "handoff/serve/tokenize_api.h"

#include <set>

namespace handoff::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param, "invalid_value");
}

void check_keys(const json& body, const std::set<std::string>& allowed) {
  for (const auto& [key, v] : body.items())
    if (!allowed.count(key))
      throw ApiError(400, fmt::format("Unrecognized request argument supplied: {}", key), key,
                     "unknown_parameter");
}

void check_model(const json& body, const ProtocolContext& ctx) {
  if (!body.contains("model") || body["model"].is_null()) return;
  if (!body["model"].is_string()) bad("model", "'model' must be a string");
  if (body["model"] != ctx.served_model)
    throw ApiError(404,
                   fmt::format("The model '{}' does not exist", body["model"].get<std::string>()),
                   "model", "model_not_found");
}

bool flag(const json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_boolean()) bad(key, fmt::format("'{}' must be a boolean", key));
  return body[key].get<bool>();
}

}  // namespace

nlohmann::json tokenize(const std::string& text, const ProtocolContext& ctx) {
  json body = parse_json_object(text);
  if (ctx.tokenizer == nullptr) throw ApiError(400, "this model has no tokenizer");
  const bool chat = body.contains("messages");
  if (chat && body.contains("prompt")) bad("prompt", "send either 'prompt' or 'messages'");
  const bool token_strs = flag(body, "return_token_strs", false);
  std::vector<int32_t> ids;
  if (chat) {
    check_keys(body, {"model", "messages", "add_generation_prompt", "add_special_tokens", "tools",
                      "chat_template_kwargs", "return_token_strs"});
    // The chat route's own rendering, so the count is what a chat request would prefill; no
    // length limit: counting a prompt that is too long is what clients tokenize for.
    ProtocolContext unlimited = ctx;
    unlimited.max_model_len = 0;
    // Re-read in the client's key order: the tools reach the template as they were written.
    auto ordered = nlohmann::ordered_json::parse(text);
    ordered.erase("return_token_strs");
    ids = parse_request(Endpoint::kChat, ordered.dump(), unlimited).request.prompt;
  } else {
    check_keys(body, {"model", "prompt", "add_special_tokens", "return_token_strs"});
    check_model(body, ctx);
    if (!body.contains("prompt") || !body["prompt"].is_string())
      throw ApiError(400, "'prompt' (a string) or 'messages' is required", "prompt",
                     "missing_required_parameter");
    ids = ctx.tokenizer->encode(body["prompt"].get<std::string>(),
                                flag(body, "add_special_tokens", true));
  }
  json out = {{"count", ids.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", ids}};
  if (token_strs) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(ctx.tokenizer->token_bytes(id));
    out["token_strs"] = std::move(strs);
  }
  return out;
}

nlohmann::json detokenize(const std::string& text, const ProtocolContext& ctx) {
  const json body = parse_json_object(text);
  check_keys(body, {"model", "tokens"});
  check_model(body, ctx);
  if (ctx.tokenizer == nullptr) throw ApiError(400, "this model has no tokenizer");
  if (!body.contains("tokens") || !body["tokens"].is_array())
    throw ApiError(400, "'tokens' (a list of token ids) is required", "tokens",
                   "missing_required_parameter");
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer()) bad("tokens", "'tokens' must hold token ids (integers)");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= ctx.tokenizer->vocab_size())
      bad("tokens", fmt::format("token id {} is outside the tokenizer's vocabulary of {}", id,
                                ctx.tokenizer->vocab_size()));
    ids.push_back(static_cast<int32_t>(id));
  }
  try {
    return {{"prompt", ctx.tokenizer->decode(ids)}};
  } catch (const InputError& e) {
    bad("tokens", e.what());  // an id in a gap of the tokenizer's ids
  }
}

}  // namespace handoff::serve
