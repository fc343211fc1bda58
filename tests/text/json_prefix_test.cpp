// The incremental JSON validator behind forced tool calls: it must accept every prefix of valid
// JSON, refuse a bad byte exactly where it makes the text unfixable, and its completion must
// turn any accepted prefix into JSON that nlohmann::json accepts.
#include "handoff/text/json_prefix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace handoff::text {
namespace {

// Feeds `text`; returns the index of the refused byte, or npos when all was accepted.
size_t refused_at(JsonPrefix& p, const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!p.feed(static_cast<uint8_t>(text[i]))) return i;
  return std::string::npos;
}

// Every prefix is accepted, and each prefix plus its completion is valid JSON of the completion's
// announced length; the whole text is complete.
void expect_valid(const std::string& text, bool object_only) {
  JsonPrefix p(object_only);
  for (size_t i = 0; i <= text.size(); ++i) {
    const std::string completion = p.completion();
    EXPECT_EQ(completion.size(), p.completion_length()) << text.substr(0, i);
    const std::string completed = text.substr(0, i) + completion;
    EXPECT_TRUE(nlohmann::json::accept(completed)) << completed;
    JsonPrefix q = p;
    EXPECT_TRUE(q.feed(completed.substr(i))) << completed;
    EXPECT_TRUE(q.complete()) << completed;
    if (i == text.size()) break;
    ASSERT_TRUE(p.feed(static_cast<uint8_t>(text[i]))) << "refused byte " << i << " of " << text;
  }
  EXPECT_TRUE(p.complete()) << text;
  EXPECT_EQ(p.completion_length(), 0u);
}

TEST(JsonPrefix, AcceptsValidJsonAndCompletesEveryPrefix) {
  const char* objects[] = {
      R"({})",
      R"({"city": "Paris"})",
      R"({"a":1,"b":[true,false,null],"c":{"d":-0.5e+10,"e":[[],{}]},"f":""})",
      "{\n  \"x\" : [ 1 , 2.25 , -3E-2 ] ,\t\"y\":{ }\r\n}",
      R"({"esc":"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00 \u0041"})",
      "{\"utf8\":\"\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87\"}",
      R"({"n":[0,-0,10,1.0,1e5,1E+5,1e-5,123456789012345678901234567890]})",
      R"({"deep":[[[[[[[[[[{"k":[{"k":{}}]}]]]]]]]]]]})",
  };
  for (const char* text : objects) {
    expect_valid(text, true);
    expect_valid(text, false);
  }
  for (const char* text : {"0", "-12.5e3", "\"str\\u00e9\"", "true", "null", "[1,{\"a\":[]}]"})
    expect_valid(text, false);
}

TEST(JsonPrefix, RefusesTheFirstUnfixableByte) {
  const std::pair<std::string, size_t> cases[] = {
      {"[1]", 0},                           // not an object
      {" {}", 0},                           // the caller frames whitespace
      {"{'a':1}", 1},                       // single quotes
      {"{\"a\" 1}", 5},                     // missing colon
      {"{\"a\":01}", 6},                    // leading zero
      {"{\"a\":-}", 6},                     // sign without digits
      {"{\"a\":1.}", 7},                    // dot without digits
      {"{\"a\":1e}", 7},                    // exponent without digits
      {"{\"a\":tru}", 8},                   // broken literal
      {"{\"a\":1,}", 7},                    // trailing comma
      {"{\"a\":[1 2]}", 8},                 // missing comma
      {"{\"a\":1]", 6},                     // wrong closer
      {"{\"a\":1}}", 7},                    // text after the value
      {"{\"a\":1} ", 7},                    // even whitespace
      {"{\"a\":\"\x01\"}", 6},              // a raw control character
      {"{\"a\":\"\\q\"}", 7},               // unknown escape
      {"{\"a\":\"\\u12G4\"}", 10},          // bad hex digit
      {"{\"a\":\"\\uDC00\"}", 9},           // a low surrogate alone
      {"{\"a\":\"\\uD800x\"}", 12},         // a high surrogate alone
      {"{\"a\":\"\\uD800\\u0041\"}", 14},   // ... or followed by a non-surrogate
      {"{\"a\":\"\xC0\x80\"}", 6},          // overlong UTF-8
      {"{\"a\":\"\xED\xA0\x80\"}", 7},      // a UTF-8 encoded surrogate
      {"{\"a\":\"\xF4\x90\x80\x80\"}", 7},  // above U+10FFFF
      {"{\"a\":\"\xE2\x82\"}", 8},          // a character cut short
      {"{\"a\":\"\x80\"}", 6},              // a stray continuation byte
      {"{1:2}", 1},                         // a key that is not a string
      {"{\"a\":1e123}", 9},                 // an exponent that could overflow a double
      {"{\"a\":-2.5E+999}", 13},
  };
  for (const auto& [text, at] : cases) {
    JsonPrefix p(true);
    EXPECT_EQ(refused_at(p, text), at) << text;
    EXPECT_FALSE(nlohmann::json::accept(text) && at == std::string::npos);
  }
}

TEST(JsonPrefix, DepthIsBounded) {
  JsonPrefix p(true);
  std::string text = "{\"a\":";
  for (int i = 1; i < JsonPrefix::kMaxDepth; ++i) text += "[";
  EXPECT_EQ(refused_at(p, text), std::string::npos);
  EXPECT_EQ(p.completion_length(), static_cast<size_t>(JsonPrefix::kMaxDepth));
  EXPECT_FALSE(p.feed('['));  // level 65, whichever container
  EXPECT_FALSE(p.feed('{'));
  EXPECT_TRUE(p.feed('1'));  // scalars still fit
}

TEST(JsonPrefix, TopLevelNumberEndsWhereItCannotGoOn) {
  JsonPrefix p(false);
  EXPECT_EQ(refused_at(p, "12"), std::string::npos);
  EXPECT_TRUE(p.complete());
  EXPECT_FALSE(p.closed());
  EXPECT_FALSE(p.feed('<'));  // the byte is the caller's
  EXPECT_TRUE(p.feed('.'));
  EXPECT_FALSE(p.complete());
  EXPECT_EQ(p.completion(), "0");
  // Integer parts stop at 200 digits (with a two-digit exponent, every number is a finite
  // double).
  JsonPrefix big(false);
  EXPECT_EQ(refused_at(big, "-" + std::string(200, '9') + "9"), 201u);
  EXPECT_TRUE(big.feed(std::string(".5e+99")));
  EXPECT_TRUE(
      std::isfinite(nlohmann::json::parse("-" + std::string(200, '9') + ".5e+99").get<double>()));
}

TEST(JsonPrefix, GuardTextNeverAppears) {
  const std::string guard = "<｜tool▁call▁end｜>";
  JsonPrefix p(true, guard.c_str());
  const std::string start = "{\"a\":\"x<｜tool▁call <｜tool▁call▁end";
  EXPECT_EQ(refused_at(p, start), std::string::npos);  // partial markers are text
  JsonPrefix q = p;
  EXPECT_TRUE(q.feed(std::string("｜")));
  EXPECT_FALSE(q.feed('>'));  // it would finish the marker
  EXPECT_EQ(refused_at(p, "x\"}"), std::string::npos);
  EXPECT_TRUE(p.closed());
}

// Random valid documents (nlohmann dumps, compact and indented, ASCII-escaped or not) are
// accepted whole; random byte soups are accepted up to a prefix whose completion parses.
TEST(JsonPrefix, AgreesWithNlohmannOnRandomText) {
  std::mt19937 rng(12345);
  auto random_value = [&](auto&& self, int depth) -> nlohmann::json {
    switch (std::uniform_int_distribution<int>(0, depth > 3 ? 3 : 5)(rng)) {
      case 0:
        return std::uniform_int_distribution<int>(-1000, 1000)(rng);
      case 1:
        return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
      case 2: {
        std::string s;
        const char* pieces[] = {"a", "\"", "\\", "\n", "\x01", "é", "€", "😀", " ", "<", "}"};
        for (int i = std::uniform_int_distribution<int>(0, 6)(rng); i > 0; --i)
          s += pieces[std::uniform_int_distribution<int>(0, 10)(rng)];
        return s;
      }
      case 3:
        return std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? nlohmann::json(nullptr)
                                                                  : nlohmann::json(true);
      case 4: {
        auto a = nlohmann::json::array();
        for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i)
          a.push_back(self(self, depth + 1));
        return a;
      }
      default: {
        auto o = nlohmann::json::object();
        for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i)
          o["k" + std::to_string(i)] = self(self, depth + 1);
        return o;
      }
    }
  };
  for (int round = 0; round < 300; ++round) {
    nlohmann::json doc = {{"v", random_value(random_value, 0)}};
    const int indent = round % 3 == 0 ? -1 : round % 3;
    const std::string text = doc.dump(indent, ' ', round % 2 == 0);
    JsonPrefix p(true);
    ASSERT_EQ(refused_at(p, text), std::string::npos) << text;
    EXPECT_TRUE(p.closed()) << text;
  }
  const std::string alphabet = "{}[]\":,0123456789.-+eE tfalsenru\\u\xC3\xA9\x80\xFF";
  for (int round = 0; round < 2000; ++round) {
    std::string soup = "{";
    for (int i = 0; i < 24; ++i)
      soup += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    JsonPrefix p(true);
    const size_t at = refused_at(p, soup);
    const std::string accepted = soup.substr(0, at == std::string::npos ? soup.size() : at);
    EXPECT_TRUE(nlohmann::json::accept(accepted + p.completion())) << accepted;
  }
}

}  // namespace
}  // namespace handoff::text
