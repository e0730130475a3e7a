// One GPT-2 training step (forward, backward, AdamW) at the CPU "mini" shape of DESIGN.md
// section 6: L=6, NH=6, C=384, V=8192, B=8, T=256 — the shape of the PyTorch anchor
//
//   /usr/bin/python3 gpt2_torch_bench.py --device cpu --threads 2 --B 8 --T 256
//       --config L=6,NH=6,C=384,V=8192,Vp=8192,maxT=256 --modes fp32_naive
//
// so that ms/step compare directly. Run with OMP_NUM_THREADS=2:
//
//   OMP_NUM_THREADS=2 build-cpu/bin/bench_gpt2_step --benchmark_format=json
//
// Counters: ms_per_step (also the reported time), tok/s, and the forward / backward / optimizer
// split in ms. Google Benchmark's JSON output (--benchmark_format=json or --benchmark_out) is
// what tools/run_benchmarks collects.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tt/autograd.h"
#include "tt/gpt2.h"
#include "tt/optim.h"
#include "tt/timer.h"
#include "tt/train.h"

namespace {

using namespace tt;

void BM_GPT2TrainStep(benchmark::State& state) {
  gpt2::GPT2Config c;
  c.n_layer = state.range(0);
  c.n_head = state.range(1);
  c.n_embd = state.range(2);
  c.vocab_size = c.padded_vocab_size = state.range(3);
  const int64_t B = state.range(4), T = state.range(5);
  c.block_size = T;
  gpt2::GPT2 model(c, 1337);
  optim::AdamWOptions ao;
  ao.lr = 3e-4;  // the anchor's AdamW settings
  optim::AdamW opt(model.parameters(), ao);
  Generator gen(0);
  std::vector<int64_t> x(static_cast<std::size_t>(B * T)), y(x.size());
  for (auto& v : x) v = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(c.vocab_size));
  for (auto& v : y) v = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(c.vocab_size));
  const Tensor idx = from_vector(x, {B, T}), targets = from_vector(y, {B, T});
  double fwd = 0, bwd = 0, upd = 0, loss_value = 0;
  {  // one untimed warm-up step (first-touch page faults, optimizer state allocation)
    autograd::backward(model.loss(idx, targets));
    opt.step();
    opt.zero_grad();
  }
  for (auto _ : state) {
    Timer t;
    const Tensor loss = model.loss(idx, targets);
    loss_value = loss.item();
    fwd += t.elapsed_ms();
    t.reset();
    autograd::backward(loss);
    bwd += t.elapsed_ms();
    t.reset();
    opt.step();
    opt.zero_grad();
    upd += t.elapsed_ms();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["ms_per_step"] = (fwd + bwd + upd) / n;
  state.counters["forward_ms"] = fwd / n;
  state.counters["backward_ms"] = bwd / n;
  state.counters["adamw_ms"] = upd / n;
  state.counters["loss"] = loss_value;
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(B * T) * n, benchmark::Counter::kIsRate);
  state.counters["params_M"] = static_cast<double>(model.num_parameters()) / 1e6;
}

// {L, NH, C, V, B, T}: the CPU mini shape.
BENCHMARK(BM_GPT2TrainStep)
    ->Name("gpt2_train_step/cpu_mini")
    ->Args({6, 6, 384, 8192, 8, 256})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
