#include "handoff/text/regex.h"

#include <pcre2.h>

#include "handoff/error.h"

namespace handoff::text {

struct Regex::Impl {
  struct CodeFree {
    void operator()(pcre2_code* c) const { pcre2_code_free(c); }
  };
  struct DataFree {
    void operator()(pcre2_match_data* d) const { pcre2_match_data_free(d); }
  };
  std::unique_ptr<pcre2_code, CodeFree> code;
  std::string pattern;
};

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  impl_->pattern = pattern;
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF lets byte strings that are not UTF-8 through: invalid bytes simply never
  // match, so they end up in the gaps between matches instead of aborting the tokenizer.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    std::string message(256, '\0');
    pcre2_get_error_message(error, reinterpret_cast<PCRE2_UCHAR*>(message.data()), message.size());
    message.resize(message.find('\0'));
    fail_input("regex '{}' does not compile at offset {}: {}", pattern, offset, message);
  }
  impl_->code.reset(code);
  pcre2_jit_compile(code,
                    PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::unique_ptr<pcre2_match_data, Impl::DataFree> data(
      pcre2_match_data_create_from_pattern(impl_->code.get(), nullptr));
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  while (start <= subject.size()) {
    const int rc = pcre2_match(impl_->code.get(), s, subject.size(), start, 0, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("regex '{}' failed with PCRE2 error {}", impl_->pattern, rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
    const size_t begin = ov[0], end = ov[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      // Empty match: step one character on (never into the middle of a UTF-8 sequence).
      size_t next = begin + 1;
      while (next < subject.size() && (static_cast<unsigned char>(subject[next]) & 0xC0) == 0x80)
        ++next;
      start = next;
    }
  }
  return matches;
}

}  // namespace handoff::text
