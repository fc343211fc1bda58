// Fuzzes the OpenAI request parser with the real DeepSeek-V3 tokenizer and chat template: the
// first byte picks the endpoint (mod 4: completions, chat, vLLM's /tokenize, /detokenize), the
// rest is the body. A body must parse into a request or be refused with an ApiError; a parsed
// completion or chat request is answered with a response, a stream chunk and a usage chunk, as
// the server would, and a tokenize answer's count is its number of tokens.
#include <memory>

#include "fuzz_support.h"
#include "handoff/serve/openai_protocol.h"
#include "handoff/serve/tokenize_api.h"

namespace {

using handoff::serve::ProtocolContext;

struct Model {
  std::unique_ptr<handoff::text::Tokenizer> tokenizer;
  std::unique_ptr<handoff::text::ChatTemplate> chat_template;
  ProtocolContext ctx;
};

const Model& model() {
  static const Model m = [] {
    Model m;
    const std::string dir = handoff::fuzz::deepseek_v3_dir();
    m.tokenizer = handoff::text::Tokenizer::load(dir);
    m.chat_template = handoff::text::ChatTemplate::load(dir);
    m.ctx.served_model = "default";
    m.ctx.tokenizer = m.tokenizer.get();
    m.ctx.chat_template = m.chat_template.get();
    m.ctx.max_model_len = 4096;
    m.ctx.vocab_size = m.tokenizer->vocab_size();
    return m;
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int route = data[0] % 4;
  const auto endpoint =
      route == 1 ? handoff::serve::Endpoint::kChat : handoff::serve::Endpoint::kCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ProtocolContext& ctx = model().ctx;
  handoff::serve::ParsedRequest parsed;
  try {
    if (route == 2) {
      const auto answer = handoff::serve::tokenize(body, ctx);
      if (answer.at("count") != answer.at("tokens").size()) std::abort();
      (void)handoff::serve::to_text(answer);
      return 0;
    }
    if (route == 3) {
      (void)handoff::serve::to_text(handoff::serve::detokenize(body, ctx));
      return 0;
    }
    parsed = handoff::serve::parse_request(endpoint, body, ctx);
  } catch (const handoff::serve::ApiError& e) {
    if (e.status != 400 && e.status != 404) std::abort();
    (void)handoff::serve::to_text(handoff::serve::error_body(e));
    return 0;
  }
  const auto& prompt = parsed.request.prompt;
  if (prompt.empty() || static_cast<int64_t>(prompt.size()) >= ctx.max_model_len) std::abort();
  // Echo a few prompt tokens back as the "generated" ones, logprobs and all.
  handoff::engine::RequestEvent event;
  for (size_t i = 0; i < prompt.size() && i < 4; ++i) {
    event.tokens.push_back(prompt[i]);
    event.text += ctx.tokenizer->token_bytes(prompt[i]);
    handoff::engine::TokenLogprob lp;
    lp.token = prompt[i];
    lp.logprob = -0.5f;
    lp.top.push_back({prompt[i], -0.5f});
    event.logprobs.push_back(lp);
  }
  event.finish_reason = "length";
  event.prompt_tokens = static_cast<int64_t>(prompt.size());
  event.completion_tokens = static_cast<int64_t>(event.tokens.size());
  using handoff::serve::to_text;
  (void)to_text(handoff::serve::make_response(parsed, "id", 0, {event}, ctx));
  (void)to_text(handoff::serve::make_chunk(parsed, "id", 0, event, ctx));
  (void)to_text(handoff::serve::make_role_chunk(parsed, "id", 0));
  (void)to_text(handoff::serve::make_usage_chunk(parsed, "id", 0, 1, 1));
  return 0;
}
