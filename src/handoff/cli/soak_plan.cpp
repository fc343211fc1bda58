#include "handoff/cli/soak_plan.h"

#include <array>
#include <nlohmann/json.hpp>
#include <random>

namespace handoff::cli {
namespace {

using nlohmann::json;

// Short, frequent pieces of text, so that stop strings do end some outputs early.
constexpr std::array<const char*, 8> kStops = {"e", "\n", " the", ".", ",", "in", "ar", "s "};
constexpr std::array<const char*, 16> kWords = {"river", "stone",  "the",   "light",  "of", "seven",
                                                "quiet", "market", "and",   "window", "is", "blue",
                                                "under", "paper",  "north", "garden"};

int64_t uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool chance(std::mt19937_64& rng, double percent) {
  return std::uniform_real_distribution<double>(0.0, 100.0)(rng) < percent;
}

// A body the server must refuse; which way it is wrong varies with the request.
std::string malformed_body(std::mt19937_64& rng, json body, std::string& what) {
  switch (uniform(rng, 0, 6)) {
    case 0: {
      what = "truncated JSON";
      const std::string text = body.dump();
      return text.substr(0, text.size() / 2);
    }
    case 1:
      what = "max_tokens -5";
      body["max_tokens"] = -5;
      break;
    case 2:
      what = "temperature \"hot\"";
      body["temperature"] = "hot";
      break;
    case 3:
      what = "unknown parameter";
      body["frobnicate"] = true;
      break;
    case 4:
      what = "n 3";
      body["n"] = 3;
      break;
    case 5:
      what = "an array body";
      return json::array({body}).dump();
    default:
      what = "an empty stop string";
      body["stop"] = json::array({""});
      break;
  }
  return body.dump();
}

}  // namespace

SoakRequest plan_request(uint64_t seed, int64_t index, const SoakShape& shape,
                         const std::string& model) {
  // One generator per request, so request i is the same whatever the others drew.
  std::seed_seq seq{seed, static_cast<uint64_t>(index), uint64_t{0x50a4}};
  std::mt19937_64 rng(seq);
  SoakRequest r;
  const double roll = std::uniform_real_distribution<double>(0.0, 100.0)(rng);
  r.kind = roll < shape.malformed_percent                              ? SoakKind::kMalformed
           : roll < shape.malformed_percent + shape.disconnect_percent ? SoakKind::kDisconnect
                                                                       : SoakKind::kNormal;
  r.chat = shape.chat && chance(rng, 50);
  r.stream = r.kind == SoakKind::kDisconnect || chance(rng, 50);
  r.include_usage = r.stream && chance(rng, 50);
  r.input_len = uniform(rng, shape.min_input_len, shape.max_input_len);
  r.max_tokens = uniform(rng, shape.min_output_len, shape.max_output_len);
  if (r.kind == SoakKind::kDisconnect) {
    // Leave somewhere in the first half of a long enough answer (it may still end earlier on a
    // stop string: then it is audited like any other stream).
    r.max_tokens = std::max<int64_t>(r.max_tokens, std::min<int64_t>(8, shape.max_output_len));
    r.disconnect_after = uniform(rng, 1, std::max<int64_t>(1, r.max_tokens / 2));
  }
  json body = {{"max_tokens", r.max_tokens},
               {"temperature", chance(rng, 50) ? 0.0 : 0.8},
               {"seed", uniform(rng, 0, 1 << 30)}};
  if (!model.empty()) body["model"] = model;
  if (chance(rng, 30)) {
    json stop = json::array();
    for (int64_t i = uniform(rng, 1, 3); i > 0; --i)
      stop.push_back(kStops[static_cast<size_t>(uniform(rng, 0, kStops.size() - 1))]);
    body["stop"] = stop;
  }
  if (r.stream) {
    body["stream"] = true;
    if (r.include_usage) body["stream_options"] = {{"include_usage", true}};
  }
  if (r.chat) {
    std::string text;
    for (int64_t i = 0; i < r.input_len; ++i) {
      if (i > 0) text += ' ';
      text += kWords[static_cast<size_t>(uniform(rng, 0, kWords.size() - 1))];
    }
    body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
    r.path = "/v1/chat/completions";
  } else {
    std::uniform_int_distribution<int32_t> id(shape.token_lo, shape.token_hi - 1);
    json prompt = json::array();
    for (int64_t i = 0; i < r.input_len; ++i) prompt.push_back(id(rng));
    body["prompt"] = prompt;
    r.path = "/v1/completions";
  }
  r.body = r.kind == SoakKind::kMalformed ? malformed_body(rng, body, r.malformation) : body.dump();
  return r;
}

}  // namespace handoff::cli
