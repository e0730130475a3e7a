// tt_ring_attention_bench: attention forward + backward of one long sequence (B = 1, causal),
// three ways: FlashAttention of the whole sequence on one device (chapter 10; every rank runs
// it alone on its own device, the time is the ranks' mean), and ring attention over all the
// ranks with the zigzag and the contiguous layouts (the time is the slowest rank's). The
// "ideal" ring time is the one-device time / N. One JSON object per line on rank 0's stdout.
// --dtype bf16: q, k, v in bfloat16, chapter 11's bf16 FlashAttention on one device and the
// bf16 ring (its blocks through the same kernels, K/V sent in bf16, merge in float32).
//
//   mpirun -np 4 tt_ring_attention_bench --device cuda --seq 16384,32768,65536 --hs 64,128
//   mpirun -np 4 tt_ring_attention_bench --device cuda --dtype bf16 --seq 16384 --hs 128
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/backend.h"
#include "tt/cli.h"
#include "tt/cuda_matmul.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/flash_attention.h"
#include "tt/functional.h"
#include "tt/generator.h"
#include "tt/profiler.h"
#include "tt/ring_attention.h"

namespace {

struct Args {
  std::string seq = "4096", hs = "64", device = "cpu", dtype = "float32";
  int heads = 4, reps = 3, warmup = 1;
  bool tf32 = false, profile = false;
};

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : tt::split_list(text)) out.push_back(std::stoll(item));
  return out;
}

// Mean milliseconds of `body` (forward + backward) over a.reps runs after a.warmup, with the
// device synchronized around each run; the maximum over the ranks when `slowest`, else the mean.
double time_ms(const Args& a, tt::Device device, bool slowest, const std::function<void()>& body) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  tt::DeviceBackend& backend = tt::backend_for(device.type);
  for (int i = 0; i < a.warmup; ++i) body();
  backend.synchronize(device.index);
  world.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < a.reps; ++i) body();
  backend.synchronize(device.index);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
      a.reps;
  const tt::Tensor all = tt::empty({world.world_size()}, {.dtype = tt::DType::kFloat64});
  world.all_gather(all, tt::full({1}, ms, {.dtype = tt::DType::kFloat64}));
  const std::vector<double> v = all.to_vector<double>();
  if (slowest) return *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

int run(const Args& a) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  const int n = world.world_size(), rank = world.rank();
  const tt::Device device =
      a.device == "cuda" ? tt::Device::cuda(world.local_rank()) : tt::Device::cpu();
  // TF32 tensor cores in the FlashAttention kernels and cuBLAS (else 3xTF32 and fp32 GEMMs).
  tt::cuda::set_allow_tf32(a.tf32);
  TT_CHECK(a.dtype == "float32" || a.dtype == "bf16",
           "tt_ring_attention_bench: --dtype must be float32 or bf16, got '", a.dtype, "'");
  const tt::DType dtype = a.dtype == "bf16" ? tt::DType::kBFloat16 : tt::DType::kFloat32;
  const std::string dtype_label = a.dtype == "bf16" ? "bfloat16" : a.tf32 ? "tf32" : "float32";
  for (const int64_t T : parse_list(a.seq)) {
    for (const int64_t hs : parse_list(a.hs)) {
      const tt::Shape shape{1, a.heads, T, hs};
      tt::Generator gen(7);
      const tt::Tensor q = tt::randn(shape, gen), k = tt::randn(shape, gen),
                       v = tt::randn(shape, gen), dout = tt::randn(shape, gen);
      auto fwd_bwd = [&](const tt::Tensor& qi, const tt::Tensor& ki, const tt::Tensor& vi,
                         const tt::Tensor& gi, const std::function<tt::Tensor()>& attention) {
        // Fresh gradients each run: no accumulation (an add, which bf16 lacks on CUDA).
        for (const tt::Tensor* t : {&qi, &ki, &vi}) {
          t->set_requires_grad();
          t->set_grad(tt::Tensor());
        }
        tt::autograd::backward(attention(), gi);
      };
      // One device, the whole sequence.
      auto on_device = [&](const tt::Tensor& t) { return t.to(device).to(dtype); };
      const tt::Tensor qd = on_device(q), kd = on_device(k), vd = on_device(v),
                       gd = on_device(dout);
      const double single = time_ms(a, device, false, [&] {
        fwd_bwd(qd, kd, vd, gd, [&] { return tt::flash_attention(qd, kd, vd); });
      });
      std::string line = "{\"T\": " + std::to_string(T) +
                         ", \"B\": 1, \"heads\": " + std::to_string(a.heads) +
                         ", \"hs\": " + std::to_string(hs) + ", \"dtype\": \"" + dtype_label +
                         "\", \"device\": \"" + a.device + "\", \"cp\": " + std::to_string(n) +
                         ", \"single_ms\": " + std::to_string(single);
      for (const tt::cp::Layout layout : {tt::cp::Layout::kZigzag, tt::cp::Layout::kContiguous}) {
        auto mine = [&](const tt::Tensor& t) {
          return tt::cp::shard(t, 2, layout, rank, n).to(device).to(dtype);
        };
        const tt::Tensor ql = mine(q), kl = mine(k), vl = mine(v), gl = mine(dout);
        const double ring = time_ms(a, device, true, [&] {
          fwd_bwd(ql, kl, vl, gl,
                  [&] { return tt::cp::ring_attention(ql, kl, vl, world, layout, true); });
        });
        const std::string name = tt::cp::layout_name(layout);
        line += ", \"" + name + "_ms\": " + std::to_string(ring) + ", \"" + name +
                "_of_ideal\": " + std::to_string(single / n / ring);
        if (a.profile && layout == tt::cp::Layout::kZigzag) {
          // Chapter 10's per-op profile of one more zigzag run (every rank profiles its own;
          // rank 0 prints, before the JSON line): the blocks' kernels, the merges and
          // conversions, and what is not dispatched (copies, NCCL waits, host gaps).
          tt::prof::Profiler profiler(device);
          {
            tt::prof::ProfileScope scope(profiler);
            fwd_bwd(ql, kl, vl, gl,
                    [&] { return tt::cp::ring_attention(ql, kl, vl, world, layout, true); });
          }
          if (rank == 0) {
            const std::string what = "the zigzag ring, rank 0 of " + std::to_string(n) +
                                     ", T = " + std::to_string(T) + ", hs = " + std::to_string(hs);
            std::printf(
                "%s", tt::prof::profile_report(
                          profiler, tt::prof::default_peaks(device, dtype == tt::DType::kBFloat16),
                          what, 12)
                          .c_str());
          }
        }
      }
      if (rank == 0) std::printf("%s}\n", line.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  tt::ArgParser args(
      "tt_ring_attention_bench",
      "usage: mpirun -np N tt_ring_attention_bench [--seq T1,T2,...] "
      "[--hs 64,128] [--heads NH] [--device cpu|cuda] [--reps R] [--warmup W]\n"
      "  [--dtype float32|bf16] [--tf32] [--profile]  float32 (TF32 tensor cores with\n"
      "  --tf32) or bfloat16, B = 1, causal; one JSON line per (T, hs) on rank 0; --profile:\n"
      "  also chapter 10's per-op profile of one zigzag run on rank 0\n");
  args.option("--seq", &a.seq)
      .option("--hs", &a.hs)
      .option("--heads", &a.heads)
      .option("--device", &a.device)
      .option("--dtype", &a.dtype)
      .option("--reps", &a.reps)
      .option("--warmup", &a.warmup)
      .flag("--tf32", &a.tf32)
      .flag("--profile", &a.profile);
  args.parse(argc, argv);
  return tt::dist::run_on_every_rank("tt_ring_attention_bench", [&] { return run(a); });
}
