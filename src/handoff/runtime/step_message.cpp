#include "handoff/runtime/step_message.h"

#include "handoff/error.h"

namespace handoff::runtime {

// Layout (int64 words): copy count, then per copy: source and destination block; chunk count,
// then per chunk: start_pos, all_logits, token count, block count, the tokens, the block ids.
std::vector<int64_t> encode_step(const Step& step) {
  std::vector<int64_t> words{static_cast<int64_t>(step.copies.size())};
  for (const auto& c : step.copies) {
    words.push_back(c.src);
    words.push_back(c.dst);
  }
  words.push_back(static_cast<int64_t>(step.chunks.size()));
  for (const auto& c : step.chunks) {
    const std::vector<int32_t> none;
    const std::vector<int32_t>& blocks = c.blocks != nullptr ? c.blocks->blocks() : none;
    words.push_back(c.start_pos);
    words.push_back(c.all_logits ? 1 : 0);
    words.push_back(static_cast<int64_t>(c.tokens.size()));
    words.push_back(static_cast<int64_t>(blocks.size()));
    words.insert(words.end(), c.tokens.begin(), c.tokens.end());
    words.insert(words.end(), blocks.begin(), blocks.end());
  }
  return words;
}

DecodedStep::DecodedStep(std::vector<int64_t> words) : words_(std::move(words)) {
  size_t at = 0;
  auto next = [&](const char* what) {
    if (at >= words_.size()) fail("step message truncated at word {} ({})", at, what);
    return words_[at++];
  };
  const int64_t copies = next("copy count");
  if (copies < 0 || static_cast<uint64_t>(copies) > words_.size() / 2)
    fail("step message: bad copy count {}", copies);
  for (int64_t i = 0; i < copies; ++i) {
    const int64_t src = next("copy source"), dst = next("copy destination");
    if (src < 0 || dst < 0 || src > INT32_MAX || dst > INT32_MAX)
      fail("step message: copy {} names blocks {} -> {}", i, src, dst);
    step_.copies.push_back({static_cast<int32_t>(src), static_cast<int32_t>(dst)});
  }
  const int64_t n = next("chunk count");
  if (n < 0 || static_cast<uint64_t>(n) > words_.size())
    fail("step message: bad chunk count {}", n);
  tokens_.resize(static_cast<size_t>(n));
  tables_.resize(static_cast<size_t>(n));
  std::vector<model::SequenceChunk>& chunks = step_.chunks;
  chunks.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < chunks.size(); ++i) {
    model::SequenceChunk& c = chunks[i];
    c.start_pos = next("start_pos");
    c.all_logits = next("all_logits") != 0;
    const int64_t num_tokens = next("token count"), num_blocks = next("block count");
    if (num_tokens < 0 || num_blocks < 0 ||
        static_cast<uint64_t>(num_tokens + num_blocks) > words_.size() - at)
      fail("step message: chunk {} claims {} tokens and {} blocks past its end", i, num_tokens,
           num_blocks);
    std::vector<int32_t> blocks;
    for (int64_t t = 0; t < num_tokens; ++t)
      tokens_[i].push_back(static_cast<int32_t>(next("token")));
    for (int64_t b = 0; b < num_blocks; ++b) blocks.push_back(static_cast<int32_t>(next("block")));
    tables_[i] = cache::BlockTable(std::move(blocks));
    c.tokens = tokens_[i];
    c.blocks = &tables_[i];
  }
  if (at != words_.size()) fail("step message: {} words left over", words_.size() - at);
}

}  // namespace handoff::runtime
