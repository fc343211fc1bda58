// Arbitrary bytes (invalid UTF-8, random data) must encode without errors and decode back to
// the same bytes; the streaming decoder must split output only at character boundaries.
#include <gtest/gtest.h>

#include <random>

#include "handoff/error.h"
#include "handoff/text/stream_decoder.h"
#include "handoff/text/tokenizer.h"
#include "handoff/text/utf8.h"
#include "text_test_support.h"

namespace handoff::text {
namespace {

using handoff::testing::deepseek_v3_dir;
using handoff::testing::require_node_modules;

// Loading the 128k-token vocab takes a moment; the tests share one instance.
const Tokenizer& deepseek() {
  static const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(deepseek_v3_dir().string());
  return *tokenizer;
}

// Whether `s` is valid UTF-8 (so a streaming chunk never splits a character).
bool valid_utf8(const std::string& s) { return complete_utf8_prefix(s) == s.size(); }

TEST(TokenizerBytes, InvalidUtf8RoundTrips) {
  if (!require_node_modules()) return;
  const std::vector<std::string> cases = {"\xff",
                                          "\xc3",
                                          "abc\x80\x80"
                                          "def",  // split: "\x80def" is one hex escape
                                          "\xe4\xbd",
                                          "\xed\xa0\x80 surrogate",
                                          "\xf4\x90\x80\x80",
                                          "\xc0\xaf overlong",
                                          "ok \xf0\x9f\x98 cut emoji",
                                          std::string("nul\0byte", 8),
                                          "<｜User｜>\xfe<｜Assistant｜>",
                                          "\xe4\xbd\xa0\xe5",
                                          "\x80\x81\x82\x83\x84 12345 \xff\xfe"};
  for (const auto& s : cases) {
    const auto ids = deepseek().encode(s, false);
    EXPECT_EQ(deepseek().decode(ids), s);
  }
}

TEST(TokenizerBytes, RandomBytesRoundTrip) {
  if (!require_node_modules()) return;
  std::mt19937 rng(7);
  for (int n = 0; n < 300; ++n) {
    std::string s(rng() % 200, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    const auto ids = deepseek().encode(s, false);
    ASSERT_EQ(deepseek().decode(ids), s) << "case " << n;
  }
}

TEST(TokenizerBytes, StreamingEmitsWholeCharactersOnly) {
  if (!require_node_modules()) return;
  const std::string text =
      "emoji 👨‍👩‍👧‍👦 中文字符 日本語 🏳️‍🌈 end";
  const auto ids = deepseek().encode(text, false);
  StreamDecoder stream(deepseek());
  std::string total;
  for (int32_t id : ids) {
    const std::string chunk = stream.push(id);
    EXPECT_TRUE(valid_utf8(chunk)) << "chunk splits a character";
    total += chunk;
  }
  total += stream.flush();
  EXPECT_EQ(total, text);
}

TEST(TokenizerBytes, StreamingPassesInvalidBytesThrough) {
  if (!require_node_modules()) return;
  std::mt19937 rng(11);
  for (int n = 0; n < 100; ++n) {
    std::string s(rng() % 100, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    StreamDecoder stream(deepseek());
    std::string total;
    for (int32_t id : deepseek().encode(s, false)) total += stream.push(id);
    total += stream.flush();
    ASSERT_EQ(total, s);
  }
}

TEST(TokenizerBytes, UnknownIdIsInputError) {
  if (!require_node_modules()) return;
  EXPECT_THROW(deepseek().decode({999999}), InputError);
  EXPECT_THROW(deepseek().decode({-1}), InputError);
}

TEST(Utf8Prefix, HoldsOnlyCharactersInProgress) {
  EXPECT_EQ(complete_utf8_prefix("ab"), 2u);
  EXPECT_EQ(complete_utf8_prefix("a\xe4\xbd"), 1u);      // 3-byte char missing one byte
  EXPECT_EQ(complete_utf8_prefix("a\xf0\x9f\x98"), 1u);  // 4-byte char missing one byte
  EXPECT_EQ(complete_utf8_prefix("a\xff"), 2u);          // never valid: emit
  EXPECT_EQ(complete_utf8_prefix("a\xed\xa0"), 3u);      // surrogate can never complete
  EXPECT_EQ(complete_utf8_prefix("\x80\x80"), 2u);       // stray continuation bytes
  EXPECT_EQ(complete_utf8_prefix("\xe4\xbd\xa0"), 3u);   // complete
}

}  // namespace
}  // namespace handoff::text
