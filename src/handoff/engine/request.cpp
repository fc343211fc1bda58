#include "handoff/engine/request.h"

namespace handoff::engine {

void RequestStream::push(RequestEvent event) {
  const bool ends = event.finish_reason.has_value() || !event.error.empty();
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  if (ends || !wake_only_at_end_.load(std::memory_order_relaxed)) cv_.notify_all();
}

bool RequestStream::pop(RequestEvent& event, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  event = std::move(events_.front());
  events_.pop_front();
  return true;
}

RequestEvent RequestStream::wait_all() { return wait_all_choices()[0]; }

std::vector<RequestEvent> RequestStream::wait_all_choices() {
  std::vector<RequestEvent> all;
  while (!collect(all, std::chrono::milliseconds(1000))) {
  }
  return all;
}

bool RequestStream::collect(std::vector<RequestEvent>& all, std::chrono::milliseconds timeout) {
  all.resize(static_cast<size_t>(num_choices_));
  for (size_t i = 0; i < all.size(); ++i) all[i].index = static_cast<int>(i);
  RequestEvent e;
  while (finished_ < num_choices_ && pop(e, timeout)) {
    if (e.index < 0 || e.index >= num_choices_) continue;  // not a choice of this stream
    RequestEvent& c = all[static_cast<size_t>(e.index)];
    c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
    c.text += e.text;
    c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    c.prompt_tokens = e.prompt_tokens;
    c.completion_tokens = e.completion_tokens;
    if (e.finish_reason || !e.error.empty()) {
      c.finish_reason = e.finish_reason;
      c.error = e.error;
      c.queue_s = e.queue_s;
      c.ttft_s = e.ttft_s;
      c.e2e_s = e.e2e_s;
      ++finished_;
    }
    timeout = std::chrono::milliseconds(0);  // drain what is queued, then report progress
  }
  return finished_ == num_choices_;
}

bool RequestStream::collect(RequestEvent& all, std::chrono::milliseconds timeout) {
  std::vector<RequestEvent> one{std::move(all)};
  const bool done = collect(one, timeout);
  all = std::move(one[0]);
  return done;
}

}  // namespace handoff::engine
