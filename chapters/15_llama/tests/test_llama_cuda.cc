// Chapter 15's CUDA kernels against the CPU ones (skipped without a GPU): RMSNorm, RoPE and
// SwiGLU forward and backward, the KV-cache step, and the tiny model's logits, loss and greedy
// generation. Ch15_Bf16Cuda: the bfloat16 inference kernels and model against float32 on the
// same (bfloat16-representable) values. Ch15_GqaCuda: grouped-query attention through chapter
// 10's and 11's FlashAttention kernels (K and V read in place) against the repeat_kv path and
// the CPU kernel.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "ch15_test_util.h"
#include "tt/allocation_watch.h"
#include "tt/cuda_matmul.h"
#include "tt/dispatcher.h"
#include "tt/flash_attention.h"
#include "tt/functional.h"
#include "tt/generate.h"
#include "tt/llama_ops.h"
#include "tt/mixed_precision.h"
#include "tt/profiler.h"

namespace tt {
namespace {

const Device kCuda = Device::cuda(0);

/// Runs f on CPU leaves and on their CUDA copies; compares the outputs and the gradients of the
/// inputs (the loss is sum(out * g) with a fixed g).
void compare_cpu_cuda(const std::vector<Tensor>& cpu_inputs,
                      const std::function<Tensor(const std::vector<Tensor>&)>& f, double atol) {
  std::vector<Tensor> gpu;
  for (const Tensor& t : cpu_inputs) {
    gpu.push_back(t.detach().to(kCuda));
    gpu.back().set_requires_grad(t.requires_grad());
  }
  const Tensor out_cpu = f(cpu_inputs);
  const Tensor out_gpu = f(gpu);
  EXPECT_TENSOR_NEAR(out_gpu.to(Device::cpu()), out_cpu, atol, 0);
  const Tensor g = ch15::leaf(out_cpu.shape(), 99, 1.0, out_cpu.dtype(), false);
  autograd::backward(sum(mul(out_cpu, g)));
  autograd::backward(sum(mul(out_gpu, g.to(kCuda))));
  for (std::size_t i = 0; i < cpu_inputs.size(); ++i) {
    if (!cpu_inputs[i].requires_grad()) continue;
    EXPECT_TENSOR_NEAR(gpu[i].grad().to(Device::cpu()), cpu_inputs[i].grad(), atol, 0)
        << "gradient of input " << i;
  }
}

TEST(Ch15_OpsCuda, RmsNormMatchesTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::kFloat32, DType::kFloat64}) {
    compare_cpu_cuda(
        {ch15::leaf({37, 300}, 1, 1.0, dt), ch15::leaf({300}, 2, 1.0, dt)},
        [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-6); },
        dt == DType::kFloat32 ? 1e-4 : 1e-12);
  }
}

TEST(Ch15_OpsCuda, RopeMatchesTheCpuOnATransposedView) {
  TT_SKIP_IF_NO_CUDA();
  const Tensor x = ch15::leaf({2, 7, 3, 16}, 3, 1.0, DType::kFloat32);
  const std::vector<int64_t> pos = {0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15};
  const RopeTables cpu_tables = rope_tables(32, 16, 10000.0, {});
  const RopeTables gpu_tables = rope_tables(32, 16, 10000.0, {}, {DType::kFloat32, kCuda});
  compare_cpu_cuda(
      {x},
      [&](const std::vector<Tensor>& in) {
        const bool gpu = in[0].device().is_cuda();
        return rope(transpose(in[0], 1, 2), gpu ? gpu_tables : cpu_tables,
                    from_vector(pos, {2, 7}).to(in[0].device()));
      },
      1e-6);
}

TEST(Ch15_OpsCuda, SwigluMatchesTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  compare_cpu_cuda(
      {ch15::leaf({5, 129}, 4, 2.0, DType::kFloat32),
       ch15::leaf({5, 129}, 5, 1.0, DType::kFloat32)},
      [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); }, 1e-6);
}

TEST(Ch15_OpsCuda, KvCacheStepMatchesTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  const Tensor q = ch15::leaf({2, 4, 3, 32}, 6, 1.0, DType::kFloat32, false);
  const Tensor kn = ch15::leaf({2, 2, 3, 32}, 7, 1.0, DType::kFloat32, false);
  const Tensor vn = ch15::leaf({2, 2, 3, 32}, 8, 1.0, DType::kFloat32, false);
  const Tensor kc = ch15::leaf({2, 2, 20, 32}, 9, 1.0, DType::kFloat32, false);
  const Tensor vc = ch15::leaf({2, 2, 20, 32}, 10, 1.0, DType::kFloat32, false);
  const Tensor kc_gpu = kc.to(kCuda), vc_gpu = vc.to(kCuda);
  const Tensor out_cpu = llama::kv_cache_attend(q, kn, vn, kc, vc, {4, 11});
  const Tensor out_gpu =
      llama::kv_cache_attend(q.to(kCuda), kn.to(kCuda), vn.to(kCuda), kc_gpu, vc_gpu, {4, 11});
  EXPECT_TENSOR_NEAR(out_gpu.to(Device::cpu()), out_cpu, 1e-5, 0);
  EXPECT_TENSOR_NEAR(kc_gpu.to(Device::cpu()), kc, 0, 0);
  EXPECT_TENSOR_NEAR(vc_gpu.to(Device::cpu()), vc, 0, 0);
}

TEST(Ch15_ModelCuda, LogitsLossAndGreedyTokensMatchTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard no_tf32(false);
  for (int64_t hs : {8, 32}) {  // 8: the naive attention; 32: FlashAttention kernels
    llama::LlamaConfig c = ch15::tiny_config();
    c.dim = 4 * hs;
    llama::Llama cpu(c, 5), gpu(c, 5);
    gpu.to(kCuda);
    const Tensor ids = from_vector<int64_t>({3, 9, 27, 81, 50, 12, 7, 1, 2, 95}, {2, 5});
    EXPECT_TENSOR_NEAR(gpu.forward(ids.to(kCuda)).to(Device::cpu()), cpu.forward(ids), 1e-4, 0)
        << "hs " << hs;
    llama::GenerateOptions opt;
    opt.max_new_tokens = 16;
    opt.sampling.temperature = 0;
    Generator g1(0), g2(0);
    EXPECT_EQ(llama::generate(gpu, {{1, 2, 3}, {4, 5}}, opt, g1).tokens,
              llama::generate(cpu, {{1, 2, 3}, {4, 5}}, opt, g2).tokens)
        << "hs " << hs;
  }
}

/// Samples 12 tokens per row twice from the same seed, eagerly and as a CUDA graph: the same
/// tokens (the same kernels on the same shapes).
void expect_graph_equals_eager(llama::Llama& model) {
  model.to(kCuda);
  // Two rows, and one (a bfloat16 model's one-row step is one launch, llama_decode_step).
  for (const std::vector<std::vector<int64_t>>& prompts :
       {std::vector<std::vector<int64_t>>{{1, 2, 3}, {9, 8, 7, 6, 5}},
        std::vector<std::vector<int64_t>>{{9, 8, 7, 6, 5}}}) {
    llama::GenerateOptions opt;
    opt.max_new_tokens = 12;
    opt.sampling = {0.8, 0, 0.9};
    Generator g1(4), g2(4);
    const auto eager = llama::generate(model, prompts, opt, g1);
    opt.cuda_graph = true;
    const auto graphed = llama::generate(model, prompts, opt, g2);
    EXPECT_EQ(graphed.tokens, eager.tokens) << prompts.size() << " row(s)";
  }
}

TEST(Ch15_ModelCuda, CudaGraphDecodeGivesTheSameTokens) {
  TT_SKIP_IF_NO_CUDA();
  llama::LlamaConfig c = ch15::tiny_config();
  c.dim = 128;  // hs 32
  llama::Llama model(c, 6);
  expect_graph_equals_eager(model);
}

TEST(Ch15_OpsCuda, ArgmaxRowsTakesTheFirstMaximumAndNaNFirst) {
  TT_SKIP_IF_NO_CUDA();
  const int64_t V = 1000;
  std::vector<float> x(3 * V);
  Generator gen(3);
  for (float& v : x) v = static_cast<float>(gen.next_uniform());
  x[300] = x[700] = 2.0f;               // row 0: a tie, the lower index wins
  x[V + 9] = x[V + 5] = std::nanf("");  // row 1: the first NaN
  x[2 * V + V - 1] = 5.0f;              // row 2: the last element
  const Tensor logits = from_vector(x, {3, V}).to(kCuda);
  const Tensor indices = empty({3}, {DType::kInt64, kCuda});
  const Tensor values = empty({3}, {DType::kFloat32, kCuda});
  call_kernel<llama::ArgmaxRowsKernel>("argmax_rows", kCuda, indices, values, logits);
  EXPECT_EQ(indices.to(Device::cpu()).to_vector<int64_t>(), (std::vector<int64_t>{300, 5, V - 1}));
  const std::vector<float> v = values.to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], 5.0f);
}

// ----- bfloat16 inference -------------------------------------------------------------------

/// x rounded to bfloat16 (on the CPU) and the same values in float32: a kernel's bfloat16 result
/// is compared with its float32 result on identical inputs, so the difference is the rounding of
/// the bfloat16 outputs (2^-9 relative) plus float32 summation order.
struct Bf16Pair {
  Tensor bf;   ///< bfloat16 on CUDA
  Tensor f32;  ///< float32 on CUDA, equal to bf widened
};
Bf16Pair bf16_pair(const Shape& shape, uint64_t seed, double scale = 1.0) {
  const Tensor bf = ch15::leaf(shape, seed, scale, DType::kFloat32, false).to(DType::kBFloat16);
  return {bf.to(kCuda), bf.to(DType::kFloat32).to(kCuda)};
}
Tensor widened(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::kFloat32);
}
constexpr double kBf16Rel = 1.0 / 128;  // two roundings of 2^-9 and some summation slack

TEST(Ch15_Bf16Cuda, RmsNormRopeSwigluMatchFloat32) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  const Bf16Pair x = bf16_pair({37, 300}, 1), w = bf16_pair({300}, 2);
  EXPECT_TENSOR_NEAR(widened(rms_norm(x.bf, w.bf, 1e-6)), widened(rms_norm(x.f32, w.f32, 1e-6)),
                     1e-3, kBf16Rel);
  const Bf16Pair r = bf16_pair({2, 7, 3, 16}, 3);
  const std::vector<int64_t> pos = {0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15};
  const RopeTables tables = rope_tables(32, 16, 10000.0, {}, {DType::kFloat32, kCuda});
  const Tensor p = from_vector(pos, {2, 7}).to(kCuda);
  EXPECT_TENSOR_NEAR(widened(rope(transpose(r.bf, 1, 2), tables, p)),
                     widened(rope(transpose(r.f32, 1, 2), tables, p)), 1e-3, kBf16Rel);
  // SwiGLU on the two halves of one [rows, 2F] buffer, read in place (the packed gate/up GEMM).
  const Bf16Pair gu = bf16_pair({5, 2 * 129}, 4, 2.0);
  const Tensor out = empty({5, 129}, {DType::kBFloat16, kCuda});
  call_kernel<SwigluForwardKernel>("swiglu_forward", kCuda, out, gu.bf.slice(1, 0, 129),
                                   gu.bf.slice(1, 129, 258));
  EXPECT_TENSOR_NEAR(
      widened(out),
      widened(swiglu(gu.f32.slice(1, 0, 129).contiguous(), gu.f32.slice(1, 129, 258).contiguous())),
      1e-3, kBf16Rel);
}

// The bfloat16 training path (Llama::set_mixed_precision) on CUDA against the CPU's: q/gate/up
// style projections of one input through linears_bf16 (bfloat16 outputs, float32 dW and dx
// summed by cuBLASLt with beta = 1), RoPE on one output and SwiGLU on two others, forward and
// backward in bfloat16. The CPU emulates cuBLASLt on the same bfloat16 operands; the GEMMs'
// summation order differs, which can move a rounding by one bfloat16 step (2^-8 relative).
TEST(Ch15_Bf16Cuda, TrainingProjectionsRopeSwigluMatchTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  auto run = [](Device dev) {
    Generator gen(3);
    std::vector<std::shared_ptr<nn::Linear>> owned;
    std::vector<nn::Linear*> layers;
    for (const int64_t out : {64, 48, 48}) {
      owned.push_back(std::make_shared<nn::Linear>(96, out, false, gen));
      owned.back()->to(dev);
      layers.push_back(owned.back().get());
    }
    Tensor x = ch15::leaf({3, 5, 96}, 1, 1.0, DType::kFloat32, false).to(dev);
    x.set_requires_grad(true);
    const std::vector<Tensor> ys = linears_bf16(x, layers);
    const RopeTables tables = rope_tables(16, 16, 10000.0, {}, {DType::kFloat32, dev});
    const Tensor pos =
        from_vector<int64_t>({0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 2, 3, 5, 8, 13}, {3, 5}).to(dev);
    const Tensor q = rope(transpose(view(ys[0], {3, 5, 4, 16}), 1, 2), tables, pos);
    const Tensor h = swiglu(ys[1], ys[2]);
    EXPECT_EQ(q.dtype(), DType::kBFloat16);
    EXPECT_EQ(h.dtype(), DType::kBFloat16);
    const Tensor gq = ch15::leaf(q.shape(), 7, 1.0, DType::kFloat32, false).to(dev);
    const Tensor gh = ch15::leaf(h.shape(), 8, 1.0, DType::kFloat32, false).to(dev);
    autograd::backward(add(sum(mul(to_dtype(q, DType::kFloat32), gq)),
                           sum(mul(to_dtype(h, DType::kFloat32), gh))));
    std::vector<Tensor> r{widened(q), widened(h), widened(x.grad())};
    for (nn::Linear* l : layers) r.push_back(widened(l->weight.grad()));
    return r;
  };
  const std::vector<Tensor> gpu = run(kCuda), cpu = run(Device::cpu());
  const char* names[] = {"rope(q)", "swiglu", "dx", "dW0", "dW1", "dW2"};
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    EXPECT_TENSOR_NEAR(gpu[i], cpu[i], 2e-2, 1.0 / 64) << names[i];
  }
}

TEST(Ch15_Bf16Cuda, KvCacheStepMatchesFloat32WithGqa) {
  TT_SKIP_IF_NO_CUDA();
  // 4 and 300: rows that are not a multiple of 16 bytes (one element per load; 300 is also wider
  // than the block).
  for (int64_t hs : {4, 32, 64, 300, 512}) {
    const Bf16Pair q = bf16_pair({2, 8, 3, hs}, 6), kn = bf16_pair({2, 2, 3, hs}, 7),
                   vn = bf16_pair({2, 2, 3, hs}, 8), kc = bf16_pair({2, 2, 40, hs}, 9),
                   vc = bf16_pair({2, 2, 40, hs}, 10);
    const Tensor out_bf = llama::kv_cache_attend(q.bf, kn.bf, vn.bf, kc.bf, vc.bf, {4, 33});
    const Tensor out_f = llama::kv_cache_attend(q.f32, kn.f32, vn.f32, kc.f32, vc.f32, {4, 33});
    EXPECT_TENSOR_NEAR(widened(out_bf), widened(out_f), 1e-3, kBf16Rel) << "hs " << hs;
    // The appended keys and values are the same bits.
    EXPECT_TENSOR_NEAR(widened(kc.bf), widened(kc.f32), 0, 0) << "hs " << hs;
    EXPECT_TENSOR_NEAR(widened(vc.bf), widened(vc.f32), 0, 0) << "hs " << hs;
  }
}

TEST(Ch15_Bf16Cuda, DecodeGemvMatchesFloat32WithEachPrologue) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  cuda::AllowTf32Guard no_tf32(false);
  using llama::GemvPrologue;
  // N: not a multiple of a block's 4 warps (rows); K % 8 == 0: 33 packs of 8 (a row in one
  // chunk of 256 packs) and 513 (three chunks, the last with one pack: the chunk pipeline).
  const int64_t N = 203;
  for (int64_t K : {264, 4104}) {
    const Bf16Pair w = bf16_pair({N, K}, 20, 0.1), g = bf16_pair({K}, 21);
    for (int64_t M : {1, 3, 4}) {  // 4: the most rows it takes
      for (GemvPrologue p : {GemvPrologue::kNone, GemvPrologue::kRmsNorm, GemvPrologue::kSwiglu}) {
        const bool glu = p == GemvPrologue::kSwiglu;
        const Bf16Pair a = bf16_pair({M, glu ? 2 * K : K}, 22 + static_cast<uint64_t>(M));
        // The reference: the prologue in float32, rounded to bfloat16 as the kernel stores it, then
        // a float32 product.
        Tensor x = a.f32;
        if (p == GemvPrologue::kRmsNorm) x = rms_norm(a.f32, g.f32, 1e-5);
        if (glu)
          x = swiglu(a.f32.slice(1, 0, K).contiguous(), a.f32.slice(1, K, 2 * K).contiguous());
        x = x.to(DType::kBFloat16).to(DType::kFloat32);
        const Tensor product = matmul(x, transpose(w.f32, 0, 1));
        const Bf16Pair init = bf16_pair({M, N}, 30);
        const Tensor out = init.bf.clone();
        ASSERT_TRUE(call_kernel<llama::DecodeGemvKernel>("llama_decode_gemv", kCuda, out, a.bf,
                                                         w.bf, g.bf, 1e-5, p, true));
        EXPECT_TENSOR_NEAR(widened(out), widened(add(product, init.f32)), 1e-2, kBf16Rel)
            << "M " << M << " K " << K << " prologue " << static_cast<int>(p);
        if (p == GemvPrologue::kRmsNorm) {  // float32 out: the head's logits
          const Tensor logits = empty({M, N}, {DType::kFloat32, kCuda});
          ASSERT_TRUE(call_kernel<llama::DecodeGemvKernel>("llama_decode_gemv", kCuda, logits, a.bf,
                                                           w.bf, g.bf, 1e-5, p, false));
          EXPECT_TENSOR_NEAR(widened(logits), widened(product), 2e-3, 1e-3)
              << "M " << M << " K " << K;
        }
      }
    }
  }
  // More rows than it takes: nothing launched, the caller falls back to cuBLASLt.
  const int64_t K = 264;
  const Bf16Pair w = bf16_pair({N, K}, 20, 0.1);
  const Bf16Pair a5 = bf16_pair({5, K}, 40);
  const Tensor out5 = empty({5, N}, {DType::kBFloat16, kCuda});
  EXPECT_FALSE(call_kernel<llama::DecodeGemvKernel>("llama_decode_gemv", kCuda, out5, a5.bf, w.bf,
                                                    Tensor(), 0.0, GemvPrologue::kNone, false));
  EXPECT_TT_ERROR((call_kernel<llama::DecodeGemvKernel>("llama_decode_gemv", kCuda, out5,
                                                        a5.bf.slice(1, 0, 8).contiguous(), w.bf,
                                                        Tensor(), 0.0, GemvPrologue::kNone, false)),
                  "decode_gemv", "[5, 8]", "[203, 264]");
}

TEST(Ch15_Bf16Cuda, RopeAppendThenAttendEqualsRopeAndTheKvCacheStep) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  const int64_t B = 2, T = 3, NH = 4, NKV = 2, hs = 16, W = (NH + 2 * NKV) * hs;
  const std::vector<int64_t> start = {4, 11};
  std::vector<int64_t> pos;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) pos.push_back(start[b] + t);
  }
  const Tensor positions = from_vector(pos, {B, T}).to(kCuda);
  const Tensor start_gpu = from_vector(start, {B}).to(kCuda);
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const Bf16Pair qkv_p = bf16_pair({B, T, W}, 50), kc_p = bf16_pair({B, NKV, 20, hs}, 51),
                   vc_p = bf16_pair({B, NKV, 20, hs}, 52);
    const bool bf = dt == DType::kBFloat16;
    const Tensor qkv = bf ? qkv_p.bf : qkv_p.f32;
    const RopeTables tables = rope_tables(32, hs, 10000.0, {}, {DType::kFloat32, kCuda});
    auto heads = [&](int64_t first, int64_t n) {  // [B, n, T, hs], read in place
      return Tensor(qkv.storage(), {B, n, T, hs}, {T * W, hs, W, 1}, first * hs, dt);
    };
    // Three launches and the KV step ...
    const Tensor kc_a = (bf ? kc_p.bf : kc_p.f32).clone(), vc_a = (bf ? vc_p.bf : vc_p.f32).clone();
    const Tensor out_a = llama::kv_cache_attend(
        rope(heads(0, NH), tables, positions), rope(heads(NH, NKV), tables, positions),
        heads(NH + NKV, NKV).contiguous(), kc_a, vc_a, start);
    // ... against one launch and the attention alone: the same values (up to the compiler's
    // contraction of the rotation into FMAs; V is copied, exactly).
    const Tensor kc_b = (bf ? kc_p.bf : kc_p.f32).clone(), vc_b = (bf ? vc_p.bf : vc_p.f32).clone();
    const Tensor q = empty({B, NH, T, hs}, {dt, kCuda}), out_b = empty({B, NH, T, hs}, {dt, kCuda});
    call_kernel<llama::RopeAppendKernel>("llama_rope_append", kCuda, q, qkv, tables.cos, tables.sin,
                                         positions, start_gpu, kc_b, vc_b);
    call_kernel<llama::KvCacheAttendKernel>("kv_cache_attend", kCuda, out_b, q, Tensor(), Tensor(),
                                            kc_b, vc_b, start_gpu);
    const double atol = bf ? 1e-3 : 1e-6, rtol = bf ? kBf16Rel : 1e-6;
    EXPECT_TENSOR_NEAR(widened(out_b), widened(out_a), atol, rtol) << dtype_name(dt);
    EXPECT_TENSOR_NEAR(widened(kc_b), widened(kc_a), atol, rtol) << dtype_name(dt);
    EXPECT_TENSOR_NEAR(widened(vc_b), widened(vc_a), 0, 0) << dtype_name(dt);
  }
}

TEST(Ch15_Bf16Cuda, DecodeAttentionEqualsRopeAppendThenAttend) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  // Rows at the first position, at the last key of a 32-key split and the first of the next,
  // and at the cache's last row (Tmax = 150: five splits, the last one partial). Groups of 1, 4
  // and 16 query heads a key/value head, hs 8, 64 and 128.
  const std::vector<int64_t> start = {0, 31, 32, 149};
  const int64_t B = 4, Tmax = 150;
  const Tensor start_gpu = from_vector(start, {B}).to(kCuda);
  const Tensor positions = from_vector(start, {B, 1}).to(kCuda);
  struct Shape3 {
    int64_t NH, NKV, hs;
  };
  for (const Shape3 sh : {Shape3{4, 4, 64}, Shape3{8, 2, 128}, Shape3{16, 1, 8}}) {
    const int64_t NH = sh.NH, NKV = sh.NKV, hs = sh.hs, W = (NH + 2 * NKV) * hs;
    const RopeTables tables = rope_tables(Tmax, hs, 10000.0, {}, {DType::kFloat32, kCuda});
    const Bf16Pair qkv = bf16_pair({B, 1, W}, 60), kc = bf16_pair({B, NKV, Tmax, hs}, 61),
                   vc = bf16_pair({B, NKV, Tmax, hs}, 62);
    // The two launches ...
    const Tensor kc_a = kc.bf.clone(), vc_a = vc.bf.clone();
    const Tensor q = empty({B, NH, 1, hs}, {DType::kBFloat16, kCuda});
    const Tensor out_a = empty({B, NH, 1, hs}, {DType::kBFloat16, kCuda});
    call_kernel<llama::RopeAppendKernel>("llama_rope_append", kCuda, q, qkv.bf, tables.cos,
                                         tables.sin, positions, start_gpu, kc_a, vc_a);
    call_kernel<llama::KvCacheAttendKernel>("kv_cache_attend", kCuda, out_a, q, Tensor(), Tensor(),
                                            kc_a, vc_a, start_gpu);
    // ... against the one launch, twice with the same counters (it leaves them zeros).
    const Tensor counters = zeros({B * NKV}, {DType::kInt64, kCuda});
    for (int run = 0; run < 2; ++run) {
      const Tensor kc_b = kc.bf.clone(), vc_b = vc.bf.clone();
      const Tensor out_b = empty({B, NH, 1, hs}, {DType::kBFloat16, kCuda});
      ASSERT_TRUE(call_kernel<llama::DecodeAttentionKernel>(
          "llama_decode_attention", kCuda, out_b, qkv.bf, tables.cos, tables.sin, positions,
          start_gpu, kc_b, vc_b, counters));
      const std::string what = "NH " + std::to_string(NH) + " NKV " + std::to_string(NKV) + " hs " +
                               std::to_string(hs) + " run " + std::to_string(run);
      // The splits sum in another order than one block does: bfloat16 rounding apart.
      EXPECT_TENSOR_NEAR(widened(out_b), widened(out_a), 1e-3, kBf16Rel) << what;
      // The appended rows are the same bits (the same rotation), the other rows untouched.
      EXPECT_TENSOR_NEAR(widened(kc_b), widened(kc_a), 0, 0) << what;
      EXPECT_TENSOR_NEAR(widened(vc_b), widened(vc_a), 0, 0) << what;
      EXPECT_EQ(counters.to(Device::cpu()).to_vector<int64_t>(),
                std::vector<int64_t>(static_cast<std::size_t>(B * NKV), 0))
          << what;
    }
  }
  // What it does not take: two tokens a row, hs 136 (over 128). Nothing launched.
  const RopeTables t136 = rope_tables(Tmax, 136, 10000.0, {}, {DType::kFloat32, kCuda});
  const Tensor kc136 = zeros({B, 1, Tmax, 136}, {DType::kBFloat16, kCuda});
  const Tensor counters = zeros({B}, {DType::kInt64, kCuda});
  EXPECT_FALSE(call_kernel<llama::DecodeAttentionKernel>(
      "llama_decode_attention", kCuda, empty({B, 2, 1, 136}, {DType::kBFloat16, kCuda}),
      zeros({B, 1, 4 * 136}, {DType::kBFloat16, kCuda}), t136.cos, t136.sin, positions, start_gpu,
      kc136, kc136.clone(), counters));
  const RopeTables t8 = rope_tables(Tmax, 8, 10000.0, {}, {DType::kFloat32, kCuda});
  const Tensor kc8 = zeros({B, 1, Tmax, 8}, {DType::kBFloat16, kCuda});
  const Tensor pos2 = zeros({B, 2}, {DType::kInt64, kCuda});
  EXPECT_FALSE(call_kernel<llama::DecodeAttentionKernel>(
      "llama_decode_attention", kCuda, empty({B, 2, 2, 8}, {DType::kBFloat16, kCuda}),
      zeros({B, 2, 4 * 8}, {DType::kBFloat16, kCuda}), t8.cos, t8.sin, pos2, start_gpu, kc8,
      kc8.clone(), counters));
  // Misuse: float32 counters, named.
  EXPECT_TT_ERROR(
      (call_kernel<llama::DecodeAttentionKernel>(
          "llama_decode_attention", kCuda, empty({B, 2, 1, 8}, {DType::kBFloat16, kCuda}),
          zeros({B, 1, 4 * 8}, {DType::kBFloat16, kCuda}), t8.cos, t8.sin, positions, start_gpu,
          kc8, kc8.clone(), zeros({B}, {DType::kFloat32, kCuda}))),
      "decode_attention", "counters", "float32");
}

/// The tiny model of hs 32 in float32 and in bfloat16 (the same draws, rounded) on CUDA.
/// Sets llama::set_decode_step for its lifetime, then restores the previous setting.
class DecodeStepSetting {
 public:
  explicit DecodeStepSetting(bool on) : was_(llama::decode_step_enabled()) {
    llama::set_decode_step(on);
  }
  ~DecodeStepSetting() { llama::set_decode_step(was_); }
  DecodeStepSetting(const DecodeStepSetting&) = delete;
  DecodeStepSetting& operator=(const DecodeStepSetting&) = delete;

 private:
  bool was_;
};

/// The largest |v| of a tensor (the scale of the logits' tolerances).
double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to(Device::cpu()).to(DType::kFloat64).to_vector<double>()) {
    m = std::max(m, std::abs(v));
  }
  return m;
}

llama::LlamaConfig bf16_test_config() {
  llama::LlamaConfig c = ch15::tiny_config();
  c.dim = 128;  // hs 32
  c.ffn_dim = 352;
  return c;
}

TEST(Ch15_Bf16Cuda, LogitsAndGreedyDecodeFollowFloat32) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard no_tf32(false);
  const llama::LlamaConfig c = bf16_test_config();
  llama::Llama f32(c, 5), bf(c, 5, {DType::kBFloat16});
  f32.to(kCuda);
  bf.to(kCuda);
  const Tensor ids = from_vector<int64_t>({3, 9, 27, 81, 50, 12, 7, 1, 2, 95}, {2, 5}).to(kCuda);
  const Tensor ref = f32.forward(ids).to(Device::cpu());
  const Tensor got = bf.forward(ids).to(Device::cpu());
  ASSERT_EQ(got.dtype(), DType::kFloat32);
  double max_ref = 0;
  for (double v : ref.to(DType::kFloat64).to_vector<double>())
    max_ref = std::max(max_ref, std::abs(v));
  // bfloat16 weights and activations: about 3 significant digits through 2 layers.
  const double tol = 0.03 * max_ref;
  EXPECT_TENSOR_NEAR(got, ref, tol, 0);
  // Greedy decode in bfloat16 (one row with the whole step in one launch, the default for batch
  // 1; then two rows, which take cuBLASLt; one row with the GEMV off; one row with the GEMV
  // launch by launch); each token must be (near) the float32 model's argmax at its position,
  // the float32 model reading the same sequence: logit >= max - tol.
  for (int run = 0; run < 4; ++run) {
    const bool gemv = run == 0 || run == 3;
    llama::set_decode_gemv(gemv);
    const DecodeStepSetting step(run != 3);
    llama::GenerateOptions opt;
    opt.max_new_tokens = 24;
    opt.sampling.temperature = 0;
    Generator g1(0), g2(0);
    const std::vector<std::vector<int64_t>> prompts =
        run == 1 ? std::vector<std::vector<int64_t>>{{1, 2, 3}, {4, 5}}
                 : std::vector<std::vector<int64_t>>{{1, 2, 3}};
    const auto bf_tokens = llama::generate(bf, prompts, opt, g1).tokens;
    const auto f32_tokens = llama::generate(f32, prompts, opt, g2).tokens;
    int64_t same = 0, total = 0;
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      std::vector<int64_t> seq = prompts[b];
      seq.insert(seq.end(), bf_tokens[b].begin(), bf_tokens[b].end());
      const auto T = static_cast<int64_t>(seq.size());
      const Tensor logits = f32.forward(from_vector(seq, {1, T}).to(kCuda)).to(Device::cpu());
      const auto L = logits.to(DType::kFloat64).to_vector<double>();
      const auto P = static_cast<int64_t>(prompts[b].size());
      for (int64_t i = 0; i < static_cast<int64_t>(bf_tokens[b].size()); ++i) {
        const double* row = L.data() + (P - 1 + i) * c.vocab_size;
        const double best = *std::max_element(row, row + c.vocab_size);
        EXPECT_GE(row[bf_tokens[b][i]], best - tol)
            << "row " << b << " new token " << i << " run " << run;
        same += bf_tokens[b][i] == f32_tokens[b][i];
        ++total;
      }
    }
    std::cout << "bf16 (" << prompts.size() << " row(s), decode GEMV " << (gemv ? "on" : "off")
              << ", step kernel " << (run == 0 ? "on" : "off") << ") vs float32 greedy: " << same
              << " of " << total << " tokens identical; logits max |ref| " << max_ref << "\n";
  }
  llama::set_decode_gemv(true);
}

// Decode steps into a cache of 512 positions or more attend through llama_decode_attention
// (one launch, the keys split over blocks), shorter caches through llama_rope_append then
// kv_cache_attend: the same prompt and steps through both give the same logits within
// bfloat16's rounding, and each path runs the kernels it should (the per-op profile's names).
TEST(Ch15_Bf16Cuda, LongCacheDecodeStepsAttendInOneLaunchAsShortOnesInTwo) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  const DecodeStepSetting launch_by_launch(false);
  llama::LlamaConfig c = bf16_test_config();
  c.max_seq_len = 600;
  llama::Llama bf(c, 5, {DType::kBFloat16});
  bf.to(kCuda);
  std::vector<int64_t> prompt(70);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>(i * 37 % 97);
  const int64_t P = static_cast<int64_t>(prompt.size());
  llama::KVCache short_cache = bf.make_cache(1, 100), long_cache = bf.make_cache(1, 600);
  const Tensor ids = from_vector(prompt, {1, P}).to(kCuda);
  (void)bf.forward_cached(ids, short_cache, {0});
  (void)bf.forward_cached(ids, long_cache, {0});
  const auto ops_of = [&](llama::KVCache& cache, const Tensor& tok, int64_t pos, Tensor& logits) {
    prof::Profiler profiler(kCuda);
    {
      prof::ProfileScope scope(profiler);
      logits = bf.forward_cached(tok, cache, {pos});
    }
    std::vector<std::string> names;
    for (const auto& r : profiler.records()) names.push_back(r.op);
    return names;
  };
  const auto has = [](const std::vector<std::string>& names, const std::string& op) {
    return std::find(names.begin(), names.end(), op) != names.end();
  };
  for (int64_t step = 0; step < 4; ++step) {
    const Tensor tok = from_vector<int64_t>({(step * 13 + 5) % 97}, {1, 1}).to(kCuda);
    Tensor a, b;
    const auto two = ops_of(short_cache, tok, P + step, a);
    const auto one = ops_of(long_cache, tok, P + step, b);
    EXPECT_TRUE(has(two, "kv_cache_attend") && has(two, "llama_rope_append") &&
                !has(two, "llama_decode_attention"))
        << "step " << step;
    EXPECT_TRUE(has(one, "llama_decode_attention") && !has(one, "kv_cache_attend") &&
                !has(one, "llama_rope_append"))
        << "step " << step;
    const Tensor la = a.to(Device::cpu()), lb = b.to(Device::cpu());
    double max_ref = 0;
    for (double v : la.to(DType::kFloat64).to_vector<double>()) {
      max_ref = std::max(max_ref, std::abs(v));
    }
    EXPECT_TENSOR_NEAR(lb, la, 0.01 * max_ref, 0) << "step " << step;
  }
}

// A decode step of one row runs as one launch ("llama_decode_step") by default. Against the step
// launch by launch (the decode GEMV and, for a cache of 512 or more, llama_decode_attention: the
// same arithmetic but the RMSNorm's order of summation; below 512, llama_rope_append then
// kv_cache_attend): the same logits within bfloat16's rounding and the same cached keys and
// values, step after step, with a cache of 100 and of 600 positions, split boundaries of 32
// keys crossed (positions 62 to 77; 530 to 545). The second prompt gives 17-18 splits per
// key/value head, 34-36 in all: more than a quarter of an H100's or H200's 132 blocks, so the
// step kernel spreads them over every block where the first prompt's go to blocks of their
// own (see decode_step_kernel). Each path runs the kernels it should (the profile's names).
TEST(Ch15_Bf16Cuda, DecodeStepInOneLaunchEqualsTheStepLaunchByLaunch) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  llama::LlamaConfig c = bf16_test_config();
  c.max_seq_len = 600;
  c.n_layers = 3;
  llama::Llama bf(c, 8, {DType::kBFloat16});
  bf.to(kCuda);
  const auto step_ops = [&](bool one_launch, llama::KVCache& cache, const Tensor& tok, int64_t pos,
                            Tensor& logits) {
    const DecodeStepSetting setting(one_launch);
    prof::Profiler profiler(kCuda);
    {
      prof::ProfileScope scope(profiler);
      logits = bf.forward_cached(tok, cache, {pos}).to(Device::cpu());
    }
    std::vector<std::string> names;
    for (const auto& r : profiler.records()) names.push_back(r.op);
    return names;
  };
  const auto count = [](const std::vector<std::string>& names, const std::string& op) {
    return std::count(names.begin(), names.end(), op);
  };
  for (int64_t max_len : {100, 600}) {
    std::vector<int64_t> prompt(max_len == 100 ? 62 : 530);
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>(i * 29 % 89);
    const int64_t P = static_cast<int64_t>(prompt.size());
    const Tensor ids = from_vector(prompt, {1, P}).to(kCuda);
    llama::KVCache one = bf.make_cache(1, max_len), many = bf.make_cache(1, max_len);
    (void)bf.forward_cached(ids, one, {0});
    (void)bf.forward_cached(ids, many, {0});
    for (int64_t step = 0; step < 16; ++step) {
      const Tensor tok = from_vector<int64_t>({(step * 11 + 3) % 89}, {1, 1}).to(kCuda);
      Tensor a, b;
      const auto fused = step_ops(true, one, tok, P + step, a);
      const auto split = step_ops(false, many, tok, P + step, b);
      EXPECT_EQ(count(fused, "llama_decode_step"), 1) << "max_len " << max_len;
      EXPECT_EQ(count(fused, "llama_decode_gemv"), 0) << "max_len " << max_len;
      EXPECT_EQ(count(split, "llama_decode_step"), 0) << "max_len " << max_len;
      EXPECT_EQ(count(split, "llama_decode_gemv"), 4 * c.n_layers + 1) << "max_len " << max_len;
      EXPECT_TENSOR_NEAR(a, b, 0.01 * max_abs(b), 0) << "max_len " << max_len << " step " << step;
    }
    for (int64_t l = 0; l < c.n_layers; ++l) {
      EXPECT_TENSOR_NEAR(widened(one.k[l]), widened(many.k[l]), 0.02 * max_abs(many.k[l]), 0)
          << "max_len " << max_len << " layer " << l;
      EXPECT_TENSOR_NEAR(widened(one.v[l]), widened(many.v[l]), 0.02 * max_abs(many.v[l]), 0)
          << "max_len " << max_len << " layer " << l;
    }
  }
}

// "llama_decode_step" declines (returns false, launching nothing) what it does not take, and
// names the layer and the tensor of a shape that does not fit.
TEST(Ch15_Bf16Cuda, DecodeStepDeclinesOrNamesWhatItDoesNotTake) {
  TT_SKIP_IF_NO_CUDA();
  autograd::NoGradGuard no_grad;
  const int64_t C = 64, NH = 4, NKV = 2, hs = 16, F = 96, V = 50, L = 2, Tmax = 40;
  const auto bf = [](Shape shape, uint64_t seed) { return bf16_pair(shape, seed, 0.1).bf; };
  std::vector<Tensor> weights, kc, vc;
  for (int64_t l = 0; l < L; ++l) {
    const auto s = static_cast<uint64_t>(10 * l);
    weights.insert(weights.end(),
                   {bf({(NH + 2 * NKV) * hs, C}, s), bf({C}, s + 1), bf({C, NH * hs}, s + 2),
                    bf({C}, s + 3), bf({2 * F, C}, s + 4), bf({C, F}, s + 5)});
    kc.push_back(zeros({1, NKV, Tmax, hs}, {DType::kBFloat16, kCuda}));
    vc.push_back(zeros({1, NKV, Tmax, hs}, {DType::kBFloat16, kCuda}));
  }
  const Tensor norm = bf({C}, 90), head = bf({V, C}, 91);
  const RopeTables tables = rope_tables(Tmax, hs, 10000.0, {}, {DType::kFloat32, kCuda});
  const Tensor pos = from_vector<int64_t>({5}, {1, 1}).to(kCuda);
  const Tensor start = from_vector<int64_t>({5}, {1}).to(kCuda);
  const auto call = [&](const Tensor& logits, const Tensor& x, const std::vector<Tensor>& w,
                        const Tensor& p, const Tensor& s, const std::vector<Tensor>& k,
                        const std::vector<Tensor>& v) {
    return call_kernel<llama::DecodeStepKernel>("llama_decode_step", kCuda, logits, x, w, norm,
                                                head, 1e-5, tables.cos, tables.sin, p, s, k, v);
  };
  const Tensor logits = empty({1, V}, {DType::kFloat32, kCuda});
  const Tensor x = bf({1, C}, 92);
  EXPECT_TRUE(call(logits, x, weights, pos, start, kc, vc));  // what it takes
  // Two rows: declined (the model then runs the step launch by launch).
  std::vector<Tensor> kc2, vc2;
  for (int64_t l = 0; l < L; ++l) {
    kc2.push_back(zeros({2, NKV, Tmax, hs}, {DType::kBFloat16, kCuda}));
    vc2.push_back(zeros({2, NKV, Tmax, hs}, {DType::kBFloat16, kCuda}));
  }
  EXPECT_FALSE(call(empty({2, V}, {DType::kFloat32, kCuda}), bf({2, C}, 93), weights,
                    from_vector<int64_t>({5, 6}, {2, 1}).to(kCuda),
                    from_vector<int64_t>({5, 6}, {2}).to(kCuda), kc2, vc2));
  // A layer's o of the wrong shape, a weight missing, float32 logits of the wrong width.
  std::vector<Tensor> bad = weights;
  bad[6 + 2] = bf({C, NH * hs + 8}, 94);
  EXPECT_TT_ERROR(call(logits, x, bad, pos, start, kc, vc), "decode_step", "layer 1's o",
                  "[64, 72]");
  bad = weights;
  bad.pop_back();
  EXPECT_TT_ERROR(call(logits, x, bad, pos, start, kc, vc), "decode_step", "11 weights");
  EXPECT_TT_ERROR(call(empty({1, V + 1}, {DType::kFloat32, kCuda}), x, weights, pos, start, kc, vc),
                  "decode_step", "logits", "[1, 51]");
}

TEST(Ch15_Bf16Cuda, CudaGraphDecodeGivesTheSameTokens) {
  TT_SKIP_IF_NO_CUDA();
  llama::Llama model(bf16_test_config(), 6, {DType::kBFloat16});
  expect_graph_equals_eager(model);
}

// ----- grouped-query attention ---------------------------------------------------------------

/// Output and input gradients of attention `f` on leaves q, k, v (copies of the given tensors)
/// with the fixed output gradient dout.
struct AttentionRun {
  Tensor out, dq, dk, dv;
};
AttentionRun run_attention(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
    const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f) {
  Tensor lq = q.detach().clone(), lk = k.detach().clone(), lv = v.detach().clone();
  for (Tensor* t : {&lq, &lk, &lv}) t->set_requires_grad(true);
  const Tensor out = f(lq, lk, lv);
  autograd::backward(out, dout);
  const auto cpu = [](const Tensor& t) { return t.to(Device::cpu()).to(DType::kFloat32); };
  return {cpu(out), cpu(lq.grad()), cpu(lk.grad()), cpu(lv.grad())};
}

/// d [B, NH, T, hs] (float32, CPU) summed over each group of `group` consecutive heads:
/// [B, NH / group, T, hs], in double.
Tensor sum_groups(const Tensor& d, int64_t group) {
  const Shape s = d.shape();
  const int64_t per_head = s[2] * s[3], heads = s[0] * s[1] / group;
  const std::vector<float> x = d.contiguous().to_vector<float>();
  std::vector<float> y(static_cast<std::size_t>(heads * per_head));
  for (int64_t j = 0; j < heads; ++j) {
    for (int64_t i = 0; i < per_head; ++i) {
      double acc = 0;
      for (int64_t r = 0; r < group; ++r) acc += x[(j * group + r) * per_head + i];
      y[j * per_head + i] = static_cast<float>(acc);
    }
  }
  return from_vector(y, {s[0], s[1] / group, s[2], s[3]});
}

/// The repeat_kv path: the FlashAttention kernels on K and V copied to NH heads (repeat_kv),
/// their dK, dV [B, NH, T, hs] summed over each group here (the expand's own backward needs a
/// CUDA sum, which bfloat16 lacks).
AttentionRun run_repeated(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                          int64_t group) {
  AttentionRun r = run_attention(
      q, repeat_kv(k, group), repeat_kv(v, group), dout,
      [](const Tensor& a, const Tensor& b, const Tensor& c) { return flash_attention(a, b, c); });
  r.dk = sum_groups(r.dk, group);
  r.dv = sum_groups(r.dv, group);
  return r;
}

void expect_runs_near(const AttentionRun& a, const AttentionRun& b, double atol_out,
                      double atol_grad, double rtol, const std::string& what) {
  EXPECT_TENSOR_NEAR(a.out, b.out, atol_out, rtol) << what << ": out";
  EXPECT_TENSOR_NEAR(a.dq, b.dq, atol_grad, rtol) << what << ": dq";
  EXPECT_TENSOR_NEAR(a.dk, b.dk, atol_grad, rtol) << what << ": dk";
  EXPECT_TENSOR_NEAR(a.dv, b.dv, atol_grad, rtol) << what << ": dv";
}

// For NH = 4 and NH / NKV in {1, 2, 4}, T = 100 (not a multiple of the 64-row tile), B = 2,
// inputs N(0, 1) (rounded to bf16 for bf16, the same values in float32 for the CPU kernel):
//  - the CUDA GQA path against the CUDA repeat_kv path (same kernels on repeated K, V, the
//    group sum of dk, dv in double on the CPU): the forward and dq are the same computation per
//    query head (equal up to 1e-6); dk, dv differ in the rounding of the group sum: fp32
//    rounding (1e-5) in float32; in bf16 the repeat_kv path rounds every head's dk to bf16
//    before the sum (the GQA kernel sums in fp32 and rounds once), up to group * u/2 relative
//    with u = 2^-8: 16u abs + 4u rel;
//  - the CUDA GQA path against the CPU GQA kernel (float32 loops, exercise ch15.3): float32 in
//    chapter 10's exact mode (3xTF32, as accurate as fp32 FMA): 1e-4 abs + 1e-4 rel, as chapter
//    10's CPU/GPU test; bf16 against the CPU float32 kernel on the same values: chapter 11's
//    bf16 tolerances (out 2u abs + 2u rel; gradients 8u abs + 4u rel per head), the dk, dv abs
//    bound times the group of up to 4 heads summed (16u covers 2 of the 4 on average: 32u).
//  - dk, dv of two runs bitwise equal (no atomics: a fixed summation order).
// hs 64 and 128, float32 and bf16 (tt/flash_attention_bf16.h).
TEST(Ch15_GqaCuda, MatchesRepeatKvAndTheCpuKernel) {
  TT_SKIP_IF_NO_CUDA();
  const cuda::AllowTf32Guard exact(false);
  constexpr double u = 1.0 / 256;
  const int64_t B = 2, NH = 4, T = 100;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const bool bf = dt == DType::kBFloat16;
    for (int64_t hs : {64, 128}) {
      for (int64_t group : {1, 2, 4}) {
        const int64_t NKV = NH / group;
        const std::string what = std::string(dtype_name(dt)) + " hs " + std::to_string(hs) +
                                 " NH/NKV " + std::to_string(group);
        SCOPED_TRACE(what);
        // Values representable in dt: rounded on the device, then the CPU float32 copies.
        auto input = [&](const Shape& shape, uint64_t seed) {
          return ch15::leaf(shape, seed, 1.0, DType::kFloat32, false).to(kCuda).to(dt);
        };
        const Tensor q = input({B, NH, T, hs}, 11), k = input({B, NKV, T, hs}, 12),
                     v = input({B, NKV, T, hs}, 13), dout = input({B, NH, T, hs}, 14);
        const auto gqa = [](const Tensor& a, const Tensor& b, const Tensor& c) {
          return gqa_attention(a, b, c);
        };
        const AttentionRun gpu = run_attention(q, k, v, dout, gqa);
        const AttentionRun ref = run_repeated(q, k, v, dout, group);
        expect_runs_near(gpu, ref, 1e-6, bf ? 16 * u : 1e-5, bf ? 4 * u : 1e-5, "vs repeat_kv");
        const auto f32 = [](const Tensor& t) { return t.to(DType::kFloat32).to(Device::cpu()); };
        const AttentionRun cpu = run_attention(f32(q), f32(k), f32(v), f32(dout), gqa);
        if (bf) {
          EXPECT_TENSOR_NEAR(gpu.out, cpu.out, 2 * u, 2 * u) << what << " vs CPU: out";
          EXPECT_TENSOR_NEAR(gpu.dq, cpu.dq, 8 * u, 4 * u) << what << " vs CPU: dq";
          EXPECT_TENSOR_NEAR(gpu.dk, cpu.dk, 32 * u, 4 * u) << what << " vs CPU: dk";
          EXPECT_TENSOR_NEAR(gpu.dv, cpu.dv, 32 * u, 4 * u) << what << " vs CPU: dv";
        } else {
          expect_runs_near(gpu, cpu, 1e-4, 1e-4, 1e-4, "vs the CPU kernel");
        }
        const AttentionRun again = run_attention(q, k, v, dout, gqa);
        EXPECT_TENSOR_NEAR(again.dk, gpu.dk, 0, 0) << "dk of a second run";
        EXPECT_TENSOR_NEAR(again.dv, gpu.dv, 0, 0) << "dv of a second run";
      }
    }
  }
}

// The prefill of llama.cc: gqa_attention on the first T rows of a KV cache [B, NKV, Tmax, hs]
// (non-contiguous slices) equals it on contiguous copies (GqaFn makes k and v contiguous at
// NKV heads; no repeat to NH heads).
TEST(Ch15_GqaCuda, TakesKvCacheSlices) {
  TT_SKIP_IF_NO_CUDA();
  const int64_t B = 2, NH = 4, NKV = 2, T = 70, Tmax = 96, hs = 64;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const auto input = [&](const Shape& shape, uint64_t seed) {
      return ch15::leaf(shape, seed, 1.0, DType::kFloat32, false).to(kCuda).to(dt);
    };
    const Tensor q = input({B, NH, T, hs}, 21);
    const Tensor kc = input({B, NKV, Tmax, hs}, 22), vc = input({B, NKV, Tmax, hs}, 23);
    const Tensor ks = kc.slice(2, 0, T), vs = vc.slice(2, 0, T);
    ASSERT_FALSE(ks.is_contiguous());
    const Tensor y = gqa_attention(q, ks, vs).to(Device::cpu()).to(DType::kFloat32);
    const Tensor ref =
        gqa_attention(q, ks.contiguous(), vs.contiguous()).to(Device::cpu()).to(DType::kFloat32);
    EXPECT_TENSOR_NEAR(y, ref, 0, 0) << dtype_name(dt);
  }
}

/// Records the k argument of every FlashAttention forward kernel call, and (AllocationWatch)
/// the peak bytes in use.
class GqaWatch final : public prof::AllocationWatch {
 public:
  GqaWatch() : AllocationWatch(kCuda) {}
  std::vector<Shape> k_shapes;  ///< k of each "flash_attention_forward" call

 protected:
  void on_call(const KernelCall& call) override {
    // Arguments out, lse, q, k, v: k is the fourth.
    if (call.op == "flash_attention_forward" && call.tensors.size() == 5) {
      k_shapes.push_back(call.tensors[3].shape);
    }
  }
};

// No [B, NH, T, hs] copy of K or V: the FlashAttention kernel gets k with NKV heads, and the
// peak memory of the forward (out, lse) and of the backward (dq, dk, dv, D) stays below what
// one more [B, NH, T, hs] tensor would add. The repeat_kv path, run under the same watch,
// exceeds both bounds (the check can fail).
TEST(Ch15_GqaCuda, AllocatesNoRepeatedKv) {
  TT_SKIP_IF_NO_CUDA();
  // Every tensor below 1 MiB and a multiple of 512 bytes: the caching allocator counts exactly
  // the requested bytes (larger requests are rounded to 2 MiB).
  const int64_t B = 2, NH = 8, NKV = 1, T = 200, hs = 64;
  const auto input = [&](const Shape& shape, uint64_t seed) {
    return ch15::leaf(shape, seed, 1.0, DType::kFloat32, false).to(kCuda);
  };
  const Tensor q = input({B, NH, T, hs}, 31), k = input({B, NKV, T, hs}, 32),
               v = input({B, NKV, T, hs}, 33), dout = input({B, NH, T, hs}, 34);
  const std::size_t head_bytes = static_cast<std::size_t>(B * NH * T * hs) * sizeof(float);
  const std::size_t kv_bytes = static_cast<std::size_t>(B * NKV * T * hs) * sizeof(float);
  const std::size_t lse_bytes = static_cast<std::size_t>(B * NH * T) * sizeof(float);
  // Forward: out and lse. Backward: dq, dk, dv, D, and the leaves' first .grad (a private
  // copy, AccumulateGrad) of dq, dk, dv. Each plus a quarter of a [B, NH, T, hs] of slack; the
  // repeat_kv path adds two [B, NH, T, hs] copies in the forward, and dK, dV at NH heads in
  // the backward (at least 3 [B, NH, T, hs] with dq).
  const std::size_t fwd_bound = head_bytes + lse_bytes + head_bytes / 4;
  const std::size_t bwd_bound = 2 * (head_bytes + 2 * kv_bytes) + lse_bytes + head_bytes / 4;
  using Attention = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  auto measure = [&](const Attention& f, std::vector<Shape>* k_shapes) {
    Tensor lq = q.clone(), lk = k.clone(), lv = v.clone();  // leaves, allocated before the watch
    for (Tensor* t : {&lq, &lk, &lv}) t->set_requires_grad(true);
    std::size_t fwd = 0, bwd = 0;
    Tensor y;
    {
      GqaWatch watch;
      y = f(lq, lk, lv);
      fwd = watch.peak_increase();
      if (k_shapes) *k_shapes = watch.k_shapes;
    }
    {
      GqaWatch watch;
      autograd::backward(y, dout);
      bwd = watch.peak_increase();
    }
    return std::pair{fwd, bwd};
  };
  std::vector<Shape> k_shapes;
  const auto [fwd, bwd] = measure(
      [](const Tensor& a, const Tensor& b, const Tensor& c) { return gqa_attention(a, b, c); },
      &k_shapes);
  ASSERT_EQ(k_shapes.size(), 1u);
  EXPECT_EQ(k_shapes[0], (Shape{B, NKV, T, hs})) << "the kernel read k in place";
  EXPECT_LE(fwd, fwd_bound) << "forward peak";
  EXPECT_LE(bwd, bwd_bound) << "backward peak";
  const auto [rfwd, rbwd] = measure(
      [&](const Tensor& a, const Tensor& b, const Tensor& c) {
        return flash_attention(a, repeat_kv(b, NH / NKV), repeat_kv(c, NH / NKV));
      },
      nullptr);
  EXPECT_GT(rfwd, fwd_bound) << "the repeat_kv path's forward peak (the bound discriminates)";
  EXPECT_GT(rbwd, bwd_bound) << "the repeat_kv path's backward peak";
  std::cout << "GQA peak forward " << fwd << " B, backward " << bwd << " B; repeat_kv " << rfwd
            << " B, " << rbwd << " B; one [B, NH, T, hs] is " << head_bytes << " B\n";
}

}  // namespace
}  // namespace tt
