#pragma once
// Decodes ids one at a time for streaming output: emits only whole UTF-8 characters and holds
// back the start of a character until its remaining bytes arrive. Bytes that can never become a
// character are emitted as they are, so the concatenated output equals decode(all ids).
#include <cstdint>
#include <string>

#include "handoff/text/tokenizer.h"

namespace handoff::text {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The bytes that are safe to show after adding `id` (possibly empty).
  std::string push(int32_t id);
  // Everything still held back (an unfinished character at the end of the stream).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace handoff::text
