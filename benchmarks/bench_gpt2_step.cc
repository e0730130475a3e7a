// One GPT-2 training step (forward, backward, AdamW), CPU against CUDA on the same model and batch
// (names gpt2_train_step/{cpu,cuda}/<config>, see bench_common.h):
//
//   gpt2_train_step/{cpu,cuda}/L6_H6_C384_V8192_B8_T256     the CPU "mini" shape of DESIGN.md
//       section 6 (14.3M parameters, 2048 tokens per step), the shape of the PyTorch anchor
//         /usr/bin/python3 gpt2_torch_bench.py --device cpu --threads 2 --B 8 --T 256
//             --config L=6,NH=6,C=384,V=8192,Vp=8192,maxT=256 --modes fp32_naive
//       so that ms/step compare directly;
//   gpt2_train_step/cuda[_tf32]/L12_H12_C768_V50257_B8_T1024   GPT-2 124M (Vp = 50304), CUDA only
//       (cuda_tf32: float32 GEMMs on TF32 tensor cores, as train_gpt2 --tf32; cuda_flash_tf32:
//       the same with chapter 10's FlashAttention; cuda_fast_tf32: with chapter 10's whole
//       operation set "fast"):
//       about 7 TFLOP per step (over a minute on 2 CPU cores) and some 20 GB of activations
//       (each layer materializes and keeps [8, 12, 1024, 1024] attention scores).
//
//   OMP_NUM_THREADS=2 build/bin/bench_gpt2_step --benchmark_filter=/cpu/
//
// Timing: one untimed warm-up step on the CPU (first-touch page faults, optimizer state), two on
// CUDA (cuBLAS handles, the caching allocator); then per step the wall clock (CPU) or CUDA events
// on the device's stream (CUDA) at the start, after the forward, after the backward and after
// AdamW. Counters: tok/s (B*T tokens per step / step time), GFLOP/s of model FLOPs, forward_ms /
// backward_ms / adamw_ms (the split), loss, params_M. Model FLOPs per token (PaLM, appendix B):
// 6 N + 12 L T C, N = parameters except the position embedding (a lookup); the tied head counts
// once, as the V x C matmul it is.
//
// --profile (chapter 10, "Measure first"): for each benchmark that runs, after the warm-up,
// one more step under the per-op profiler (tt/profiler.h), printed as a table before the timed
// steps: every dispatched kernel, forward and backward, aggregated per op and read against the
// roofline (H100 SXM datasheet peaks on CUDA, FP32 or TF32 by mode; none on the CPU).
// --profile-json=DIR also writes it to DIR/profile_<mode>_<config>.json. Profile only what you
// need, e.g.
//   build/bin/bench_gpt2_step --profile --benchmark_filter='cuda_tf32/L12'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/optim.h"
#include "tt/profiler.h"

namespace {

using namespace tt;

struct StepShape {
  gpt2::GPT2Config config;
  int64_t B, T;
  /// "L6_H6_C384_V8192_B8_T256"
  std::string args() const {
    return "L" + std::to_string(config.n_layer) + "_H" + std::to_string(config.n_head) + "_C" +
           std::to_string(config.n_embd) + "_V" + std::to_string(config.vocab_size) + "_B" +
           std::to_string(B) + "_T" + std::to_string(T);
  }
};

StepShape make_shape(int64_t L, int64_t NH, int64_t C, int64_t V, int64_t Vp, int64_t B,
                     int64_t T) {
  StepShape s;
  s.config.n_layer = L;
  s.config.n_head = NH;
  s.config.n_embd = C;
  s.config.vocab_size = V;
  s.config.padded_vocab_size = Vp;
  s.config.block_size = T;
  s.B = B;
  s.T = T;
  return s;
}

/// What --profile and --profile-json=DIR asked for.
struct ProfileRequest {
  bool enabled = false;
  std::string json_dir;  // empty: no JSON
};
ProfileRequest g_profile;

/// Removes --profile and --profile-json=DIR from argv (Google Benchmark rejects unknown flags).
void parse_profile_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--profile") {
      g_profile.enabled = true;
    } else if (arg.rfind("--profile-json=", 0) == 0) {
      g_profile.enabled = true;
      g_profile.json_dir = std::string(arg.substr(std::string_view("--profile-json=").size()));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
}

/// Runs `step` once under the profiler and prints (and with --profile-json writes) its per-op
/// profile; `mode` is "cpu", "cuda" or "cuda_tf32".
template <typename Step>
void profile_one_step(Device device, const std::string& mode, const StepShape& s,
                      const Step& step) {
  prof::Profiler profiler(device);
  for (int i = 0; i < 2; ++i) {  // the first run fills the profiler's CUDA event pool
    profiler.start();
    step();
    profiler.stop();
  }
  const prof::Peaks peaks = prof::default_peaks(device);
  const std::string name = "gpt2_train_step/" + mode + "/" + s.args();
  std::printf("\n%s\n",
              prof::profile_report(profiler, peaks, "one steady-state step of " + name).c_str());
  if (!g_profile.json_dir.empty()) {
    const std::string path = g_profile.json_dir + "/profile_" + mode + "_" + s.args() + ".json";
    const auto rows = prof::read_profile(profiler.op_stats(), profiler.step_seconds(), peaks);
    std::ofstream(path) << prof::profile_json(rows, profiler.step_seconds(), peaks) << '\n';
    std::printf("wrote %s\n", path.c_str());
  }
  std::fflush(stdout);
}

/// B*T token ids in [0, V) on `device`.
Tensor random_tokens(Generator& gen, const StepShape& s, Device device) {
  std::vector<int64_t> v(static_cast<std::size_t>(s.B * s.T));
  for (auto& x : v) {
    x = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(s.config.vocab_size));
  }
  return from_vector(v, {s.B, s.T}).to(device);
}

void train_step(benchmark::State& state, Device device, const StepShape& s, const std::string& mode,
                const gpt2::ModelOps* ops = nullptr) {
  gpt2::GPT2 model(s.config, 1337);
  model.to(device);
  if (ops != nullptr) model.set_ops(*ops);
  optim::AdamWOptions ao;
  ao.lr = 3e-4;  // the anchor's AdamW settings
  optim::AdamW opt(model.parameters(), ao);
  Generator gen(0);
  const Tensor idx = random_tokens(gen, s, device), targets = random_tokens(gen, s, device);

  bench::DeviceClock clock(device, 4);
  Tensor loss;
  const auto step = [&] {
    clock.mark(0);
    loss = model.loss(idx, targets);
    clock.mark(1);
    autograd::backward(loss);
    clock.mark(2);
    opt.step();
    opt.zero_grad();
    clock.mark(3);
  };
  for (int i = 0; i < (device.is_cuda() ? 2 : 1); ++i) step();
  if (g_profile.enabled) profile_one_step(device, mode, s, step);

  double fwd = 0, bwd = 0, upd = 0;
  for (auto _ : state) {
    step();
    const double f = clock.seconds(0, 1), b = clock.seconds(1, 2), u = clock.seconds(2, 3);
    state.SetIterationTime(f + b + u);
    fwd += f;
    bwd += b;
    upd += u;
  }
  const double n = static_cast<double>(state.iterations()), seconds = fwd + bwd + upd;
  const double tokens = static_cast<double>(s.B * s.T);
  const gpt2::GPT2Config& c = s.config;
  const double params = static_cast<double>(model.num_parameters());
  const double flops_per_token = 6.0 * (params - static_cast<double>(c.block_size * c.n_embd)) +
                                 12.0 * static_cast<double>(c.n_layer * s.T * c.n_embd);
  state.counters["tok/s"] = tokens * n / seconds;
  bench::set_rates(state, seconds, 0, flops_per_token * tokens);
  state.counters["forward_ms"] = 1e3 * fwd / n;
  state.counters["backward_ms"] = 1e3 * bwd / n;
  state.counters["adamw_ms"] = 1e3 * upd / n;
  state.counters["loss"] = loss.item();
  state.counters["params_M"] = params / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  parse_profile_flags(argc, argv);
  const StepShape mini = make_shape(6, 6, 384, 8192, 8192, 8, 256);
  const StepShape gpt2_124m = make_shape(12, 12, 768, 50257, 50304, 8, 1024);
  bench::register_pair(
      "gpt2_train_step", mini.args(),
      [mini](benchmark::State& st, Device d) { train_step(st, d, mini, bench::device_name(d)); }, 3,
      10);
  bench::register_on(
      "gpt2_train_step/cuda/" + gpt2_124m.args(), Device::cuda(),
      [gpt2_124m](benchmark::State& st, Device d) { train_step(st, d, gpt2_124m, "cuda"); }, 10);
  // The same with TF32 GEMMs (train_gpt2 --tf32), against PyTorch's tf32 modes.
  bench::register_on(
      "gpt2_train_step/cuda_tf32/" + gpt2_124m.args(), Device::cuda(),
      [gpt2_124m](benchmark::State& st, Device d) {
        cuda::AllowTf32Guard tf32(true);
        train_step(st, d, gpt2_124m, "cuda_tf32");
      },
      10);
  // Chapter 10's operation set "fast" (TF32): FlashAttention alone (its other members cleared),
  // and the whole set (+ cuBLASLt epilogues, fused residual + LayerNorm, ...).
  gpt2::ModelOps flash_only = gpt2::model_ops("fast");
  flash_only.linear = nullptr;
  flash_only.linear_gelu = nullptr;
  flash_only.residual_layernorm = nullptr;
  flash_only.classifier_loss = nullptr;
  const gpt2::ModelOps fast = gpt2::model_ops("fast");
  const std::vector<std::pair<std::string, const gpt2::ModelOps*>> sets = {
      {"cuda_flash_tf32", &flash_only}, {"cuda_fast_tf32", &fast}};
  for (const auto& set : sets) {
    const std::string mode = set.first;
    const gpt2::ModelOps* ops = set.second;
    bench::register_on(
        "gpt2_train_step/" + mode + "/" + gpt2_124m.args(), Device::cuda(),
        [gpt2_124m, mode, ops](benchmark::State& st, Device d) {
          cuda::AllowTf32Guard tf32(true);
          train_step(st, d, gpt2_124m, mode, ops);
        },
        10);
  }
  return bench::run_main(argc, argv, "bench_gpt2_step");
}
