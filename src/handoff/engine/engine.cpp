#include "handoff/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "handoff/engine/logprobs.h"
#include "handoff/log.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The longest prefix of `s` no longer than `n` bytes that does not cut a UTF-8 character.
size_t utf8_cut(const std::string& s, size_t n) {
  n = std::min(n, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

Engine::Engine(const EngineOptions& options, std::unique_ptr<runtime::Executor> executor,
               const text::Tokenizer* tokenizer)
    : options_(options),
      executor_(std::move(executor)),
      tokenizer_(tokenizer),
      blocks_(options.num_blocks, options.block_size, options.prefix_caching),
      scheduler_(options.scheduler, blocks_) {
  if (options.max_model_len < 2) fail_input("max_model_len must be >= 2");
  if (options.max_model_len > options.num_blocks * options.block_size)
    fail_input("max_model_len {} exceeds the cache of {} tokens", options.max_model_len,
               options.num_blocks * options.block_size);
  if (tokenizer_ != nullptr) eos_ = tokenizer_->eos_id();
  // The embedding is padded beyond the tokenizer (DeepSeek-V3: 129280 rows, 128815 ids); ids
  // no tokenizer knows have no text, so sampling stays within the tokenizer's ids.
  int64_t n = executor_->config().vocab_size;
  if (tokenizer_ != nullptr) n = std::min<int64_t>(n, tokenizer_->vocab_size());
  row_.resize(static_cast<size_t>(n));
  if (tokenizer_ != nullptr) {
    token_table_ = std::make_unique<TokenTable>(*tokenizer_);
    allowed_.resize(static_cast<size_t>(token_table_->vocab_size()));
  }
  stats_.cache_blocks_total = options.num_blocks;
}

Engine::~Engine() { stop(); }

void Engine::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  // The loop runs the model: it gets the starting thread's kernel thread count (--threads).
  thread_ = std::thread([this, threads = tensor::num_threads()] {
    tensor::set_num_threads(threads);
    loop();
  });
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Whatever is left ends here, so no client waits forever.
  take_incoming();
  for (Sequence* s : scheduler_.all()) {
    RequestEvent e;
    finish(*s, e, "abort");
  }
  for (Sequence* s : scheduler_.all()) scheduler_.remove(s->id);
  refresh_gauges();
}

std::shared_ptr<RequestStream> Engine::submit(Request request) {
  std::shared_ptr<RequestStream> stream;
  enqueue(std::move(request), stream, 0);
  return stream;
}

uint64_t Engine::submit(Request request, const std::shared_ptr<RequestStream>& stream,
                        int first_index) {
  if (!stream) fail("Engine::submit: no stream");
  if (first_index < 0 || first_index + request.n > stream->num_choices())
    fail("Engine::submit: choices {}..{} are not in a stream of {}", first_index,
         first_index + request.n - 1, stream->num_choices());
  std::shared_ptr<RequestStream> s = stream;
  return enqueue(std::move(request), s, first_index);
}

uint64_t Engine::enqueue(Request request, std::shared_ptr<RequestStream>& stream, int first_index) {
  const int64_t vocab = executor_->config().vocab_size;
  if (request.n < 1 || request.n > options_.scheduler.max_num_seqs)
    fail_input("n must be between 1 and the server's max_num_seqs ({}), got {}",
               options_.scheduler.max_num_seqs, request.n);
  if (request.prompt.empty()) fail_input("the prompt must have at least one token");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= vocab) fail_input("token id {} is outside the vocabulary of {}", id, vocab);
  for (int32_t id : request.stop_token_ids)
    if (id < 0 || id >= vocab) fail_input("stop token id {} is outside the vocabulary", id);
  validate(request.sampling);
  if (request.max_tokens < 1) fail_input("max_tokens must be >= 1, got {}", request.max_tokens);
  if (request.top_logprobs > 20) fail_input("top_logprobs must be <= 20");
  if (request.tool_call_grammar && tokenizer_ == nullptr)
    fail_input("a forced tool call needs a model with a tokenizer");
  if (!request.stop.empty() && tokenizer_ == nullptr)
    fail_input("stop strings need a model with a tokenizer");
  for (const auto& s : request.stop)
    if (s.empty()) fail_input("stop strings must not be empty");
  const auto prompt_len = static_cast<int64_t>(request.prompt.size());
  if (prompt_len + request.max_tokens > options_.max_model_len)
    throw PromptTooLongError(fmt::format(
        "this model's maximum context length is {} tokens; the request has {} prompt tokens "
        "and max_tokens {}",
        options_.max_model_len, prompt_len, request.max_tokens));

  std::lock_guard lock(mutex_);
  if (!failure_.empty()) throw OverloadedError(fmt::format("the engine failed: {}", failure_));
  if (stopping_ && thread_.joinable()) throw OverloadedError("the server is shutting down");
  if (static_cast<int64_t>(incoming_.size()) + stats_.waiting >= options_.max_waiting)
    throw OverloadedError(fmt::format("too many queued requests ({})", options_.max_waiting));
  const uint64_t id = next_id_++;
  if (!stream) stream = std::make_shared<RequestStream>(id, request.n);
  const int n = request.n;
  auto seq = std::make_unique<Sequence>(id, std::move(request), stream, first_index);
  if (tokenizer_ != nullptr)
    seq->decoder = std::make_unique<text::StreamDecoder>(
        *tokenizer_, text::DecodeOptions{seq->request.skip_special_tokens,
                                         seq->request.spaces_between_special_tokens});
  if (!scripts_.empty()) seq->sampler.script(scripts_[scripted_requests_++ % scripts_.size()]);
  if (seq->request.sampling.repetition_penalty != 1.0f) {
    seq->penalties.seen.assign(static_cast<size_t>(vocab), false);
    for (int32_t id2 : seq->tokens) seq->penalties.seen[static_cast<size_t>(id2)] = true;
  }
  incoming_.push_back(std::move(seq));
  in_flight_ += n;
  cv_.notify_all();
  return id;
}

void Engine::script_outputs(std::vector<std::vector<int32_t>> scripts) {
  const int64_t vocab = executor_->config().vocab_size;
  for (const auto& script : scripts)
    for (int32_t id : script)
      if (id < 0 || id >= vocab) fail_input("scripted token id {} is outside the vocabulary", id);
  std::lock_guard lock(mutex_);
  scripts_ = std::move(scripts);
  scripted_requests_ = 0;
}

void Engine::cancel(uint64_t id) {
  {
    std::lock_guard lock(mutex_);
    cancelled_.insert(id);
  }
  cv_.notify_all();
}

std::string Engine::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void Engine::on_failure(std::function<void(const std::string&)> callback) {
  on_failure_ = std::move(callback);
}

int64_t Engine::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::take_incoming() {
  std::vector<std::unique_ptr<Sequence>> incoming;
  std::set<uint64_t> cancelled;
  {
    std::lock_guard lock(mutex_);
    incoming.swap(incoming_);
    cancelled.swap(cancelled_);
  }
  for (auto& s : incoming) scheduler_.add(std::move(s));
  for (uint64_t id : cancelled)
    for (Sequence* s : scheduler_.all())  // every choice of the request
      if (s->request_id == id) {
        RequestEvent e;
        finish(*s, e, "abort");
        scheduler_.remove(s->id);
      }
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || !cancelled_.empty() || !scheduler_.empty();
      });
      if (stopping_) return;
    }
    bool failed_now = false;
    {
      std::lock_guard lock(mutex_);
      failed_now = !failure_.empty();
    }
    if (failed_now) {
      // Requests queued before the failure was known: the executor cannot run them.
      take_incoming();
      fail_all(failure());
      continue;
    }
    try {
      step();
    } catch (const std::exception& e) {
      // An executor that threw is broken (a rank is gone): fail everything, now and later.
      log::warn("engine step failed, the engine stops serving: {}", e.what());
      {
        std::lock_guard lock(mutex_);
        failure_ = e.what();
      }
      fail_all(e.what());
      if (on_failure_) on_failure_(e.what());
    }
  }
}

void Engine::fail_all(const std::string& message) {
  for (Sequence* s : scheduler_.all()) {
    RequestEvent e;
    e.error = message;
    finish(*s, e, "abort");
  }
  for (Sequence* s : scheduler_.all()) scheduler_.remove(s->id);
  refresh_gauges();
}

bool Engine::step() {
  take_incoming();
  std::vector<ScheduledChunk> plan = scheduler_.schedule();
  refresh_gauges();  // admissions, cancels and preemptions of this step
  if (plan.empty()) return false;
  step_.copies = scheduler_.copies();
  step_.chunks.clear();
  for (const ScheduledChunk& c : plan)
    step_.chunks.push_back({std::span<const int32_t>(c.seq->tokens.data() + c.start,
                                                     static_cast<size_t>(c.num_tokens)),
                            c.start, &c.seq->blocks, false});
  const auto step_start = Clock::now();
  int64_t step_tokens = 0;
  for (const ScheduledChunk& c : plan) {
    step_tokens += c.num_tokens;
    if (!c.seq->first_scheduled) c.seq->first_scheduled = step_start;
  }
  const tensor::Tensor logits = executor_->step(step_);
  const int64_t vocab = executor_->config().vocab_size;
  uint64_t prompt_tokens = 0;
  forked_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    seq.num_computed += plan[i].num_tokens;
    // Its newly full blocks become reusable by later sequences with the same tokens.
    blocks_.register_full_blocks(seq.blocks, seq.tokens, seq.num_computed);
    if (seq.preemptions == 0)
      prompt_tokens += static_cast<uint64_t>(std::max<int64_t>(
          0, std::min(seq.num_computed, seq.prompt_len) - std::min(plan[i].start, seq.prompt_len)));
    if (plan[i].samples) sample(seq, logits.data<float>() + static_cast<int64_t>(i) * vocab);
  }
  {
    std::lock_guard lock(mutex_);
    stats_.prompt_tokens += prompt_tokens;
    ++stats_.steps;
    stats_.iteration_tokens.observe(static_cast<double>(step_tokens));
  }
  for (const ScheduledChunk& c : plan)
    if (c.seq->finished) scheduler_.remove(c.seq->id);
  for (Sequence* s : forked_)
    if (s->finished) scheduler_.remove(s->id);
  refresh_gauges();  // finished requests freed their blocks: an idle engine reads 0
  return true;
}

void Engine::refresh_gauges() {
  std::lock_guard lock(mutex_);
  stats_.waiting = scheduler_.num_waiting();
  stats_.running = scheduler_.num_running();
  stats_.preemptions = static_cast<uint64_t>(scheduler_.num_preemptions());
  // Referenced blocks only: blocks kept just for prefix reuse are free to take.
  stats_.cache_blocks_used = blocks_.used_blocks();
  stats_.prefix_cache_queries = static_cast<uint64_t>(scheduler_.prefix_queries());
  stats_.prefix_cache_hits = static_cast<uint64_t>(scheduler_.prefix_hits());
}

void Engine::run_until_idle() {
  for (;;) {
    bool any;
    {
      std::lock_guard lock(mutex_);
      any = !incoming_.empty() || !cancelled_.empty();
    }
    if (!step() && !any && scheduler_.empty()) return;
  }
}

void Engine::fork_choices(Sequence& leader, const float* logits) {
  const int forks = leader.pending_forks;
  leader.pending_forks = 0;
  for (int k = 1; k <= forks; ++k) {
    uint64_t id;
    {
      std::lock_guard lock(mutex_);
      id = next_id_++;
    }
    Request r = leader.request;
    r.seed = choice_seed(leader.request.seed, k);  // each choice its own sampler
    r.n = 1;
    auto child = std::make_unique<Sequence>(id, std::move(r), leader.stream, leader.index + k);
    child->request_id = leader.request_id;
    child->arrival = leader.arrival;
    child->first_scheduled = leader.first_scheduled;
    child->num_computed = leader.num_computed;
    child->penalties = leader.penalties;
    if (tokenizer_ != nullptr)
      child->decoder = std::make_unique<text::StreamDecoder>(
          *tokenizer_, text::DecodeOptions{child->request.skip_special_tokens,
                                           child->request.spaces_between_special_tokens});
    blocks_.fork(leader.blocks, child->blocks);
    Sequence* c = child.get();
    scheduler_.add_running(std::move(child));
    forked_.push_back(c);
    sample(*c, logits);
  }
}

void Engine::sample(Sequence& seq, const float* logits) {
  if (seq.pending_forks > 0) fork_choices(seq, logits);
  const Request& r = seq.request;
  const int64_t vocab = static_cast<int64_t>(row_.size());
  try {
    require_finite_logits(logits, vocab);
  } catch (const NonFiniteLogitsError& e) {
    log::warn("request {}: {}", seq.id, e.what());
    RequestEvent event;
    event.error = e.what();
    finish(seq, event, "abort");
    return;
  }
  const float* row = logits;
  if (has_penalties(r.sampling)) {
    std::memcpy(row_.data(), logits, row_.size() * sizeof(float));
    apply_penalties(row_.data(), vocab, r.sampling, seq.penalties);
    row = row_.data();
  }
  if (seq.grammar && !seq.sampler.scripted()) {
    row = constrain(seq, row);
    if (row == nullptr) {
      RequestEvent event;
      event.error = "no token continues the forced tool call";
      log::warn("request {}: {}", seq.id, event.error);
      finish(seq, event, "abort");
      return;
    }
  }
  const int32_t token = seq.sampler.sample(row, vocab, r.sampling);
  seq.tokens.push_back(token);
  bool call_complete = false;
  if (seq.grammar) {
    // A scripted token (test hook) the grammar refuses ends the constraint.
    if (token < token_table_->vocab_size() && seq.grammar->feed(token_table_->bytes(token)))
      call_complete = seq.grammar->done();
    else
      seq.grammar.reset();
  }
  ++seq.penalties.output_counts[token];
  if (!seq.penalties.seen.empty()) seq.penalties.seen[static_cast<size_t>(token)] = true;

  const auto now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    ++stats_.generation_tokens;
    if (seq.last_token_time)
      stats_.inter_token.observe(seconds(now - *seq.last_token_time));
    else
      stats_.ttft.observe(seconds(now - seq.arrival));
  }
  if (!seq.first_token_time) seq.first_token_time = now;
  seq.last_token_time = now;

  RequestEvent event;
  event.index = seq.index;
  event.tokens = {token};
  event.at_s = seconds(now - seq.arrival);
  if (r.top_logprobs >= 0)
    event.logprobs.push_back(token_logprob(logits, vocab, token, r.top_logprobs));
  const bool stop_token =
      (!r.ignore_eos && eos_ && token == *eos_) ||
      std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
  if (stop_token) {
    finish(seq, event, "stop");
    return;
  }
  if (seq.decoder) {
    try {
      seq.held_text += seq.decoder->push(token);
    } catch (const InputError&) {
      // An id without text (a gap in the tokenizer's ids) adds nothing.
    }
    size_t hold = 0;
    for (const auto& s : r.stop) {
      const size_t at = seq.held_text.find(s);
      if (at != std::string::npos) {
        seq.held_text.resize(at);
        event.text = std::move(seq.held_text);
        seq.held_text.clear();
        seq.decoder.reset();  // what follows the stop string is dropped
        finish(seq, event, "stop");
        return;
      }
      hold = std::max(hold, s.size() - 1);
    }
    // Hold back what could still begin a stop string.
    const size_t emit =
        seq.held_text.size() > hold ? utf8_cut(seq.held_text, seq.held_text.size() - hold) : 0;
    event.text = seq.held_text.substr(0, emit);
    seq.held_text.erase(0, emit);
  }
  if (call_complete) {  // the forced call is all the output
    finish(seq, event, "stop");
    return;
  }
  if (seq.num_generated() >= r.max_tokens ||
      static_cast<int64_t>(seq.tokens.size()) >= options_.max_model_len) {
    finish(seq, event, "length");
    return;
  }
  event.prompt_tokens = seq.prompt_len;
  event.completion_tokens = seq.num_generated();
  seq.stream->push(std::move(event));
}

const float* Engine::constrain(Sequence& seq, const float* row) {
  const int64_t vocab = static_cast<int64_t>(row_.size());
  // The tokens left, this one included: the call must end within them.
  const int64_t budget = std::min(seq.request.max_tokens - seq.num_generated(),
                                  options_.max_model_len - static_cast<int64_t>(seq.tokens.size()));
  int64_t n = allowed_tokens(*token_table_, *seq.grammar, std::max<int64_t>(budget, 1), allowed_);
  // Too few tokens left for even the shortest call: keep to the grammar, the output is cut.
  if (n == 0) n = allowed_tokens(*token_table_, *seq.grammar, 0, allowed_);
  if (n == 0) return nullptr;
  if (row != row_.data()) std::memcpy(row_.data(), row, row_.size() * sizeof(float));
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i)
    if (allowed_[static_cast<size_t>(i)] == 0) row_[static_cast<size_t>(i)] = kMasked;
  return row_.data();
}

void Engine::finish(Sequence& seq, RequestEvent& event, const std::string& reason) {
  if (seq.finished) return;
  seq.finished = true;
  if (seq.decoder) {
    seq.held_text += seq.decoder->flush();
    seq.decoder.reset();
  }
  event.text += seq.held_text;
  seq.held_text.clear();
  event.index = seq.index;
  event.finish_reason = reason;
  event.prompt_tokens = seq.prompt_len;
  event.completion_tokens = seq.num_generated();
  const auto now = Clock::now();
  const auto scheduled = seq.first_scheduled.value_or(now);
  event.queue_s = seconds(scheduled - seq.arrival);
  event.ttft_s = seq.first_token_time ? seconds(*seq.first_token_time - seq.arrival) : 0.0;
  event.e2e_s = event.at_s = seconds(now - seq.arrival);
  // Choices never forked (the leader ended before its first token) end with it.
  const int unforked = seq.pending_forks;
  seq.pending_forks = 0;
  {
    std::lock_guard lock(mutex_);
    stats_.finished[reason] += static_cast<uint64_t>(1 + unforked);
    stats_.e2e.observe(event.e2e_s);
    stats_.queue_time.observe(event.queue_s);
    if (seq.first_token_time) {
      stats_.prefill_time.observe(seconds(*seq.first_token_time - scheduled));
      stats_.decode_time.observe(seconds(now - *seq.first_token_time));
    }
    stats_.request_prompt_tokens.observe(static_cast<double>(seq.prompt_len));
    stats_.request_generation_tokens.observe(static_cast<double>(seq.num_generated()));
    in_flight_ -= 1 + unforked;
  }
  for (int k = 1; k <= unforked; ++k) {
    RequestEvent e;
    e.index = seq.index + k;
    e.finish_reason = reason;
    e.error = event.error;
    e.prompt_tokens = seq.prompt_len;
    e.queue_s = event.queue_s;
    e.e2e_s = e.at_s = event.e2e_s;
    seq.stream->push(std::move(e));
  }
  seq.stream->push(std::move(event));
}

}  // namespace handoff::engine
