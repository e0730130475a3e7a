// Causal attention forward + backward, the naive composition of chapter 04's ops against chapter
// 10's FlashAttention (names attention_{naive,flash}/<device>/<shape>, see bench_common.h):
//
//   attention_{naive,flash}/{cpu,cuda}/B8_NH6_T256_hs64         the CPU "mini" GPT-2's attention
//   attention_{naive,flash}/cuda_tf32/B8_NH12_T{1024,2048}_hs64 GPT-2 124M's, TF32 tensor cores
//   attention_flash/cuda_tf32/B8_NH12_T{4096,8192}_hs64         (naive needs 6.4 GB per [B, NH,
//                                                               T, T] tensor at 4096: not run)
//   attention_flash/cuda/B8_NH12_T{1024,2048}_hs64              exact mode (3xTF32), for its cost
//   attention_{naive,flash}_fwd/cuda_tf32/...                   the forward alone (no graph)
//   attention_flash{,_fwd}/cuda_bf16/B8_NH12_T{1024,2048,4096}_hs64  chapter 11's bf16 kernels
//   attention_flash{,_fwd}/cuda_bf16/B8_NH6_T{1024,2048,4096}_hs128  the same at hs 128
//   attention_flash{,_fwd}/cuda_bf16_sm90a/...      the same two shapes with the Hopper kernels
//                                                   (set_flash_attention_bf16_hopper; on a GPU
//                                                   other than an H100/H200 the portable ones)
//                                                               (bf16 q, k, v, out and grads)
//
//   build/bin/bench_attention --benchmark_filter=/cuda_tf32/
//
// The same shapes and precision as PyTorch's anchor ../shared/anchors/sdpa_bench.py (fp32 inputs,
// TF32 allowed, F.scaled_dot_product_attention(is_causal=True) and a naive matmul-softmax-matmul;
// fwd + bwd with an all-ones gradient, .grad accumulated across iterations, as here; its bf16
// mode: bf16 inputs, SDPA's flash backend; here the bf16 .grad is replaced at each iteration,
// since there is no bf16 addition to accumulate it with).
//
// One iteration: y = attention(q, k, v) with q, k, v requiring grad, then backward(y, dout)
// (the _fwd families: the forward alone).
// Counters: GFLOP/s of the causal attention's matrix products, 7 B NH T^2 hs per fwd + bwd
// (forward Q K^T and P V: 2 x 2 T^2 hs / 2 each; backward: 2.5x the forward, FlashAttention's
// convention; the recomputation of S in the backward is not counted), and GB/s of the
// compulsory traffic: q, k, v, out, lse written/read once per pass (11 [B, NH, T, hs] tensors,
// 4 bytes per element, 2 in bf16).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "bench_common.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/flash_attention.h"
#include "tt/flash_attention_bf16.h"  // links chapter 11: flash_attention() on bfloat16

namespace {

using namespace tt;

struct AttentionShape {
  int64_t B, NH, T, hs;
  std::string args() const {
    return "B" + std::to_string(B) + "_NH" + std::to_string(NH) + "_T" + std::to_string(T) + "_hs" +
           std::to_string(hs);
  }
  double flops() const { return 7.0 * double(B * NH) * double(T) * double(T) * double(hs); }
  double bytes(DType dtype) const {
    return 11.0 * double(dtype_size(dtype)) * double(B * NH * T * hs);
  }
};

using AttentionFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);

/// Times fn(q, k, v) and, with `backward`, backward(y, dout) (the forward alone records no graph:
/// q, k, v then do not require grad), for q, k, v of `dtype`. Rates: the forward is 2/7 of the
/// flops, 5 of the 11 tensors.
void run_attention(benchmark::State& state, Device device, const AttentionShape& s, AttentionFn fn,
                   bool backward, DType dtype) {
  const Shape shape{s.B, s.NH, s.T, s.hs};
  Tensor q = bench::filled(shape, 1, device).to(dtype),
         k = bench::filled(shape, 2, device).to(dtype);
  Tensor v = bench::filled(shape, 3, device).to(dtype);
  if (backward) {
    for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
  }
  const bool accumulate = dtype != DType::kBFloat16;
  const Tensor dout = full(shape, 1.0, {dtype, device});
  const double seconds = bench::time_on(state, device, [&] {
    if (!accumulate) {
      for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    }
    const Tensor y = fn(q, k, v);
    if (backward) autograd::backward(y, dout);
  });
  const double bytes = s.bytes(dtype);
  bench::set_rates(state, seconds, backward ? bytes : bytes * 5 / 11,
                   backward ? s.flops() : s.flops() * 2 / 7);
}

void register_attention(const std::string& device_part, Device device, const AttentionShape& s,
                        bool naive, bool tf32, int64_t iterations, bool backward = true,
                        DType dtype = DType::kFloat32) {
  const std::string name = std::string(naive ? "attention_naive" : "attention_flash") +
                           (backward ? "/" : "_fwd/") + device_part + "/" + s.args();
  bench::register_on(
      name, device,
      [s, naive, tf32, backward, dtype, sm90a = device_part == "cuda_bf16_sm90a"](
          benchmark::State& st, Device d) {
        cuda::AllowTf32Guard mode(tf32);
        const bool previous = flash_attention_bf16_hopper_enabled();
        set_flash_attention_bf16_hopper(sm90a);
        run_attention(st, d, s, naive ? &causal_attention_naive : &flash_attention, backward,
                      dtype);
        set_flash_attention_bf16_hopper(previous);
      },
      iterations);
}

}  // namespace

int main(int argc, char** argv) {
  const AttentionShape mini{8, 6, 256, 64};
  for (const bool naive : {true, false}) {
    register_attention("cpu", Device::cpu(), mini, naive, false, 0);
    register_attention("cuda", Device::cuda(), mini, naive, false, 20);
  }
  for (const int64_t T : {1024, 2048, 4096, 8192}) {
    const AttentionShape s{8, 12, T, 64};
    if (T <= 2048) register_attention("cuda_tf32", Device::cuda(), s, true, true, 20);
    register_attention("cuda_tf32", Device::cuda(), s, false, true, T <= 2048 ? 20 : 10);
  }
  for (const int64_t T : {1024, 2048}) {
    register_attention("cuda", Device::cuda(), AttentionShape{8, 12, T, 64}, false, false, 20);
  }
  for (const int64_t T : {1024, 2048, 4096}) {
    const AttentionShape s{8, 12, T, 64};
    if (T <= 2048) register_attention("cuda_tf32", Device::cuda(), s, true, true, 20, false);
    register_attention("cuda_tf32", Device::cuda(), s, false, true, 20, false);
    for (const bool backward : {true, false}) {
      register_attention("cuda_bf16", Device::cuda(), s, false, false, 20, backward,
                         DType::kBFloat16);
    }
    // hs 128 (the 1.3B shape's and LLaMA's heads) at the same FLOPs: half the heads.
    for (const bool backward : {true, false}) {
      register_attention("cuda_bf16", Device::cuda(), AttentionShape{8, 6, T, 128}, false, false,
                         20, backward, DType::kBFloat16);
    }
  }
  // The Hopper (wgmma) kernels beside the portable ones (the cuda_bf16 rows).
  for (const int64_t T : {1024, 2048, 4096}) {
    for (const AttentionShape& s : {AttentionShape{8, 12, T, 64}, AttentionShape{8, 6, T, 128}}) {
      for (const bool backward : {true, false}) {
        register_attention("cuda_bf16_sm90a", Device::cuda(), s, false, false, 20, backward,
                           DType::kBFloat16);
      }
    }
  }
  return bench::run_main(argc, argv, "bench_attention");
}
