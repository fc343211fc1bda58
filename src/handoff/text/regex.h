#pragma once
// A compiled PCRE2 pattern (UTF + UCP, JIT when available) that finds all matches in byte
// strings, tolerating invalid UTF-8 in the subject.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace handoff::text {

class Regex {
 public:
  // Throws InputError naming the pattern when it does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Byte ranges [begin, end) of successive non-overlapping matches, empty matches skipped.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace handoff::text
