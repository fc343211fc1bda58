#pragma once
// Recursive-descent parser from lexer tokens to the statement tree.
#include <vector>

#include "handoff/text/jinja_ast.h"
#include "handoff/text/jinja_lexer.h"

namespace handoff::text::jinja {

// Throws InputError with the line number on syntax errors.
Body parse(const std::vector<Token>& tokens);

}  // namespace handoff::text::jinja
