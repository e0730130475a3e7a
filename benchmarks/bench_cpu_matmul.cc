// CPU matmul benchmark (chapter 04): the naive, cache-blocked and Eigen kernels against
// OpenBLAS's cblas_sgemm in the same run, float32, on square sizes and GPT-2 layer shapes.
//
//   OMP_NUM_THREADS=2 build/bin/bench_cpu_matmul
//   OMP_NUM_THREADS=2 build/bin/bench_cpu_matmul --benchmark_filter=1024
//
// Each benchmark reports GFLOP=x/s, the rate 2*M*N*K / time. Kernels are called through the
// registry with preallocated operands, so allocation is not measured; all use the same thread count
// (tt::num_threads(), from OMP_NUM_THREADS), OpenBLAS included.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench_main.h"
#include "tt/dispatcher.h"
#include "tt/ops_matmul.h"
#include "tt/parallel.h"

#if TT_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace {

/// Operand layouts: kNN is a [M,K] @ b [K,N], both row-major; kNT takes b as the transpose of
/// a row-major [N,K] (a linear layer's forward, x W^T); kTN takes a as the transpose of a
/// row-major [K,M] (its weight gradient, dY^T X).
enum class Layout { kNN, kNT, kTN };

struct Shape3 {
  std::string name;
  int64_t M, N, K;
  Layout layout = Layout::kNN;
};

void set_gflops(benchmark::State& state, const Shape3& s) {
  state.counters["GFLOP"] = benchmark::Counter(
      2.0 * static_cast<double>(s.M * s.N * s.K) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

/// The operands of `s` in its layout: a [M, K] (a transposed view of a row-major [K, M] for
/// kTN), b [K, N] (of a row-major [N, K] for kNT).
std::pair<tt::Tensor, tt::Tensor> operands(const Shape3& s) {
  tt::Generator gen(1);
  tt::Tensor a = s.layout == Layout::kTN ? tt::randn({s.K, s.M}, gen).transpose(0, 1)
                                         : tt::randn({s.M, s.K}, gen);
  tt::Tensor b = s.layout == Layout::kNT ? tt::randn({s.N, s.K}, gen).transpose(0, 1)
                                         : tt::randn({s.K, s.N}, gen);
  return {a, b};
}

void bench_tt(benchmark::State& state, tt::MatmulAlgo algo, Shape3 s) {
  const auto [a, b] = operands(s);
  const tt::Tensor c = tt::empty({s.M, s.N});
  for (auto _ : state) {
    tt::call_kernel<tt::MatmulKernel>(tt::matmul_kernel_name(algo), c.device(), c, a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  set_gflops(state, s);
}

#if TT_HAVE_OPENBLAS
void bench_openblas(benchmark::State& state, Shape3 s) {
  const auto [a, b] = operands(s);  // a transposed view is passed as stored, with CblasTrans
  const bool ta = s.layout == Layout::kTN, tb = s.layout == Layout::kNT;
  const tt::Tensor c = tt::empty({s.M, s.N});
  openblas_set_num_threads(tt::num_threads());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                static_cast<int>(s.M), static_cast<int>(s.N), static_cast<int>(s.K), 1.0f,
                a.data<float>(), static_cast<int>(ta ? s.M : s.K), b.data<float>(),
                static_cast<int>(tb ? s.K : s.N), 0.0f, c.data<float>(), static_cast<int>(s.N));
    benchmark::ClobberMemory();
  }
  set_gflops(state, s);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape3> shapes;
  for (int64_t n : {256, 512, 1024, 2048}) {
    shapes.push_back({std::to_string(n) + "^3", n, n, n});
  }
  // GPT-2 linear layers, x [B*T, C] @ W: GPU config C=768 and the CPU mini config C=384,
  // both with B*T = 8 * 256 tokens (the CPU mini batch).
  for (int64_t C : {384, 768}) {
    const int64_t BT = 8 * 256;
    const std::string c = "C" + std::to_string(C) + "/";
    shapes.push_back({c + "qkv", BT, 3 * C, C});
    shapes.push_back({c + "attn_proj", BT, C, C});
    shapes.push_back({c + "fc", BT, 4 * C, C});
    shapes.push_back({c + "fc_proj", BT, C, 4 * C});
  }
  // The mini step's fc layer in its three layouts: forward x W^T, input gradient dY W, weight
  // gradient dY^T X.
  {
    const int64_t BT = 8 * 256, C = 384;
    shapes.push_back({"C384/fc_fwd_nt", BT, 4 * C, C, Layout::kNT});
    shapes.push_back({"C384/fc_dx_nn", BT, C, 4 * C, Layout::kNN});
    shapes.push_back({"C384/fc_dw_tn", 4 * C, C, BT, Layout::kTN});
  }
  const std::pair<const char*, tt::MatmulAlgo> algos[] = {{"naive", tt::MatmulAlgo::kNaive},
                                                          {"blocked", tt::MatmulAlgo::kBlocked},
                                                          {"eigen", tt::MatmulAlgo::kEigen},
                                                          {"fma", tt::MatmulAlgo::kFma}};
  for (const Shape3& s : shapes) {
    for (const auto& [name, algo] : algos) {
      // The naive kernel is kept to the small square sizes: it would take minutes elsewhere.
      if (algo == tt::MatmulAlgo::kNaive && (s.name[0] == 'C' || s.M > 1024)) continue;
      benchmark::RegisterBenchmark(("matmul/" + std::string(name) + "/" + s.name).c_str(), bench_tt,
                                   algo, s)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
#if TT_HAVE_OPENBLAS
    benchmark::RegisterBenchmark(("matmul/openblas/" + s.name).c_str(), bench_openblas, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
#endif
  }
  std::printf("bench_cpu_matmul: float32, %d threads (OMP_NUM_THREADS)\n", tt::num_threads());
#if !TT_HAVE_OPENBLAS
  std::printf("bench_cpu_matmul: OpenBLAS not found at configure time: baseline skipped\n");
#endif
  return tt::bench::run_registered(argc, argv);
}
