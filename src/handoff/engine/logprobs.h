#pragma once
// log_softmax of a row of logits, for the sampled token and the most likely ones.
#include <cstdint>

#include "handoff/engine/request.h"

namespace handoff::engine {

// The sampled token's log-probability and the `top` most likely tokens', computed in double
// from the model's f32 logits (before penalties and temperature, as OpenAI reports them).
TokenLogprob token_logprob(const float* logits, int64_t n, int32_t token, int top);

}  // namespace handoff::engine
