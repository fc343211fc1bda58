#pragma once
// Worker threads for our kernels: each thread that runs ops (the main thread, each local rank,
// the serving loop) gets its own workers, made once and reused by every op. Work is claimed in
// chunks, so a worker the OS has not scheduled (an oversubscribed machine) delays nothing.
// oneDNN keeps OpenMP's team (Debian builds it with the OpenMP runtime); it only runs the large
// prefill GEMMs, never from inside parallel_for.
#include <cstdint>
#include <type_traits>

namespace handoff::tensor {

// Threads the kernels of the calling thread use (a rank thread of the local backend gets
// cores / ranks). Set once per thread before the first op.
int num_threads();
void set_num_threads(int n);

// Lets the calling thread's idle workers sleep now instead of spinning for the next op: called
// before work on other threads (a oneDNN primitive on OpenMP's team), so they do not compete.
void park_workers();

// A non-owning reference to a callable body(begin, end): unlike std::function, passing a
// lambda never allocates, so ops in the step loop stay allocation-free. Valid while the
// referenced callable lives (for a temporary lambda: the whole parallel_for call).
class RangeBody {
 public:
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, RangeBody>)
      RangeBody(const F& f)  // NOLINT: implicit, so a lambda passes as is
      : callable_(&f), call_([](const void* c, int64_t begin, int64_t end) {
          (*static_cast<const F*>(c))(begin, end);
        }) {}
  void operator()(int64_t begin, int64_t end) const { call_(callable_, begin, end); }

 private:
  const void* callable_;
  void (*call_)(const void*, int64_t, int64_t);
};

// The i-th round of a wait: a pause while spinning is cheap, then yielding the core (the thread
// waited on may have been descheduled). relax_wait(0), relax_wait(1), ... as in wait_until.
void relax_wait(int i);
template <typename Done>
void wait_until(const Done& done) {
  for (int i = 0; !done(); ++i) relax_wait(i);
}

// Calls body(begin, end) on disjoint chunks covering [0, n), possibly several per thread, in
// any order; chunks are about `grain` long at least. Inside a chunk, parallel_for runs inline.
// An exception from a chunk is rethrown here once every chunk has finished.
void parallel_for(int64_t n, int64_t grain, RangeBody body);

}  // namespace handoff::tensor
