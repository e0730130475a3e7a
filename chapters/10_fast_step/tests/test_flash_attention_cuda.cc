// Chapter 10 on a GPU: the CUDA FlashAttention kernels (ch10.5 forward, ch10.6 backward) against
// the float64 reference of the naive composition, in both precision modes, the op through
// autograd, the errors of the CUDA path, and a sequence (T = 8192, B = 8, NH = 12) whose naive
// attention would need 25.8 GB per [B, NH, T, T] tensor. All tests skip without a CUDA device.
//
// Tolerances (inputs N(0, 1), so scores q.k / sqrt(hs) are about N(0, 1)):
//  - TF32 (cuda::allow_tf32() true): every mma operand is rounded to 10 mantissa bits, a relative
//    error of up to 2^-11 = 4.9e-4 per operand. A score then carries an error of about
//    sqrt(hs) * 2^-11 * |q_c k_c| / sqrt(hs) ~ 5e-4, which moves each probability by the same
//    relative amount; P and V are rounded again for P V. The outputs are averages of O(1)
//    values, so their errors are a few 1e-4 (METHOD.md: "tf32 near 3e-4"). We require
//    ||err|| / max(||ref||, sqrt(numel)) <= 2e-3 (test10::relative_error; about 5x the expected
//    3-4e-4) and every element within 3e-2 abs + 1e-2 rel (catches one wrong row that a norm
//    would average away). Gradients go through two more TF32 products (dP, then dS K), and
//    dS = P (dP - D) subtracts a TF32 dP from an fp32 D: errors of ~1e-3 of |dP| even where the
//    exact dS is 0 (T = 1: dq = dk = 0 exactly; measured RMS error 4e-4). Same norm bound,
//    elements within 5e-2.
//  - exact mode (allow_tf32() false, 3xTF32): products are as accurate as fp32 FMA, so the
//    errors are fp32 rounding: ||err|| / ||ref|| <= 2e-5 and elements within 1e-4 abs + 1e-4 rel.
#include <cmath>
#include <string>
#include <vector>

#include "ch10_test_util.h"
#include "tt/cuda_matmul.h"
#include "tt/gpt2.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#endif

namespace tt {
namespace {

using test10::randn_t;
using test10::relative_error;
using test10::shape_name;

struct Tolerance {
  double rel_norm, atol, rtol;
};

// TF32 tolerances for outputs and for gradients, and those of the exact (3xTF32) mode.
constexpr Tolerance kTf32Out{2e-3, 3e-2, 1e-2};
constexpr Tolerance kTf32Grad{2e-3, 5e-2, 1e-2};
constexpr Tolerance kExact{2e-5, 1e-4, 1e-4};

void expect_close(const Tensor& actual, const Tensor& expected, const Tolerance& tol,
                  const std::string& what) {
  const double rel = relative_error(actual, expected);
  EXPECT_LE(rel, tol.rel_norm) << what << ": ||err|| / ||ref|| = " << rel;
  EXPECT_TENSOR_NEAR(actual.to(Device::cpu()), expected, tol.atol, tol.rtol) << what;
}

struct Case {
  int64_t B, NH, T, hs;
};

// T not a multiple of the 64-row tile (1, 17, 100, 257) and around it (63, 64, 65, 128),
// B * NH > 1, and the three supported head sizes.
const std::vector<Case> kCases = {{1, 1, 1, 64},   {2, 3, 17, 64},   {2, 3, 100, 64},
                                  {1, 2, 257, 64}, {1, 2, 63, 32},   {2, 1, 64, 32},
                                  {1, 2, 65, 128}, {1, 1, 128, 128}, {1, 3, 200, 32}};

/// Runs `fn(case, tf32, name)` for every case in both precision modes.
template <typename Fn>
void for_each_case(Fn&& fn) {
  for (const bool tf32 : {true, false}) {
    cuda::AllowTf32Guard mode(tf32);
    for (const Case& c : kCases) {
      fn(c, tf32, shape_name({c.B, c.NH, c.T, c.hs}) + (tf32 ? " tf32" : " exact"));
    }
  }
}

TEST(Ch10_5_FlashAttentionCuda, ForwardMatchesReference) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 300;
  for_each_case([&](const Case& c, bool tf32, const std::string& name) {
    const Shape shape{c.B, c.NH, c.T, c.hs};
    const test10::AttentionInputs in = test10::random_inputs(shape, seed += 4);
    const test10::AttentionReference ref = test10::reference_attention(in);
    const Tensor &q = in.q, &k = in.k, &v = in.v;
    const Device gpu = Device::cuda(0);
    // Poisoned outputs: every element must be written.
    Tensor out = full(shape, NAN, {DType::kFloat32, gpu});
    Tensor lse = full({c.B, c.NH, c.T}, NAN, {DType::kFloat32, gpu});
    call_kernel<FlashAttentionForwardKernel>("flash_attention_forward", gpu, out, lse, q.to(gpu),
                                             k.to(gpu), v.to(gpu));
    expect_close(out, ref.out, tf32 ? kTf32Out : kExact, name + " out");
    expect_close(lse, ref.lse, tf32 ? kTf32Out : kExact, name + " lse");
  });
}

TEST(Ch10_6_FlashAttentionCuda, BackwardMatchesReference) {
  TT_SKIP_IF_NO_CUDA();
  uint64_t seed = 400;
  for_each_case([&](const Case& c, bool tf32, const std::string& name) {
    const Shape shape{c.B, c.NH, c.T, c.hs};
    const test10::AttentionInputs in = test10::random_inputs(shape, seed += 4);
    const test10::AttentionReference ref = test10::reference_attention(in);
    const Tensor &q = in.q, &k = in.k, &v = in.v, &dout = in.dout;
    const Device gpu = Device::cuda(0);
    const TensorOptions opts{DType::kFloat32, gpu};
    Tensor dq = full(shape, NAN, opts), dk = full(shape, NAN, opts), dv = full(shape, NAN, opts);
    // The forward results come from the reference, so this test does not depend on ch10.5.
    call_kernel<FlashAttentionBackwardKernel>(
        "flash_attention_backward", gpu, dq, dk, dv, dout.to(gpu), q.to(gpu), k.to(gpu), v.to(gpu),
        ref.out.to(DType::kFloat32).to(gpu), ref.lse.to(DType::kFloat32).to(gpu));
    const Tolerance tol = tf32 ? kTf32Grad : kExact;
    expect_close(dq, ref.dq, tol, name + " dq");
    expect_close(dk, ref.dk, tol, name + " dk");
    expect_close(dv, ref.dv, tol, name + " dv");
  });
}

TEST(Ch10_FlashAttentionCuda, AutogradMatchesTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  const Shape shape{2, 3, 150, 64};
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> cpu_in, gpu_in;
  for (uint64_t s = 0; s < 3; ++s) {
    cpu_in.push_back(randn_t(shape, 500 + s, DType::kFloat32));
    gpu_in.push_back(cpu_in.back().to(gpu));
    cpu_in.back().set_requires_grad();
    gpu_in.back().set_requires_grad();
  }
  const Tensor dout = randn_t(shape, 510, DType::kFloat32);
  const Tensor y_cpu = flash_attention(cpu_in[0], cpu_in[1], cpu_in[2]);
  const Tensor y_gpu = flash_attention(gpu_in[0], gpu_in[1], gpu_in[2]);
  ASSERT_TRUE(y_gpu.device().is_cuda());
  autograd::backward(y_cpu, dout);
  autograd::backward(y_gpu, dout.to(gpu));
  // Both fp32-accurate (CPU fp32 loops, GPU 3xTF32): a few ulps apart.
  EXPECT_TENSOR_NEAR(y_gpu.to(Device::cpu()), y_cpu, 1e-5, 1e-4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TENSOR_NEAR(gpu_in[i].grad().to(Device::cpu()), cpu_in[i].grad(), 1e-4, 1e-4)
        << "input " << i;
  }
}

TEST(Ch10_FlashAttentionCuda, RejectsWhatItCannotRun) {
  TT_SKIP_IF_NO_CUDA();
  const Device gpu = Device::cuda(0);
  const Tensor h48 = zeros({1, 2, 8, 48}, {DType::kFloat32, gpu});
  const Tensor f64 = zeros({1, 2, 8, 64}, {DType::kFloat64, gpu});
  testing::expect_errors({
      {"hs 48", [&] { flash_attention(h48, h48, h48); }, {"flash_attention_forward", "hs = 48"}},
      {"float64", [&] { flash_attention(f64, f64, f64); }, {"flash_attention_forward", "float32"}},
  });
}

// GPT-2's packed layout on the GPU: q, k, v read from qkv [B, T, 3C] (row stride 3C), y written
// into [B, T, C] (row stride C), dqkv written directly, against chapter 09's composition in
// float64 on the CPU. T around and between the 64-row tiles, B * NH > 1, the three head sizes.
TEST(Ch10_FlashAttentionQkvCuda, MatchesCausalSelfAttention) {
  TT_SKIP_IF_NO_CUDA();
  struct QkvCase {
    int64_t B, T, NH, hs;
  };
  const std::vector<QkvCase> cases = {
      {1, 1, 1, 64}, {2, 17, 3, 64}, {2, 100, 2, 32}, {1, 65, 2, 128}, {2, 130, 12, 64}};
  const Device gpu = Device::cuda(0);
  uint64_t seed = 700;
  for (const bool tf32 : {true, false}) {
    cuda::AllowTf32Guard mode(tf32);
    for (const QkvCase& c : cases) {
      const int64_t C = c.NH * c.hs;
      const std::string name = "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
                               " NH=" + std::to_string(c.NH) + " hs=" + std::to_string(c.hs) +
                               (tf32 ? " tf32" : " exact");
      const Tensor qkv = randn_t({c.B, c.T, 3 * C}, seed += 2, DType::kFloat32);
      const Tensor dy = randn_t({c.B, c.T, C}, seed + 1, DType::kFloat32);
      Tensor x64 = qkv.to(DType::kFloat64);
      x64.set_requires_grad();
      const Tensor y64 = gpt2::causal_self_attention(x64, c.NH);
      autograd::backward(y64, dy.to(DType::kFloat64));
      Tensor xg = qkv.to(gpu);
      xg.set_requires_grad();
      const Tensor yg = flash_attention_qkv(xg, c.NH);
      ASSERT_TRUE(yg.device().is_cuda()) << name;
      autograd::backward(yg, dy.to(gpu));
      expect_close(yg.detach(), y64.detach(), tf32 ? kTf32Out : kExact, name + " y");
      expect_close(xg.grad(), x64.grad(), tf32 ? kTf32Grad : kExact, name + " dqkv");
    }
  }
}

TEST(Ch10_FlashAttentionQkvCuda, RejectsWhatItCannotRun) {
  TT_SKIP_IF_NO_CUDA();
  const Device gpu = Device::cuda(0);
  // hs = 48 has no kernel; C = 66 puts k at 264 bytes and rows 792 bytes apart: no 16-byte loads.
  testing::expect_errors({
      {"hs 48",
       [&] {
         flash_attention_qkv(zeros({1, 4, 3 * 96}, {DType::kFloat32, gpu}), 2);
       },
       {"flash_attention_forward", "hs = 48"}},
      {"unaligned rows",
       [&] {
         flash_attention_qkv(zeros({1, 4, 3 * 66}, {DType::kFloat32, gpu}), 2);
       },
       {"flash_attention_forward", "16"}},
  });
}

#if TT_WITH_CUDA
TEST(Ch10_FlashAttentionCuda, LongSequenceInLinearMemory) {
  TT_SKIP_IF_NO_CUDA();
  // B = 8, NH = 12, T = 8192, hs = 64: q, k, v, out, dout, dq, dk, dv are 201 MB each, while one
  // [B, NH, T, T] float32 tensor of the naive composition would be 25.8 GB (and it keeps
  // several). Checked: peak allocation, finiteness, and sampled output rows of the last head
  // against a float64 computation of just those rows.
  const int64_t B = 8, NH = 12, T = 8192, hs = 64;
  const Shape shape{B, NH, T, hs};
  const Device gpu = Device::cuda(0);
  const Tensor q = randn_t(shape, 600, DType::kFloat32), k = randn_t(shape, 601, DType::kFloat32);
  const Tensor v = randn_t(shape, 602, DType::kFloat32);
  cuda::AllowTf32Guard fast(true);  // the path training uses
  const std::size_t before = cuda::memory_stats(0).allocated;
  Tensor qg = q.to(gpu), kg = k.to(gpu), vg = v.to(gpu);
  for (Tensor* t : {&qg, &kg, &vg}) t->set_requires_grad();
  const Tensor y = flash_attention(qg, kg, vg);
  autograd::backward(y, full(shape, 1.0, {DType::kFloat32, gpu}));
  cuda::synchronize(0);
  const double peak = static_cast<double>(cuda::memory_stats(0).peak_allocated - before);
  const double tensor_bytes = 4.0 * static_cast<double>(B * NH * T * hs);
  // q, k, v, out, dout, dq, dk, dv (+ copies the gradient accumulation may make): <= 12.
  EXPECT_LE(peak, 12 * tensor_bytes) << "peak " << peak / 1e9 << " GB";
  const Tensor yc = y.detach().to(Device::cpu());
  for (const Tensor& g : {yc, qg.grad().to(Device::cpu()), kg.grad().to(Device::cpu()),
                          vg.grad().to(Device::cpu())}) {
    const float* p = g.data<float>();
    bool finite = true;
    for (int64_t i = 0; i < g.numel() && finite; ++i) finite = std::isfinite(p[i]);
    EXPECT_TRUE(finite);
  }
  // Rows 0, 1, 4095 and 8191 of head (7, 11), in float64.
  const int64_t head = (B * NH - 1) * T * hs;
  const float* pq = q.data<float>() + head;
  const float* pk = k.data<float>() + head;
  const float* pv = v.data<float>() + head;
  const float* py = yc.data<float>() + head;
  for (const int64_t i : {int64_t{0}, int64_t{1}, int64_t{4095}, T - 1}) {
    std::vector<double> s(static_cast<std::size_t>(i + 1));
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      double d = 0;
      for (int64_t c = 0; c < hs; ++c) d += double(pq[i * hs + c]) * pk[j * hs + c];
      s[j] = d / 8.0;
      m = std::max(m, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - m));
    for (int64_t c = 0; c < hs; ++c) {
      double o = 0;
      for (int64_t j = 0; j <= i; ++j) o += s[j] * pv[j * hs + c];
      EXPECT_NEAR(py[i * hs + c], o / sum, 3e-2) << "row " << i << " col " << c;
    }
  }
}
#endif

}  // namespace
}  // namespace tt
