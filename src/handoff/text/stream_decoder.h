#pragma once
// Decodes ids one at a time for streaming output: emits only whole UTF-8 characters and holds
// back the start of a character until its remaining bytes arrive. Bytes that can never become a
// character are emitted as they are, so the concatenated output equals decode(all ids) (with the
// default options).
#include <cstdint>
#include <string>

#include "handoff/text/tokenizer.h"

namespace handoff::text {

// How special tokens (Tokenizer::is_special) appear in the text; the defaults keep every byte.
struct DecodeOptions {
  bool skip_special_tokens = false;
  // A special token that is kept is set off by a space from the pieces beside it (the text
  // runs and other special tokens), as HuggingFace's and vLLM's slow detokenizers join them.
  bool spaces_between_special_tokens = false;
};

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(tokenizer), options_(options) {}

  // The bytes that are safe to show after adding `id` (possibly empty).
  std::string push(int32_t id);
  // Everything still held back (an unfinished character at the end of the stream).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::string pending_;
  bool any_piece_ = false;      // something (text or a special token) was decoded already
  bool after_special_ = false;  // the last piece was a kept special token
};

// The whole text of `ids` under `options` (what a StreamDecoder emits for them in all).
std::string decode_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                        DecodeOptions options);

}  // namespace handoff::text
