#pragma once
// The architecture keys llama.cpp's deepseek2 / deepseek32 loader reads, from a Handoff model
// config: the same keys, values and value types llama.cpp's own HF converter writes.
#include <string>

#include "handoff/gguf/metadata.h"
#include "handoff/model/config.h"

namespace handoff::gguf {

// Adds general.* and <arch>.* keys. `name` is general.name; `file_type` general.file_type.
// Throws InputError for configs llama.cpp would run differently from Handoff (a RoPE layout
// or YaRN mscale it cannot express).
void add_model_metadata(Metadata& md, const model::ModelConfig& config, const std::string& name,
                        uint32_t file_type);

}  // namespace handoff::gguf
