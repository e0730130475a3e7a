// Chapter 12: times the hand-written ring all-reduce (ch12.1) against MPI's MPI_Allreduce for
// float32 buffers of 1 KiB .. 64 MiB and prints the time per call and the bus bandwidth
// 2(N-1)/N * bytes / time (the ring's traffic per rank: comparable across N, see the README).
//   mpirun -np 4 build/bin/tt_allreduce_bench [--max-mib 64] [--iters 5]
#include <algorithm>
#include <cstdio>

#include "tt/cli.h"
#include "tt/ring_all_reduce.h"
#include "tt/timer.h"

using namespace tt;

namespace {

/// Median seconds of `iters` calls of `fn`, each started together on every rank (barrier).
template <typename Fn>
double median_seconds(dist::ProcessGroup& g, int iters, Fn&& fn) {
  std::vector<double> s;
  for (int i = 0; i < iters; ++i) {
    g.barrier();
    Timer t;
    fn();
    s.push_back(t.elapsed_s());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_mib = 64;
  int iters = 5;
  ArgParser args("tt_allreduce_bench",
                 "usage: [mpirun -np N] tt_allreduce_bench [--max-mib 64] [--iters 5]\n");
  args.option("--max-mib", &max_mib).option("--iters", &iters);
  args.parse(argc, argv);
  try {
    dist::ProcessGroup& g = dist::world();
    const int N = g.world_size();
    if (g.rank() == 0) {
      std::printf("all-reduce of float32, %d rank(s) (%s), median of %d\n", N,
                  g.backend_name().c_str(), iters);
      std::printf("%12s %12s %12s %14s %14s\n", "bytes", "MPI ms", "ring ms", "MPI busbw GB/s",
                  "ring busbw GB/s");
    }
    for (int64_t bytes = 1024; bytes <= max_mib * 1024 * 1024; bytes *= 4) {
      Tensor a = ones({bytes / 4}), b = ones({bytes / 4});
      const double t_mpi = median_seconds(g, iters, [&] { g.all_reduce(a); });
      const double t_ring = median_seconds(g, iters, [&] { dist::ring_all_reduce(g, b); });
      const double traffic = 2.0 * (N - 1) / N * static_cast<double>(bytes);
      if (g.rank() == 0) {
        std::printf("%12lld %12.3f %12.3f %14.2f %14.2f\n", static_cast<long long>(bytes),
                    t_mpi * 1e3, t_ring * 1e3, traffic / t_mpi / 1e9, traffic / t_ring / 1e9);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tt_allreduce_bench: %s\n", e.what());
    return 1;
  }
  dist::finalize();
  return 0;
}
