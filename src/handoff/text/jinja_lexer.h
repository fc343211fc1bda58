#pragma once
// Splits a Jinja template into tokens: raw text, tag delimiters and the expression tokens inside
// tags. Applies HF's trim_blocks / lstrip_blocks and the {%- -%} whitespace control here, so
// the parser only sees significant text.
#include <string>
#include <string_view>
#include <vector>

namespace handoff::text::jinja {

enum class TokenType {
  kText,
  kOpenExpr,   // {{
  kCloseExpr,  // }}
  kOpenStmt,   // {%
  kCloseStmt,  // %}
  kName,
  kString,
  kInt,
  kFloat,
  kOperator,  // + - * / // % ~ == != < > <= >= = . , : | ( ) [ ] { }
  kEnd,
};

struct Token {
  TokenType type;
  std::string text;
  size_t line = 1;
};

// Throws InputError with the line number on unterminated tags or strings.
std::vector<Token> lex(std::string_view source);

}  // namespace handoff::text::jinja
