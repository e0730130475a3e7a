// Chapter 15's CUDA kernels against the CPU ones (skipped without a GPU): RMSNorm, RoPE and
// SwiGLU forward and backward, the KV-cache step, and the tiny model's logits, loss and greedy
// generation.
#include "ch15_test_util.h"
#include "tt/cuda_matmul.h"
#include "tt/functional.h"
#include "tt/generate.h"

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

TEST(Ch15_ModelCuda, CudaGraphDecodeGivesTheSameTokens) {
  TT_SKIP_IF_NO_CUDA();
  llama::LlamaConfig c = ch15::tiny_config();
  c.dim = 128;  // hs 32
  llama::Llama model(c, 6);
  model.to(kCuda);
  llama::GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling = {0.8, 0, 0.9};
  Generator g1(4), g2(4);
  const auto eager = llama::generate(model, {{1, 2, 3}, {9, 8, 7, 6, 5}}, opt, g1);
  opt.cuda_graph = true;
  const auto graphed = llama::generate(model, {{1, 2, 3}, {9, 8, 7, 6, 5}}, opt, g2);
  EXPECT_EQ(graphed.tokens, eager.tokens);
}

}  // namespace
}  // namespace tt
