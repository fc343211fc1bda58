// Checks the MPI backend under mpirun -np 4 (tp=2, pp=2): collectives on every group with
// exact expected values; all_reduce bit-identical on every member and, like reduce_scatter,
// within rounding of the naive sum for counts that do and do not divide by the group size;
// send/recv between stages, broadcast, barrier and counters. Prints "mpi selftest passed" and
// exits 0, or names the first mismatch and exits 1.
//
// With the argument "timeout", rank 3 skips a world barrier: the others must raise CommError
// within the 300 ms timeout, print it and abort the job, so mpirun exits non-zero instead of
// hanging.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "handoff/comm/communicator.h"

namespace handoff::comm {
namespace {

using namespace std::chrono_literals;

void check(bool ok, const std::string& what) {
  if (!ok) throw Error("mismatch: " + what);
}

// Reproducible floats of mixed sign and magnitude, a different stream per rank.
std::vector<float> random_input(int rank, int64_t count) {
  std::mt19937 rng(1234 + rank);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (auto& x : v) x = dist(rng) * float(1 << (rank % 5));
  return v;
}

// `got` (count floats) is this member's result of a reduction over group g: all_reduce (every
// member holds the sums of elements [0, count)) or reduce_scatter (member m holds those of
// [m·count, (m+1)·count)), element i being the sum over members of input_of(member)[i]. The
// members gather each other's results; each checks every result against the naive rank-order
// sum within 1e-6 relative to the sum of magnitudes (the bound for reordered float addition;
// cancellation makes the sum itself a poor scale), and for all_reduce that every member holds
// exactly its own bits.
template <typename InputOf>
void check_sum(Communicator& c, Group g, const std::vector<float>& got, int64_t count,
               const InputOf& input_of, const std::string& what) {
  const int size = c.topology().group_size(g);
  const bool scattered = what == "reduce_scatter";
  const std::string where =
      what + " " + std::string(group_name(g)) + " count " + std::to_string(count);
  const int64_t total = scattered ? size * count : count;
  std::vector<float> want(static_cast<size_t>(total), 0.0f);
  std::vector<float> scale(static_cast<size_t>(total), 0.0f);
  for (int m = 0; m < size; ++m) {
    std::vector<float> in = input_of(m);
    for (int64_t i = 0; i < total; ++i) {
      want[i] += in[i];
      scale[i] += std::abs(in[i]);
    }
  }
  std::vector<float> all(static_cast<size_t>(size * count));
  c.all_gather(g, got.data(), all.data(), count);
  for (int m = 0; m < size; ++m) {
    const float* theirs = all.data() + m * count;
    const int64_t first = scattered ? m * count : 0;
    for (int64_t i = 0; i < count; ++i) {
      check(std::abs(theirs[i] - want[first + i]) <= 1e-6f * scale[first + i],
            where + ": member " + std::to_string(m) + " element " + std::to_string(i) + " is " +
                std::to_string(theirs[i]) + ", naive sum " + std::to_string(want[first + i]));
    }
    if (!scattered && count > 0) {  // memcmp takes no null pointer, even for 0 bytes
      check(std::memcmp(theirs, got.data(), count * sizeof(float)) == 0,
            where + ": member " + std::to_string(m) + " holds other bits");
    }
  }
}

void run_collectives(Communicator& c) {
  const Topology& t = c.topology();
  for (Group g : {Group::kTp, Group::kPp, Group::kWorld}) {
    const int size = t.group_size(g);
    const std::string gname(group_name(g));
    for (int64_t n : {1, 7, 33}) {
      std::vector<float> data(n);
      for (int64_t i = 0; i < n; ++i) data[i] = float((t.rank + 1) * 1000 + i);
      c.all_reduce(g, data.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int m = 0; m < size; ++m) want += float((t.world_rank_of(g, m) + 1) * 1000 + i);
        check(data[i] == want, "all_reduce " + gname);
      }

      std::vector<float> send(size * n);
      for (int b = 0; b < size; ++b) {
        for (int64_t i = 0; i < n; ++i) send[b * n + i] = float((t.rank + 1) * 100 + b * 10 + i);
      }
      std::vector<float> recv(n);
      c.reduce_scatter(g, send.data(), recv.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int m = 0; m < size; ++m) {
          want += float((t.world_rank_of(g, m) + 1) * 100 + t.group_rank(g) * 10 + i);
        }
        check(recv[i] == want, "reduce_scatter " + gname);
      }

      std::vector<float> mine(n);
      for (int64_t i = 0; i < n; ++i) mine[i] = float(t.rank * 100 + i);
      std::vector<float> gathered(size * n);
      c.all_gather(g, mine.data(), gathered.data(), n);
      for (int m = 0; m < size; ++m) {
        for (int64_t i = 0; i < n; ++i) {
          check(gathered[m * n + i] == float(t.world_rank_of(g, m) * 100 + i),
                "all_gather " + gname);
        }
      }
    }
    for (int root = 0; root < size; ++root) {
      char buf[13];
      std::memset(buf, t.group_rank(g) == root ? 'a' + root : '?', sizeof(buf));
      c.broadcast(g, buf, sizeof(buf), root);
      for (char ch : buf) check(ch == 'a' + root, "broadcast " + gname);
    }
    c.barrier(g);
  }

  // All-reduce of random floats: bit-identical on every member, within rounding of the
  // rank-order sum (MPI may add in another order).
  constexpr int64_t n = 33 * 17;
  for (Group g : {Group::kTp, Group::kPp, Group::kWorld}) {
    std::vector<float> data = random_input(t.rank, n);
    c.all_reduce(g, data.data(), n);
    check_sum(
        c, g, data, n, [&](int m) { return random_input(t.world_rank_of(g, m), n); }, "all_reduce");
  }

  // Pipeline hand-off: each stage sends two messages to the same tp rank of the next stage.
  c.set_scope("stage exit");
  if (t.pp_rank() + 1 < t.pp) {
    for (int k = 0; k < 2; ++k) {
      std::vector<float> out(33);
      for (int i = 0; i < 33; ++i) out[i] = float(t.rank * 1000 + k * 100 + i);
      c.send(out.data(), 33, t.rank + t.tp);
    }
  }
  if (t.pp_rank() > 0) {
    for (int k = 0; k < 2; ++k) {
      std::vector<float> in(33);
      c.recv(in.data(), 33, t.rank - t.tp);
      for (int i = 0; i < 33; ++i) {
        check(in[i] == float((t.rank - t.tp) * 1000 + k * 100 + i), "send/recv");
      }
    }
  }
  c.barrier(Group::kWorld);
  const CallStats& sends = c.counts().count({"stage exit", Op::kSend, Group::kPp})
                               ? c.counts().at({"stage exit", Op::kSend, Group::kPp})
                               : CallStats{};
  check(sends.calls == (t.pp_rank() + 1 < t.pp ? 2 : 0), "send count");
  check(sends.bytes == sends.calls * 33 * 4, "send bytes");
  check(c.counts().at({"step", Op::kAllReduce, Group::kTp}).calls == 4, "all_reduce count");
  check(c.counts().at({"step", Op::kAllReduce, Group::kTp}).bytes == (1 + 7 + 33 + n) * 4,
        "all_reduce bytes");

  // Counts that do and do not divide by the group size (the MPI all-reduce pads those), zero,
  // and reduce_scatter both out of place and in place (recv inside send).
  c.set_scope("rounding");
  for (Group g : {Group::kTp, Group::kPp, Group::kWorld}) {
    const int size = t.group_size(g);
    for (int64_t count : {0, 1, 2, 3, 4, 5, 7, 64, 1001}) {
      std::vector<float> data = random_input(t.rank, count);
      c.all_reduce(g, data.data(), count);
      check_sum(
          c, g, data, count, [&](int m) { return random_input(t.world_rank_of(g, m), count); },
          "all_reduce");

      std::vector<float> send = random_input(t.rank, size * count);
      std::vector<float> recv(count);
      c.reduce_scatter(g, send.data(), recv.data(), count);
      auto input_of = [&](int m) { return random_input(t.world_rank_of(g, m), size * count); };
      check_sum(c, g, recv, count, input_of, "reduce_scatter");
      // In place: the result lands at the start of the member's own send buffer.
      c.reduce_scatter(g, send.data(), send.data(), count);
      check(count == 0 || std::memcmp(send.data(), recv.data(), count * sizeof(float)) == 0,
            "reduce_scatter in place differs from out of place, " + std::string(group_name(g)));
    }
  }
  c.set_scope("step");

  // Many consecutive collectives must not mix.
  for (int it = 0; it < 200; ++it) {
    float x = float((t.rank + 1) * (it + 1));
    c.all_reduce(Group::kWorld, &x, 1);
    check(x == float(10 * (it + 1)), "consecutive all_reduce");
    float pair[2] = {float(it), float(t.rank)};
    float got[4];
    c.all_gather(Group::kTp, pair, got, 2);
    for (int m = 0; m < 2; ++m) {
      check(got[2 * m] == float(it) && got[2 * m + 1] == float(t.world_rank_of(Group::kTp, m)),
            "consecutive all_gather");
    }
  }
}

int run(int argc, char** argv) {
  const bool timeout_mode = argc > 1 && std::string(argv[1]) == "timeout";
  const int rank_before_init = mpi_world_rank();
  auto comm = make_mpi_communicator(2, 2, timeout_mode ? 300ms : 30s);
  if (comm->topology().rank != rank_before_init) {
    std::fprintf(stderr, "mpi_world_rank() %d before init, %d after\n", rank_before_init,
                 comm->topology().rank);
    return 1;
  }
  try {
    if (timeout_mode) {
      if (comm->topology().rank != 3) comm->barrier(Group::kWorld);
      // Rank 3 waits here until the others abort the job.
      std::this_thread::sleep_for(10s);
      std::fprintf(stderr, "rank %d: no timeout raised\n", comm->topology().rank);
      return 1;
    }
    run_collectives(*comm);
  } catch (const Error& e) {
    comm->abort(e.what());  // MPI_Abort: mpirun stops every rank and exits non-zero
    return 1;
  }
  if (comm->topology().rank == 0) std::printf("mpi selftest passed\n");
  comm.reset();
  finalize_mpi();
  return 0;
}

}  // namespace
}  // namespace handoff::comm

int main(int argc, char** argv) { return handoff::comm::run(argc, argv); }
