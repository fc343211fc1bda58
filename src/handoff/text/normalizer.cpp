#include "handoff/text/normalizer.h"

#include <cctype>
#include <vector>

#include "handoff/error.h"

namespace handoff::text {

Normalizer make_normalizer(const nlohmann::json& config) {
  if (config.is_null()) return [](std::string s) { return s; };
  const std::string type = config.value("type", "");
  if (type == "Sequence") {
    std::vector<Normalizer> steps;
    for (const auto& step : config.at("normalizers")) steps.push_back(make_normalizer(step));
    return [steps](std::string s) {
      for (const auto& step : steps) s = step(std::move(s));
      return s;
    };
  }
  if (type == "Replace") {
    if (!config.at("pattern").contains("String"))
      fail_input("normalizer Replace: only String patterns are supported");
    const auto from = config.at("pattern").at("String").get<std::string>();
    const auto to = config.at("content").get<std::string>();
    if (from.empty()) fail_input("normalizer Replace: empty pattern");
    return [from, to](std::string s) {
      std::string out;
      size_t pos = 0, hit;
      while ((hit = s.find(from, pos)) != std::string::npos) {
        out.append(s, pos, hit - pos);
        out += to;
        pos = hit + from.size();
      }
      out.append(s, pos);
      return out;
    };
  }
  if (type == "Prepend") {
    const auto prefix = config.at("prepend").get<std::string>();
    return [prefix](std::string s) { return s.empty() ? s : prefix + s; };
  }
  if (type == "Lowercase") {
    return [](std::string s) {
      for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(std::tolower(c));
      return s;
    };
  }
  if (type == "Strip") {
    const bool left = config.value("left", true), right = config.value("right", true);
    return [left, right](std::string s) {
      const auto ws = " \t\n\r\f\v";
      if (right) s.erase(s.find_last_not_of(ws) + 1);
      if (left) s.erase(0, std::min(s.size(), s.find_first_not_of(ws)));
      return s;
    };
  }
  fail_input("unsupported normalizer type '{}'", type);
}

}  // namespace handoff::text
