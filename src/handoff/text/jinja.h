#pragma once
// A Jinja template engine covering what HuggingFace chat templates use, rendering like
// @huggingface/jinja / transformers (trim_blocks and lstrip_blocks on).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace handoff::text {

namespace jinja {
struct Stmt;
}

class JinjaTemplate {
 public:
  // Parses `source`; throws InputError on syntax errors.
  explicit JinjaTemplate(std::string_view source);
  ~JinjaTemplate();
  JinjaTemplate(JinjaTemplate&&) noexcept;
  JinjaTemplate& operator=(JinjaTemplate&&) noexcept;

  // Renders with the keys of `context` (a JSON object) as variables. Throws InputError on
  // evaluation errors and for raise_exception(message), carrying that message.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::vector<std::unique_ptr<jinja::Stmt>> body_;
};

}  // namespace handoff::text
