#include "handoff/engine/request.h"

namespace handoff::engine {

void RequestStream::push(RequestEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

bool RequestStream::pop(RequestEvent& event, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  event = std::move(events_.front());
  events_.pop_front();
  return true;
}

RequestEvent RequestStream::wait_all() {
  RequestEvent all;
  while (!collect(all, std::chrono::milliseconds(1000))) {
  }
  return all;
}

bool RequestStream::collect(RequestEvent& all, std::chrono::milliseconds timeout) {
  RequestEvent e;
  while (pop(e, timeout)) {
    all.tokens.insert(all.tokens.end(), e.tokens.begin(), e.tokens.end());
    all.text += e.text;
    all.logprobs.insert(all.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    all.prompt_tokens = e.prompt_tokens;
    all.completion_tokens = e.completion_tokens;
    if (e.finish_reason || !e.error.empty()) {
      all.finish_reason = e.finish_reason;
      all.error = e.error;
      all.queue_s = e.queue_s;
      all.ttft_s = e.ttft_s;
      all.e2e_s = e.e2e_s;
      return true;
    }
    timeout = std::chrono::milliseconds(0);  // drain what is queued, then report progress
  }
  return false;
}

}  // namespace handoff::engine
