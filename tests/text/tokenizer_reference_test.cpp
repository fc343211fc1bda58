// The committed corpus must tokenize exactly as the JavaScript reference (@lenml/tokenizers,
// i.e. transformers.js) does with the real DeepSeek-V3 tokenizer, and decode back to itself.
#include <gtest/gtest.h>

#include "handoff/text/tokenizer.h"
#include "text_test_support.h"

namespace handoff::text {
namespace {

using handoff::testing::command_stdout;
using handoff::testing::deepseek_v3_dir;
using handoff::testing::read_file;
using handoff::testing::read_json_lines;
using handoff::testing::require_node_modules;
using handoff::testing::tests_dir;

TEST(TokenizerReference, CorpusIdsMatchJavaScriptAndRoundTrip) {
  if (!require_node_modules()) return;
  const auto corpus_path = std::filesystem::path(HANDOFF_TEST_DATA) / "tokenizer/corpus.jsonl";
  const auto corpus = read_json_lines(read_file(corpus_path));
  ASSERT_GE(corpus.size(), 2000u);
  const auto reference = read_json_lines(
      command_stdout("node " + (tests_dir() / "tools/tokenize_reference.mjs").string() + " " +
                     corpus_path.string()));
  ASSERT_EQ(reference.size(), corpus.size());

  const auto tokenizer = Tokenizer::load(deepseek_v3_dir().string());
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i]["text"].get<std::string>();
    const std::vector<int32_t> ids = tokenizer->encode(text, /*add_special_tokens=*/false);
    const auto expected = reference[i]["ids"].get<std::vector<int32_t>>();
    if (ids != expected && ++mismatches <= 10)
      ADD_FAILURE() << "corpus line " << i + 1 << " ids differ for: " << text;
    EXPECT_EQ(tokenizer->decode(ids), text) << "corpus line " << i + 1;
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus.size() << " texts";
}

TEST(TokenizerReference, AddsDeepSeekBosWithSpecialTokens) {
  if (!require_node_modules()) return;
  const auto tokenizer = Tokenizer::load(deepseek_v3_dir().string());
  ASSERT_TRUE(tokenizer->bos_id().has_value());
  EXPECT_EQ(*tokenizer->bos_id(), 0);
  EXPECT_EQ(tokenizer->token_bytes(0), "<｜begin▁of▁sentence｜>");
  const auto with = tokenizer->encode("Hello", true);
  const auto without = tokenizer->encode("Hello", false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], 0);
  EXPECT_LT(tokenizer->vocab_size(), 129280);
  EXPECT_EQ(tokenizer->vocab_size(), 128815);
}

}  // namespace
}  // namespace handoff::text
