// A small driver against llama.cpp's C API for bench/peer_compare.sh (built there against the
// cached libllama; not part of the Handoff build). Two modes:
//
//   llama_logits logits MODEL.gguf --prompt IDS --steps N --feed IDS [--threads T] > out.json
//     One llama_decode of the prompt, then N single-token decodes feeding the given ids
//     (teacher forcing), with an F32 KV cache and no flash attention (the exact path). Prints
//     {"prefill_last_logits": [...], "decode_logits": [[...] x N], "greedy_tokens": [...]},
//     greedy_tokens[j] = argmax of the logits before step j (as `handoff generate --dump`).
//
//   llama_logits tokenize MODEL.gguf TEXT
//     Prints llama.cpp's token ids for TEXT (special tokens parsed, BOS as the vocab says), one
//     JSON list, to compare with `handoff tokenize`.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "llama_logits: %s\n", msg.c_str());
  std::exit(1);
}

std::vector<llama_token> parse_ids(const std::string& s) {
  std::vector<llama_token> ids;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) ids.push_back(static_cast<llama_token>(std::stol(item)));
  return ids;
}

struct ModelFree {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
struct ContextFree {
  void operator()(llama_context* c) const { llama_free(c); }
};

void print_row(const float* x, int n) {
  std::putchar('[');
  for (int i = 0; i < n; ++i) std::printf(i ? ",%.9g" : "%.9g", x[i]);
  std::putchar(']');
}

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

std::unique_ptr<llama_model, ModelFree> load(const char* path) {
  llama_model_params mp = llama_model_default_params();
  std::unique_ptr<llama_model, ModelFree> m(llama_model_load_from_file(path, mp));
  if (!m) die(std::string("cannot load ") + path);
  return m;
}

int run_tokenize(const char* path, const std::string& text) {
  auto model = load(path);
  const llama_vocab* vocab = llama_model_get_vocab(model.get());
  std::vector<llama_token> ids(text.size() + 16);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), true, true);
  if (n < 0) die("tokenize failed");
  std::putchar('[');
  for (int i = 0; i < n; ++i) std::printf(i ? ",%d" : "%d", ids[i]);
  std::puts("]");
  return 0;
}

int run_logits(const char* path, const std::vector<llama_token>& prompt, int steps,
               const std::vector<llama_token>& feed, int threads) {
  if (prompt.empty()) die("--prompt is empty");
  if (static_cast<int>(feed.size()) < steps) die("--feed needs one id per step");
  auto model = load(path);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
  llama_context_params cp = llama_context_default_params();
  const int T = static_cast<int>(prompt.size());
  cp.n_ctx = static_cast<uint32_t>(T + steps + 8);
  cp.n_batch = static_cast<uint32_t>(T);
  cp.n_ubatch = static_cast<uint32_t>(T);
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  std::unique_ptr<llama_context, ContextFree> ctx(llama_init_from_model(model.get(), cp));
  if (!ctx) die("cannot create a context");

  llama_batch batch = llama_batch_init(T, 0, 1);
  for (int i = 0; i < T; ++i) {
    batch.token[i] = prompt[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i == T - 1;
  }
  batch.n_tokens = T;
  if (llama_decode(ctx.get(), batch) != 0) die("prefill failed");
  std::vector<float> prefill(llama_get_logits_ith(ctx.get(), T - 1),
                             llama_get_logits_ith(ctx.get(), T - 1) + n_vocab);
  std::vector<int> greedy{argmax(prefill.data(), n_vocab)};
  std::vector<std::vector<float>> rows;
  for (int j = 0; j < steps; ++j) {
    batch.token[0] = feed[j];
    batch.pos[0] = T + j;
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = 0;
    batch.logits[0] = 1;
    batch.n_tokens = 1;
    if (llama_decode(ctx.get(), batch) != 0) die("decode step " + std::to_string(j) + " failed");
    const float* lg = llama_get_logits_ith(ctx.get(), 0);
    rows.emplace_back(lg, lg + n_vocab);
    if (j + 1 < steps) greedy.push_back(argmax(lg, n_vocab));
  }
  llama_batch_free(batch);

  std::printf("{\"n_vocab\":%d,\"prefill_last_logits\":", n_vocab);
  print_row(prefill.data(), n_vocab);
  std::printf(",\"decode_logits\":[");
  for (size_t j = 0; j < rows.size(); ++j) {
    if (j) std::putchar(',');
    print_row(rows[j].data(), n_vocab);
  }
  std::printf("],\"greedy_tokens\":[");
  for (size_t j = 0; j < greedy.size(); ++j) std::printf(j ? ",%d" : "%d", greedy[j]);
  std::puts("]}");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: llama_logits logits MODEL.gguf --prompt IDS --steps N --feed IDS [--threads T]\n"
      "       llama_logits tokenize MODEL.gguf TEXT\n";
  if (argc < 3) {
    std::fputs(usage, stderr);
    return 2;
  }
  const std::string mode = argv[1];
  llama_backend_init();
  if (mode == "tokenize" && argc == 4) return run_tokenize(argv[2], argv[3]);
  if (mode != "logits") {
    std::fputs(usage, stderr);
    return 2;
  }
  std::vector<llama_token> prompt, feed;
  int steps = 0, threads = 2;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--prompt")
      prompt = parse_ids(value);
    else if (flag == "--feed")
      feed = parse_ids(value);
    else if (flag == "--steps")
      steps = std::atoi(value.c_str());
    else if (flag == "--threads")
      threads = std::atoi(value.c_str());
    else
      die("unknown flag " + flag);
  }
  if ((argc - 3) % 2 != 0) die("a flag lacks its value");
  return run_logits(argv[2], prompt, steps, feed, threads);
}
