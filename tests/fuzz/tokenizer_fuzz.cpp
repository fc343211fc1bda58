// Fuzzes the real DeepSeek-V3 tokenizer: any bytes must encode, decode back to exactly those
// bytes (the tokenizer's contract), stream-decode to the same bytes, and arbitrary ids must
// decode or be refused with InputError.
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_support.h"
#include "handoff/error.h"
#include "handoff/text/stream_decoder.h"
#include "handoff/text/tokenizer.h"

namespace {

const handoff::text::Tokenizer& tokenizer() {
  static const auto t = handoff::text::Tokenizer::load(handoff::fuzz::deepseek_v3_dir());
  return *t;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer property failed: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const std::vector<int32_t> ids = tok.encode(text, false);
  check(tok.decode(ids) == text, "decode(encode(s)) == s");
  check(ids.size() <= size, "at most one token per byte");
  if (tok.max_bytes_per_token() > 0)
    check(ids.size() * tok.max_bytes_per_token() >= size, "max_bytes_per_token is a bound");
  handoff::text::StreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  check(streamed == text, "streamed decode == s");

  const std::vector<int32_t> with_special = tok.encode(text, true);
  check(with_special.size() >= ids.size(), "special tokens only add");

  // The same bytes read as ids: known ones decode, others are an InputError.
  std::vector<int32_t> raw(size / sizeof(int32_t));
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * sizeof(int32_t));
  try {
    const std::string bytes = tok.decode(raw);
    handoff::text::StreamDecoder raw_stream(tok);
    std::string raw_streamed;
    for (int32_t id : raw) raw_streamed += raw_stream.push(id);
    raw_streamed += raw_stream.flush();
    check(raw_streamed == bytes, "streamed decode of ids == decode");
  } catch (const handoff::InputError&) {
  }
  return 0;
}
