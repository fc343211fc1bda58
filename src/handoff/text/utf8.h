#pragma once
// UTF-8 helpers shared by the tokenizer, the streaming decoder and the template engine.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace handoff::text {

// Appends the UTF-8 encoding of a code point.
void append_utf8(std::string& out, char32_t cp);

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 character that could
// still be completed by more bytes. Bytes that can never form a character count as complete, so
// a streaming decoder only ever holds back the tail of a character in progress.
size_t complete_utf8_prefix(std::string_view bytes);

// Decodes the code point at `pos` and advances it; invalid bytes decode as themselves (0x80..0xFF)
// one at a time so callers can walk arbitrary byte strings.
char32_t next_code_point(std::string_view s, size_t& pos);

}  // namespace handoff::text
