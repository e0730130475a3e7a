// Chapter 12: all-reduce bandwidth across message sizes, the project's own nccl-tests.
//   CPU (default): the hand-written ring all-reduce (ch12.1) against MPI's MPI_Allreduce;
//   --device cuda: NCCL (the process group's CUDA backend), one GPU per rank.
// For float32 buffers from --min-bytes (1 KiB) to --max-mib (64 MiB), x4 per row: the time per
// call, the algorithm bandwidth bytes/time and the bus bandwidth algbw * 2(N-1)/N (exercise
// ch12.6, tt/bandwidth.h: the ring's traffic per rank, comparable across N and with ONE
// direction of a rank's link; --link-gbps prints the fraction of it, e.g. 450 for an H100 SXM's
// NVLink 4, "900 GB/s" counting both directions). --json FILE writes the rows too.
//   mpirun -np 4 build/bin/tt_allreduce_bench [--max-mib 64] [--iters 5]
//   NCCL_NVLS_ENABLE=0 mpirun -np 2 build/bin/tt_allreduce_bench --device cuda --max-mib 1024
//       --iters 20 --link-gbps 450 --json busbw.json   (one command)
// Timing: CPU, the median over --iters calls, each started together on every rank (barrier);
// CUDA, as nccl-tests: after --warmup calls, --iters calls back to back between two CUDA events
// on the compute stream (the mean). Each call also runs the group's agreement check (a small
// MPI_Allreduce on the host, tens of microseconds), which bounds the small sizes' rate on CUDA.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tt/bandwidth.h"
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

/// Mean seconds per call of `iters` all-reduces of the CUDA tensor `t` queued back to back,
/// after `warmup` untimed ones: GPU time between two marks of the compute stream.
double cuda_mean_seconds(dist::ProcessGroup& g, const Tensor& t, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) g.all_reduce(t);
  g.barrier();
  const auto begin = g.mark(t);
  for (int i = 0; i < iters; ++i) g.all_reduce(t);
  const auto end = g.mark(t);
  return end->ms_since(*begin) * 1e-3 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t min_bytes = 1024, max_mib = 64;
  int iters = 5, warmup = 2;
  double link_gbps = 0;
  std::string device_name = "cpu", json_path;
  ArgParser args("tt_allreduce_bench",
                 "usage: [mpirun -np N] tt_allreduce_bench [--device cpu|cuda] [--min-bytes 1024] "
                 "[--max-mib 64] [--iters 5] [--warmup 2] [--link-gbps G] [--json FILE]\n");
  args.option("--min-bytes", &min_bytes)
      .option("--max-mib", &max_mib)
      .option("--iters", &iters)
      .option("--warmup", &warmup)
      .option("--link-gbps", &link_gbps)
      .option("--device", &device_name)
      .option("--json", &json_path);
  args.parse(argc, argv);
  try {
    TT_CHECK(min_bytes >= 4 && max_mib > 0 && iters > 0 && warmup >= 0 && link_gbps >= 0,
             "tt_allreduce_bench: needs --min-bytes >= 4, --max-mib > 0, --iters > 0, "
             "--warmup >= 0, --link-gbps >= 0");
    dist::ProcessGroup& g = dist::world();
    const int N = g.world_size();
    Device device = Device::parse(device_name);
    const bool cuda = device.is_cuda();
    if (cuda) device = Device::cuda(g.local_rank());  // one GPU per rank
    const std::string backend = cuda ? "nccl" : g.backend_name();
    if (g.rank() == 0) {
      std::printf("all-reduce of float32 (in place), %d rank(s), %s on %s, %s of %d\n", N,
                  backend.c_str(), cuda ? "cuda" : "cpu", cuda ? "CUDA-event mean" : "median",
                  iters);
      std::printf("busbw = algbw * 2(N-1)/N (nccl-tests); GB = 1e9 bytes%s\n",
                  link_gbps > 0 ? "; % link: busbw / --link-gbps (one direction)" : "");
      std::printf("%12s %10s %10s %10s %8s", "bytes", "ms", "algbw GB/s", "busbw GB/s", "% link");
      if (!cuda) std::printf(" %10s %15s", "ring ms", "ring busbw GB/s");
      std::printf("\n");
    }
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t bytes = min_bytes; bytes <= max_mib * 1024 * 1024; bytes *= 4) {
      const int64_t n = std::max<int64_t>(1, bytes / 4);
      Tensor a = ones({n}, {.device = device});
      const double t = cuda ? cuda_mean_seconds(g, a, warmup, iters)
                            : median_seconds(g, iters, [&] { g.all_reduce(a); });
      double t_ring = 0;
      if (!cuda) {
        Tensor b = ones({n});
        t_ring = median_seconds(g, iters, [&] { dist::ring_all_reduce(g, b); });
      }
      const int64_t size = n * 4;
      const double algbw = dist::algorithm_bandwidth(size, t) / 1e9;
      const double busbw = dist::bus_bandwidth(size, t, N) / 1e9;
      if (g.rank() == 0) {
        char link[32] = "-";
        if (link_gbps > 0) std::snprintf(link, sizeof link, "%.1f", 100 * busbw / link_gbps);
        std::printf("%12lld %10.4f %10.2f %10.2f %8s", static_cast<long long>(size), t * 1e3, algbw,
                    busbw, link);
        nlohmann::json row = {
            {"bytes", size}, {"ms", t * 1e3}, {"algbw_gbps", algbw}, {"busbw_gbps", busbw}};
        if (!cuda) {
          const double ring = dist::bus_bandwidth(size, t_ring, N) / 1e9;
          std::printf(" %10.4f %15.2f", t_ring * 1e3, ring);
          row["ring_ms"] = t_ring * 1e3;
          row["ring_busbw_gbps"] = ring;
        }
        std::printf("\n");
        rows.push_back(std::move(row));
      }
    }
    if (g.rank() == 0 && !json_path.empty()) {
      const nlohmann::json doc = {{"world_size", N},
                                  {"backend", backend},
                                  {"device", cuda ? "cuda" : "cpu"},
                                  {"link_gbps", link_gbps},
                                  {"rows", rows}};
      std::ofstream out(json_path);
      out << doc.dump(2) << '\n';
      TT_CHECK(out.good(), "tt_allreduce_bench: cannot write ", json_path);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tt_allreduce_bench: %s\n", e.what());
    return 1;
  }
  dist::finalize();
  return 0;
}
