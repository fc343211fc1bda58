#include "handoff/text/stream_decoder.h"

#include "handoff/text/utf8.h"

namespace handoff::text {

std::string StreamDecoder::push(int32_t id) {
  const std::string& bytes = tokenizer_.token_bytes(id);
  if (tokenizer_.is_special(id)) {
    if (options_.skip_special_tokens) return "";
    if (options_.spaces_between_special_tokens && any_piece_) pending_ += ' ';
    after_special_ = true;
  } else {
    if (options_.spaces_between_special_tokens && after_special_ && !bytes.empty()) pending_ += ' ';
    if (!bytes.empty()) after_special_ = false;
  }
  if (!bytes.empty()) any_piece_ = true;
  pending_ += bytes;
  const size_t ready = complete_utf8_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

std::string decode_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                        DecodeOptions options) {
  StreamDecoder decoder(tokenizer, options);
  std::string out;
  for (int32_t id : ids) out += decoder.push(id);
  return out + decoder.flush();
}

}  // namespace handoff::text
