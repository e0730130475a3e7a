// One GPT-2 training step (forward, backward, AdamW), CPU against CUDA on the same model and batch
// (names gpt2_train_step/{cpu,cuda}/<config>, see bench_common.h):
//
//   gpt2_train_step/{cpu,cuda}/L6_H6_C384_V8192_B8_T256     the CPU "mini" shape of DESIGN.md
//       section 6 (14.3M parameters, 2048 tokens per step), the shape of the PyTorch anchor
//         /usr/bin/python3 gpt2_torch_bench.py --device cpu --threads 2 --B 8 --T 256
//             --config L=6,NH=6,C=384,V=8192,Vp=8192,maxT=256 --modes fp32_naive
//       so that ms/step compare directly;
//   gpt2_train_step/cuda[_tf32]/L12_H12_C768_V50257_B8_T1024   GPT-2 124M (Vp = 50304), CUDA only
//       (cuda_tf32: float32 GEMMs on TF32 tensor cores, as train_gpt2 --tf32):
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
// Chapter 10 modes (GPT-2 124M, TF32, CUDA only), the step of tt/fast_step.h: forward, backward,
// gradient norm and finite check on the device (max_grad_norm 0: no clipping, like the other
// modes), AdamW with the device skip flag, and the result read once at the end of the step:
//   gpt2_train_step/cuda_nowaste_tf32/...   chapter 09's reference ops ("A step without waste")
//   gpt2_train_step/cuda_fast_tf32/...      the "fast" ModelOps set (tt/gpt2_ops.h: FlashAttention,
//       fused classifier, ...); skipped, saying why, when no set "fast" is registered.
// Chapter 11 modes, the same step with the "bf16" set (mixed precision: bf16 GEMMs and
// FlashAttention, float32 master weights, residual stream, statistics and loss; the set's
// AdamW, MasterWeightAdamW, writes the bf16 weight copies; float32 GEMMs that remain run in
// TF32):
//   gpt2_train_step/cuda_bf16/...           GPT-2 124M on CUDA
//   gpt2_train_step/cuda_bf16_recompute/... the same with each block's MLP recomputed in
//       backward (set "bf16_recompute", tt/recompute.h): peak_MiB saved, step time paid
//   gpt2_train_step/cpu_bf16/...            the CPU mini step on the emulated path (float32
//       arithmetic with bf16 roundings: it measures the emulation's cost, not a speed-up)
// --cuda-graph runs both as a CUDA graph (tt::fast::GraphedTrainStep; names get "_graph":
// cuda_nowaste_tf32_graph, cuda_fast_tf32_graph). Extra counters of every CUDA mode: peak_MiB
// (the caching allocator's peak bytes allocated during the timed steps), syncs/step (host
// synchronizations, tt::cuda::host_sync_count) and mallocs/step (cudaMalloc calls); the
// sync-free modes count their end-of-step read in syncs/step.
//   build/bin/bench_gpt2_step --benchmark_filter='cuda_(nowaste_|fast_)?tf32/L12' [--cuda-graph]
//
// --profile (chapter 10, "Measure first"): for each benchmark that runs, after the warm-up,
// one more step under the per-op profiler (tt/profiler.h), printed as a table before the timed
// steps: every dispatched kernel, forward and backward, aggregated per op and read against the
// roofline (H100 SXM datasheet peaks on CUDA, FP32 or TF32 by mode; none on the CPU).
// --profile-json=DIR also writes it to DIR/profile_<mode>_<config>.json. Profile only what you
// need, e.g.
//   build/bin/bench_gpt2_step --profile --benchmark_filter='cuda_tf32/L12'
//
// --trace=DIR (chapter 12's tools lab): for each benchmark that runs, after the warm-up,
// --trace-steps=N (default 3) more steps recorded as a Chrome trace (tt/trace.h: every kernel on
// the device's timeline, the steps) in DIR/trace_<mode>_<config>.json, for ui.perfetto.dev or
// chrome://tracing. TT_NVTX=1 in the environment makes ops and steps NVTX ranges (tt/nvtx.h) for
// ncu/nsys.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "bench_profile.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/fast_step.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/optim.h"
#include "tt/profiler.h"
#include "tt/trace.h"
#include "tt/train.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#endif

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
bool g_cuda_graph = false;  // --cuda-graph
std::string g_trace_dir;    // --trace=DIR (empty: no trace)
int g_trace_steps = 3;      // --trace-steps=N

/// Removes --profile, --profile-json=DIR, --trace=DIR, --trace-steps=N and --cuda-graph from argv
/// (Google Benchmark rejects unknown flags).
void parse_profile_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--cuda-graph") {
      g_cuda_graph = true;
    } else if (arg == "--profile") {
      g_profile.enabled = true;
    } else if (arg.rfind("--profile-json=", 0) == 0) {
      g_profile.enabled = true;
      g_profile.json_dir = std::string(arg.substr(std::string_view("--profile-json=").size()));
    } else if (arg.rfind("--trace=", 0) == 0) {
      g_trace_dir = std::string(arg.substr(std::string_view("--trace=").size()));
    } else if (arg.rfind("--trace-steps=", 0) == 0) {
      const std::string text(arg.substr(std::string_view("--trace-steps=").size()));
      char* end = nullptr;
      const long v = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v <= 0 || v > 1000) {
        std::fprintf(stderr, "bench_gpt2_step: --trace-steps needs 1..1000, got '%s'\n",
                     text.c_str());
        std::exit(2);
      }
      g_trace_steps = static_cast<int>(v);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
}

/// With --trace=DIR: runs `step` --trace-steps times under a TraceWriter and writes
/// DIR/trace_<mode>_<config>.json; `mode` is "cpu", "cuda", "cuda_fast_tf32", ...
template <typename Step>
void trace_steps(Device device, const std::string& mode, const StepShape& s, const Step& step) {
  if (g_trace_dir.empty()) return;
  trace::TraceWriter writer(device);
  for (int i = 0; i < g_trace_steps; ++i) {
    writer.begin_step(i);
    step();
    writer.end_step();
  }
  const std::string path = g_trace_dir + "/trace_" + mode + "_" + s.args() + ".json";
  writer.write(path);
  std::printf("trace of %d step(s) of gpt2_train_step/%s/%s written to %s\n", g_trace_steps,
              mode.c_str(), s.args().c_str(), path.c_str());
}

/// Runs `step` once under the profiler and prints (and with --profile-json writes) its per-op
/// profile; `mode` is "cpu", "cuda", "cuda_tf32" or a bf16 mode ("cuda_bf16...": read against
/// the bf16 peak).
template <typename Step>
void profile_one_step(Device device, const std::string& mode, const StepShape& s,
                      const Step& step) {
  prof::Profiler profiler(device);
  const prof::Peaks peaks =
      bench::profile_step(profiler, device, step, mode.find("bf16") != std::string::npos);
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

/// Allocator and synchronization counters of CUDA steps (nothing on the CPU).
class StepCounters {
 public:
  explicit StepCounters(Device device) : device_(device) {}
  /// Starts counting (after the warm-up).
  void start() {
#if TT_WITH_CUDA
    if (!device_.is_cuda()) return;
    cuda::reset_peak_memory_stats(device_.index);
    cuda::reset_host_sync_count();
    mallocs_ = cuda::memory_stats(device_.index).num_system_allocs;
#endif
  }
  /// Sets peak_MiB, syncs/step and mallocs/step for `steps` counted steps.
  void report(benchmark::State& state, double steps) const {
#if TT_WITH_CUDA
    if (!device_.is_cuda() || steps <= 0) return;
    const AllocatorStats st = cuda::memory_stats(device_.index);
    state.counters["peak_MiB"] = static_cast<double>(st.peak_allocated) / (1024.0 * 1024.0);
    state.counters["syncs/step"] = static_cast<double>(cuda::host_sync_count()) / steps;
    state.counters["mallocs/step"] = static_cast<double>(st.num_system_allocs - mallocs_) / steps;
#else
    (void)state, (void)steps;
#endif
  }

 private:
  Device device_;
  std::size_t mallocs_ = 0;
};

/// Installs the model-operation set `ops` (tt/gpt2_ops.h) on `model`; false (with the reason
/// in `why`) when no set of that name is registered.
bool install_model_ops(gpt2::GPT2& model, const std::string& ops, std::string& why) {
  if (!gpt2::has_model_ops(ops)) {
    why = "no GPT-2 ModelOps set \"" + ops + "\" is registered (its chapter is not linked in)";
    return false;
  }
  model.set_ops(gpt2::model_ops(ops));
  return true;
}

void train_step(benchmark::State& state, Device device, const StepShape& s,
                const std::string& mode) {
  gpt2::GPT2 model(s.config, 1337);
  model.to(device);
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
  trace_steps(device, mode, s, step);

  StepCounters counters(device);
  counters.start();
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
  counters.report(state, n);
  state.counters["loss"] = loss.item();
  state.counters["params_M"] = params / 1e6;
}

/// Model FLOPs per token (see the file comment).
double model_flops_per_token(const gpt2::GPT2& model, const StepShape& s) {
  const gpt2::GPT2Config& c = s.config;
  return 6.0 * (static_cast<double>(model.num_parameters()) -
                static_cast<double>(c.block_size * c.n_embd)) +
         12.0 * static_cast<double>(c.n_layer * s.T * c.n_embd);
}

/// Chapter 10's step (tt/fast_step.h) with the ModelOps set `ops` ("reference": chapter 09's
/// own), eager or (with --cuda-graph) as a CUDA graph.
void fast_train_step(benchmark::State& state, Device device, const StepShape& s,
                     const std::string& mode, const std::string& ops) {
  gpt2::GPT2 model(s.config, 1337);
  std::string why;
  if (ops != "reference" && !install_model_ops(model, ops, why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  model.to(device);
  optim::AdamWOptions ao;
  ao.lr = 3e-4;
  // The set's own AdamW when it has one ("bf16": MasterWeightAdamW, writing the bf16 copies).
  const gpt2::AdamWFactory& make_adamw = model.ops().adamw;
  const std::unique_ptr<optim::Optimizer> opt_ptr =
      make_adamw ? make_adamw({optim::ParamGroup{model.parameters(), ao.weight_decay}}, ao)
                 : std::make_unique<optim::AdamW>(model.parameters(), ao);
  optim::Optimizer& opt = *opt_ptr;
  Generator gen(0);
  const Batch batch{random_tokens(gen, s, device), random_tokens(gen, s, device)};
  const gpt2::TrainStepOptions options{1, 0.0};  // no clipping, as in the other modes
  std::unique_ptr<fast::GraphedTrainStep> graphed;
  if (g_cuda_graph) {
    graphed = std::make_unique<fast::GraphedTrainStep>(model, opt, s.B, s.T, options, 2);
  }
  const auto next_batch = [&] { return batch; };
  const auto launch = [&] {
    return graphed ? graphed->step(next_batch)
                   : fast::train_step_async(model, opt, next_batch, options);
  };
  gpt2::TrainStepResult last;
  for (int i = 0; i < 3; ++i) last = fast::finish_step(opt, launch());  // warm-up (and capture)
  if (g_profile.enabled && !graphed) {
    profile_one_step(device, mode, s, [&] { last = fast::finish_step(opt, launch()); });
  }
  if (!graphed) trace_steps(device, mode, s, [&] { last = fast::finish_step(opt, launch()); });
  bench::DeviceClock clock(device, 2);
  StepCounters counters(device);
  counters.start();
  double seconds = 0;
  for (auto _ : state) {
    clock.mark(0);
    const fast::PendingStep pending = launch();
    clock.mark(1);
    last = fast::finish_step(opt, pending);  // the step's one read
    const double t = clock.seconds(0, 1);
    state.SetIterationTime(t);
    seconds += t;
  }
  const double n = static_cast<double>(state.iterations());
  const double tokens = static_cast<double>(s.B * s.T);
  state.counters["tok/s"] = tokens * n / seconds;
  bench::set_rates(state, seconds, 0, model_flops_per_token(model, s) * tokens);
  counters.report(state, n);
  state.counters["loss"] = last.loss;
  state.counters["params_M"] = static_cast<double>(model.num_parameters()) / 1e6;
  if (graphed) state.counters["graph_nodes"] = static_cast<double>(graphed->graph_nodes());
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
  // Chapter 10: the step without waste (reference ops), and with the fast ops.
  const std::string graph = g_cuda_graph ? "_graph" : "";
  for (const auto& [mode, ops] :
       {std::pair<std::string, std::string>{"cuda_nowaste_tf32", "reference"},
        std::pair<std::string, std::string>{"cuda_fast_tf32", "fast"},
        std::pair<std::string, std::string>{"cuda_bf16", "bf16"},
        std::pair<std::string, std::string>{"cuda_bf16_recompute", "bf16_recompute"}}) {
    bench::register_on(
        "gpt2_train_step/" + mode + graph + "/" + gpt2_124m.args(), Device::cuda(),
        [gpt2_124m, mode, ops, graph](benchmark::State& st, Device d) {
          cuda::AllowTf32Guard tf32(true);
          fast_train_step(st, d, gpt2_124m, mode + graph, ops);
        },
        10);
  }
  // The CPU mini step with the fast ops (CPU FlashAttention, fused classifier, fused
  // residual + LayerNorm), against `cpu` above and PyTorch's CPU SDPA step.
  bench::register_on(
      "gpt2_train_step/cpu_fast/" + mini.args(), Device::cpu(),
      [mini](benchmark::State& st, Device d) { fast_train_step(st, d, mini, "cpu_fast", "fast"); },
      3);
  // Chapter 11: the CPU mini step on the bf16 emulated path.
  bench::register_on(
      "gpt2_train_step/cpu_bf16/" + mini.args(), Device::cpu(),
      [mini](benchmark::State& st, Device d) { fast_train_step(st, d, mini, "cpu_bf16", "bf16"); },
      3);
  return bench::run_main(argc, argv, "bench_gpt2_step");
}
