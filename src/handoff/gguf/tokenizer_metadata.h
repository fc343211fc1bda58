#pragma once
// tokenizer.* keys from a model folder's HuggingFace tokenizer (tokenizer.json,
// tokenizer_config.json, chat_template.jinja), as llama.cpp's converter writes them for a
// byte-level BPE ("gpt2") vocabulary: the token strings by id, their types, the merges, the
// pre-tokenizer's name, the special token ids and the chat template.
#include <string>

#include "handoff/gguf/metadata.h"

namespace handoff::gguf {

// What add_tokenizer_metadata wrote, for the command's summary.
struct TokenizerSummary {
  std::string model;  // "gpt2", or "none" when the folder has no tokenizer.json
  std::string pre;    // tokenizer.ggml.pre ("" for none)
  size_t tokens = 0;
  size_t merges = 0;
};

// Without a tokenizer.json, writes tokenizer.ggml.model = "none" (llama.cpp then runs on token
// ids only, as its benchmark does). Throws InputError naming the file for a tokenizer llama.cpp
// would split differently (only DeepSeek-V3's pre-tokenizer is recognised), one that is not BPE,
// or ids at or past `vocab_size`.
TokenizerSummary add_tokenizer_metadata(Metadata& md, const std::string& model_dir,
                                        int64_t vocab_size);

}  // namespace handoff::gguf
