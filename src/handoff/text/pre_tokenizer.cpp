#include "handoff/text/pre_tokenizer.h"

#include <cctype>
#include <utility>

#include "handoff/error.h"
#include "handoff/text/regex.h"

namespace handoff::text {
namespace {

// The pattern of GPT-2's byte-level pre-tokenizer, used when ByteLevel has use_regex true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// PCRE2 accepts a backslash before any ASCII punctuation, so escaping all of it is safe.
std::string escape_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u) && c != ' ') out += '\\';
    out += c;
  }
  return out;
}

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& name) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  fail_input("pre_tokenizer Split: unknown behavior '{}'", name);
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}

  std::vector<std::string> split(std::vector<std::string> pieces) const override {
    std::vector<std::string> out;
    for (const auto& piece : pieces) split_one(piece, out);
    return out;
  }

 private:
  // A span of the piece and whether it is a delimiter (a match, or a gap when inverted).
  struct Span {
    size_t begin, end;
    bool delimiter;
  };

  void split_one(const std::string& piece, std::vector<std::string>& out) const {
    std::vector<Span> spans;
    size_t last = 0;
    for (const auto& [b, e] : regex_.find_all(piece)) {
      if (b > last) spans.push_back({last, b, invert_});
      spans.push_back({b, e, !invert_});
      last = e;
    }
    if (last < piece.size()) spans.push_back({last, piece.size(), invert_});

    std::vector<std::pair<size_t, size_t>> parts;
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      switch (behavior_) {
        case Behavior::kRemoved:
          if (!s.delimiter) parts.emplace_back(s.begin, s.end);
          break;
        case Behavior::kIsolated:
          parts.emplace_back(s.begin, s.end);
          break;
        case Behavior::kMergedWithPrevious:
          if (s.delimiter && !parts.empty() && !spans[i - 1].delimiter)
            parts.back().second = s.end;
          else
            parts.emplace_back(s.begin, s.end);
          break;
        case Behavior::kMergedWithNext:
          if (!s.delimiter && i > 0 && spans[i - 1].delimiter)
            parts.back().second = s.end;
          else
            parts.emplace_back(s.begin, s.end);
          break;
        case Behavior::kContiguous:
          if (s.delimiter && i > 0 && spans[i - 1].delimiter)
            parts.back().second = s.end;
          else
            parts.emplace_back(s.begin, s.end);
          break;
      }
    }
    for (const auto& [b, e] : parts)
      if (e > b) out.push_back(piece.substr(b, e - b));
  }

  Regex regex_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern);
  }

  std::vector<std::string> split(std::vector<std::string> pieces) const override {
    if (add_prefix_space_ && !pieces.empty() && !pieces.front().starts_with(' '))
      pieces.front().insert(0, " ");
    if (!regex_) return pieces;
    std::vector<std::string> out;
    for (const auto& piece : pieces) {
      size_t last = 0;
      for (const auto& [b, e] : regex_->find_all(piece)) {
        if (b > last) out.push_back(piece.substr(last, b - last));
        out.push_back(piece.substr(b, e - b));
        last = e;
      }
      if (last < piece.size()) out.push_back(piece.substr(last));
    }
    return out;
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}

  std::vector<std::string> split(std::vector<std::string> pieces) const override {
    for (const auto& step : steps_) pieces = step->split(std::move(pieces));
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config) {
  if (config.is_null())
    return std::make_unique<SequencePreTokenizer>(std::vector<std::unique_ptr<PreTokenizer>>{});
  const std::string type = config.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& step : config.at("pretokenizers")) steps.push_back(make_pre_tokenizer(step));
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "Split") {
    const auto& pattern = config.at("pattern");
    std::string regex;
    if (pattern.contains("Regex"))
      regex = pattern.at("Regex").get<std::string>();
    else if (pattern.contains("String"))
      regex = escape_literal(pattern.at("String").get<std::string>());
    else
      fail_input("pre_tokenizer Split: pattern needs Regex or String");
    return std::make_unique<SplitPreTokenizer>(Regex(regex),
                                               parse_behavior(config.value("behavior", "Isolated")),
                                               config.value("invert", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(config.value("add_prefix_space", false),
                                                   config.value("use_regex", true));
  fail_input("unsupported pre_tokenizer type '{}'", type);
}

}  // namespace handoff::text
