#pragma once
// The requests of a soak run, drawn from a seed: prompt and output lengths, streaming or not,
// completions or chat, stop strings, and which clients leave mid-stream or send malformed
// requests on purpose. Pure, so a run can be replayed request by request.
#include <cstdint>
#include <string>
#include <vector>

namespace handoff::cli {

struct SoakShape {
  int64_t min_input_len = 16;
  int64_t max_input_len = 1024;
  int64_t min_output_len = 1;
  int64_t max_output_len = 256;
  double disconnect_percent = 10;  // streaming clients that close the connection on purpose
  double malformed_percent = 1;    // bodies the server must refuse with a 4xx error object
  bool chat = false;               // the server has a chat template: half the requests use it
  int32_t token_lo = 1000, token_hi = 30000;  // prompt ids (completions), in [lo, hi)
};

enum class SoakKind { kNormal, kDisconnect, kMalformed };

struct SoakRequest {
  SoakKind kind = SoakKind::kNormal;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  int64_t input_len = 0;  // tokens (completions) or words (chat)
  int64_t max_tokens = 1;
  int64_t disconnect_after = 0;  // token chunks received before the client leaves
  std::string path;              // /v1/completions or /v1/chat/completions
  std::string body;
  std::string malformation;  // what is wrong with a malformed body
};

// Request `index` of the run seeded with `seed` (independent of the other requests).
SoakRequest plan_request(uint64_t seed, int64_t index, const SoakShape& shape,
                         const std::string& model);

}  // namespace handoff::cli
