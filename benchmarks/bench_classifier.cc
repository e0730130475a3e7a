// The language-model head's loss, forward + backward: the unfused composition (matmul to the
// [N, V] logits, then cross_entropy) against chapter 10's fused classifier (names
// classifier_{unfused,fused}/<device>/<shape>, see bench_common.h):
//
//   classifier_{unfused,fused}/cpu/N2048_C384_V8192          the CPU "mini" GPT-2 (B=8, T=256)
//   classifier_{unfused,fused}/cuda_tf32/N8192_C768_V50257   GPT-2 124M (B=8, T=1024), TF32
//   classifier_{unfused,fused}/cuda/N8192_C768_V50257        the same in exact fp32
//   classifier_fused_<n>MiB/...                              other bounds on the logits chunk
//
//   build/bin/bench_classifier --benchmark_filter=/cuda_tf32/ [--profile]
//
// --profile: before timing, one more iteration under the per-op profiler (tt/profiler.h), printed
// by op and input shapes (which GEMM, which row kernel).
//
// One iteration: loss = head(x, wte, V, targets) with x [N, C] and wte [Vp, C] (Vp = V rounded
// up to a multiple of 64, as GPT-2 pads its vocabulary) requiring grad, then backward(loss).
// Counters: GFLOP/s of the three GEMMs (logits, dx, dW: 3 x 2 N V C), and "peak_MB": the most
// bytes allocated on the device above the inputs during one (untimed) iteration, sampled at
// every kernel boundary (the logits alone are N V 4 bytes = 1,647 MB at GPT-2 124M).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "bench_common.h"
#include "bench_profile.h"
#include "tt/allocation_watch.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/functional.h"
#include "tt/fused_classifier.h"
#include "tt/profiler.h"

namespace {

using namespace tt;

struct HeadShape {
  int64_t N, C, V;
  std::string args() const {
    return "N" + std::to_string(N) + "_C" + std::to_string(C) + "_V" + std::to_string(V);
  }
  double flops() const { return 6.0 * double(N) * double(V) * double(C); }
};

bool g_profile = false;  // --profile

/// Prints the per-op profile of one call of `step` on `device` (by op, then by op and shapes).
template <typename Step>
void print_profile(Device device, const std::string& name, const Step& step) {
  prof::Profiler profiler(device);
  const prof::Peaks peaks = bench::profile_step(profiler, device, step);
  std::printf("\n%s\n", prof::profile_report(profiler, peaks, "one iteration of " + name).c_str());
  std::fflush(stdout);
}

void run_head(benchmark::State& state, Device device, const std::string& name, const HeadShape& s,
              bool fused, int64_t chunk_bytes) {
  const int64_t Vp = classifier_padded_stride(s.V);
  Tensor x = bench::filled({s.N, s.C}, 1, device), wte = bench::filled({Vp, s.C}, 2, device);
  x = mul(x, 0.5);
  wte = mul(wte, 0.05);
  x.set_requires_grad();
  wte.set_requires_grad();
  const Tensor targets = bench::indices({s.N}, s.V, 3, device);
  auto step = [&] {
    const Tensor loss =
        fused ? fused_classifier_loss(x, wte, s.V, targets, {.max_chunk_bytes = chunk_bytes})
              : classifier_loss_unfused(x, wte, s.V, targets);
    autograd::backward(loss);
  };
  double peak_mb = 0;
  {
    step();  // first touch outside the sampler; the .grad buffers now exist
    prof::AllocationWatch watch(device);
    step();
    peak_mb = static_cast<double>(watch.peak_increase()) / 1e6;
  }
  if (g_profile) print_profile(device, name, step);
  const double seconds = bench::time_on(state, device, step);
  bench::set_rates(state, seconds, 0, s.flops());
  state.counters["peak_MB"] = peak_mb;
}

/// Registers classifier_unfused/... or classifier_fused[_<chunk>MiB]/... (the default chunk bound
/// has no suffix).
void register_head(const std::string& device_part, Device device, const HeadShape& s, bool fused,
                   bool tf32, int64_t iterations, int64_t chunk_bytes = kClassifierChunkBytes) {
  std::string family = fused ? "classifier_fused" : "classifier_unfused";
  if (fused && chunk_bytes != kClassifierChunkBytes) {
    family += "_" + std::to_string(chunk_bytes >> 20) + "MiB";
  }
  const std::string name = family + "/" + device_part + "/" + s.args();
  bench::register_on(
      name, device,
      [name, s, fused, tf32, chunk_bytes](benchmark::State& st, Device d) {
        cuda::AllowTf32Guard mode(tf32);
        run_head(st, d, name, s, fused, chunk_bytes);
      },
      iterations);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {  // remove --profile (Google Benchmark rejects unknown flags)
    if (std::string_view(argv[i]) == "--profile") {
      g_profile = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  const HeadShape mini{2048, 384, 8192}, gpt2{8192, 768, 50257};
  for (const bool fused : {false, true}) {
    register_head("cpu", Device::cpu(), mini, fused, false, 0);
    register_head("cuda_tf32", Device::cuda(), gpt2, fused, true, 20);
    register_head("cuda", Device::cuda(), gpt2, fused, false, 10);
  }
  // The chunk bound: smaller chunks mean less memory, more passes over dW (read and written once
  // per chunk) and smaller GEMMs.
  for (const int64_t mib : {64, 256, 1024}) {
    register_head("cuda_tf32", Device::cuda(), gpt2, true, true, 20, mib << 20);
    register_head("cpu", Device::cpu(), mini, true, false, 0, mib >> 4 << 20);
  }
  return bench::run_main(argc, argv, "bench_classifier");
}
