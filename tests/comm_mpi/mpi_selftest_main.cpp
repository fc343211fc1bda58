// Checks the MPI backend under mpirun -np 4 (tp=2, pp=2): collectives on every group with
// exact expected values, bit-identical all_reduce, send/recv between stages, broadcast,
// barrier and counters. Prints "mpi selftest passed" and exits 0, or names the first mismatch
// and exits 1.
//
// With the argument "timeout", rank 3 skips a world barrier: the others must raise CommError
// within the 300 ms timeout, print it and abort the job, so mpirun exits non-zero instead of
// hanging.
#include <chrono>
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

  // Bit-identical all_reduce of random floats: every rank checks against the rank-order sum.
  constexpr int64_t n = 33 * 17;
  auto input = [&](int rank) {
    std::mt19937 rng(1234 + rank);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng) * float(1 << (rank % 5));
    return v;
  };
  for (Group g : {Group::kTp, Group::kPp, Group::kWorld}) {
    std::vector<float> data = input(t.rank);
    c.all_reduce(g, data.data(), n);
    std::vector<float> want = input(t.world_rank_of(g, 0));
    for (int m = 1; m < t.group_size(g); ++m) {
      std::vector<float> other = input(t.world_rank_of(g, m));
      for (int64_t i = 0; i < n; ++i) want[i] += other[i];
    }
    check(std::memcmp(data.data(), want.data(), n * sizeof(float)) == 0,
          "bit-identical all_reduce " + std::string(group_name(g)));
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
