#include "handoff/text/jinja_lexer.h"

#include <cctype>

#include "handoff/error.h"

namespace handoff::text::jinja {
namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// HF's Template applies these before lexing (Python's apply_chat_template sets the same flags):
// drop one trailing newline, strip blanks before a block tag that starts a line (lstrip_blocks)
// and drop the newline right after a block tag (trim_blocks).
std::string preprocess(std::string_view source) {
  std::string s(source);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const bool line_start = i == 0 || s[i - 1] == '\n';
    if (line_start) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' &&
          (s[j + 1] == '%' || s[j + 1] == '#' || s[j + 1] == '-'))
        i = j;
    }
    if (i + 1 < s.size() && (s[i] == '%' || s[i] == '#' || s[i] == '-') && s[i + 1] == '}') {
      out += s[i];
      out += '}';
      i += 2;
      if (i < s.size() && s[i] == '\n') ++i;
      continue;
    }
    out += s[i++];
  }
  return out;
}

void trim_right(std::vector<Token>& tokens) {
  if (!tokens.empty() && tokens.back().type == TokenType::kText) {
    std::string& t = tokens.back().text;
    while (!t.empty() && is_ws(t.back())) t.pop_back();
  }
}

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t open = find_open(pos_);
      if (open > pos_) {
        std::string text = s_.substr(pos_, open - pos_);
        if (trim_next_) {
          size_t k = 0;
          while (k < text.size() && is_ws(text[k])) ++k;
          text.erase(0, k);
        }
        count_lines(pos_, open);
        if (!text.empty()) tokens_.push_back({TokenType::kText, std::move(text), line_});
      }
      trim_next_ = false;
      if (open >= s_.size()) break;
      pos_ = open;
      const char kind = s_[pos_ + 1];
      pos_ += 2;
      const bool trim_before = pos_ < s_.size() && s_[pos_] == '-';
      if (trim_before || (pos_ < s_.size() && s_[pos_] == '+')) ++pos_;
      if (trim_before) trim_right(tokens_);
      if (kind == '#') {
        skip_comment();
        continue;
      }
      tokens_.push_back({kind == '{' ? TokenType::kOpenExpr : TokenType::kOpenStmt,
                         kind == '{' ? "{{" : "{%", line_});
      lex_tag(kind == '{' ? '}' : '%');
    }
    tokens_.push_back({TokenType::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i)
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return s_.size();
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to && i < s_.size(); ++i)
      if (s_[i] == '\n') ++line_;
  }

  void skip_comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) fail_input("template line {}: unterminated comment", line_);
    if (end > pos_ && s_[end - 1] == '-') trim_next_ = true;
    count_lines(pos_, end);
    pos_ = end + 2;
  }

  // Lexes expression tokens until the closing delimiter `close` + '}'.
  void lex_tag(char close) {
    while (true) {
      while (pos_ < s_.size() && is_ws(s_[pos_])) {
        if (s_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= s_.size()) fail_input("template line {}: unterminated tag", line_);
      const char c = s_[pos_];
      if ((c == '-' || c == '+') && pos_ + 2 < s_.size() && s_[pos_ + 1] == close &&
          s_[pos_ + 2] == '}') {
        trim_next_ = c == '-';
        pos_ += 3;
        push_close(close);
        return;
      }
      if (c == close && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}') {
        pos_ += 2;
        push_close(close);
        return;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        const size_t start = pos_;
        while (pos_ < s_.size() &&
               (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
          ++pos_;
        tokens_.push_back({TokenType::kName, s_.substr(start, pos_ - start), line_});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        const size_t start = pos_;
        bool is_float = false;
        while (pos_ < s_.size() &&
               (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                (s_[pos_] == '.' && !is_float && pos_ + 1 < s_.size() &&
                 std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))))) {
          if (s_[pos_] == '.') is_float = true;
          ++pos_;
        }
        std::string number = s_.substr(start, pos_ - start);
        std::erase(number, '_');
        tokens_.push_back({is_float ? TokenType::kFloat : TokenType::kInt, number, line_});
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static constexpr std::string_view kTwo[] = {"//", "==", "!=", "<=", ">=", "**"};
        std::string op(1, c);
        for (auto two : kTwo)
          if (s_.compare(pos_, 2, two) == 0) op = std::string(two);
        if (std::string_view("+-*/%~=!<>.,:|()[]{}").find(c) == std::string_view::npos)
          fail_input("template line {}: unexpected character '{}'", line_, c);
        pos_ += op.size();
        tokens_.push_back({TokenType::kOperator, op, line_});
      }
    }
  }

  void lex_string(char quote) {
    ++pos_;
    std::string value;
    while (true) {
      if (pos_ >= s_.size()) fail_input("template line {}: unterminated string", line_);
      char c = s_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c == '\\' && pos_ < s_.size()) {
        const char e = s_[pos_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case 'b':
            c = '\b';
            break;
          case 'f':
            c = '\f';
            break;
          case '\\':
            c = '\\';
            break;
          case '\'':
            c = '\'';
            break;
          case '"':
            c = '"';
            break;
          default:
            value += '\\';
            c = e;
        }
      }
      value += c;
    }
    tokens_.push_back({TokenType::kString, std::move(value), line_});
  }

  void push_close(char close) {
    tokens_.push_back({close == '}' ? TokenType::kCloseExpr : TokenType::kCloseStmt,
                       close == '}' ? "}}" : "%}", line_});
  }

  std::string s_;
  size_t pos_ = 0;
  size_t line_ = 1;
  bool trim_next_ = false;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(preprocess(source)).run(); }

}  // namespace handoff::text::jinja
