#pragma once
// GPT-2 byte-level alphabet: every byte maps to a printable code point so that BPE vocabularies
// can be stored as text. The tokenizer works on raw bytes internally and only uses this to read
// vocab and merges.
#include <optional>
#include <string>
#include <string_view>

namespace handoff::text {

// The vocabulary spelling of raw bytes.
std::string bytes_to_byte_level(std::string_view bytes);

// Raw bytes of a vocabulary spelling; nullopt when it holds a character outside the alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view spelling);

}  // namespace handoff::text
