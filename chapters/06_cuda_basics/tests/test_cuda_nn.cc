// The CUDA kernels of chapter 04's ops (softmax, layernorm, gelu, embedding, cross-entropy,
// masked fill, unary and scalar ops, max over a dim) against the CPU kernels on the same seeded
// inputs, called through the registry under the same names.
//
// Every check runs the GPU first (on a starter, the first TODO hit is then the exercise's own)
// and compares with atol + rtol * |cpu|. Tolerances, float32 (float64 in brackets):
//  - exact: neg, masked fill, embedding forward and backward (the GPU adds a row's tokens in
//    token order in the input dtype, like the CPU), max and its backward, add_scalar and
//    mul_scalar (one rounding each);
//  - 1e-6 + 4e-6 |x| (1e-15 + 1e-14 |x|): exp, log, sqrt, tanh, pow, gelu — CUDA's math functions
//    and glibc's are both within 2 ulp of the exact value, and GELU's formula adds a few
//    roundings that FMA contraction may merge on the GPU;
//  - row reductions accumulate in float on the GPU (a tree over at most 1024 threads after
//    per-thread sums) and in double on the CPU: for rows of up to 4097 elements the float error
//    is below ~(n/threads + log2 threads) * 2^-24 relative to sum |terms|, hence 2e-6 + 2e-5 |x|
//    (1e-13 + 1e-12 |x|) for softmax, log-softmax, layernorm and cross-entropy; layernorm's
//    dweight/dbias add up to 600 rows, 1e-4 + 1e-4 |x| (1e-12 + 1e-11 |x|).
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ch06_test_util.h"
#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"

namespace tt {
namespace {

using test06::CudaTest;
using test06::random_tensor;
using test06::strided_view;

/// atol and rtol of one comparison.
struct Tol {
  double atol = 0, rtol = 0;
};

/// f32 for float32 tensors, f64 otherwise (int64 comparisons are exact in both).
Tol tol_for(DType dtype, Tol f32, Tol f64) {
  if (dtype == DType::kInt64) return {};
  return dtype == DType::kFloat32 ? f32 : f64;
}

constexpr Tol kExact{};
const Tol kMath32{1e-6, 4e-6}, kMath64{1e-15, 1e-14};
const Tol kRow32{2e-6, 2e-5}, kRow64{1e-13, 1e-12};

/// Runs `run` on the GPU, then on the CPU, and compares every output it returns.
void expect_parity(const std::string& what, const std::function<std::vector<Tensor>(Device)>& run,
                   Tol tol) {
  SCOPED_TRACE(what);
  const std::vector<Tensor> gpu = run(Device::cuda());
  const std::vector<Tensor> ref = run(Device::cpu());
  ASSERT_EQ(gpu.size(), ref.size());
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_TRUE(gpu[i].device().is_cuda());
    EXPECT_TENSOR_NEAR(test06::cpu(gpu[i]), ref[i], tol.atol, tol.rtol);
  }
}

/// Allocates an output like `t` on `d`.
Tensor out_like(const Tensor& t, Device d) {
  return empty(t.shape(), {t.dtype(), d});
}

/// `t` with |t| + 0.1: inputs of log, sqrt and pow.
Tensor positive(const Tensor& t) {
  Tensor p = t.to(DType::kFloat64).contiguous();
  double* v = p.data<double>();
  for (int64_t i = 0; i < p.numel(); ++i) v[i] = std::abs(v[i]) + 0.1;
  return p.to(t.dtype());
}

/// Random int64 values in [0, n) (with repeats), shape `shape`.
Tensor random_indices(const Shape& shape, int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(n));
  return from_vector(v, shape);
}

const std::vector<int64_t> kRowSizes = {1, 127, 128, 129, 4097};
const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64};

// ----- softmax (exercise ch06.6) -----------------------------------------------------------------

using Ch06_6_CudaSoftmax = CudaTest;

void check_softmax_forward(DType dt, const Tensor& x, int64_t dim,
                           std::vector<const char*> ops = {"softmax_forward",
                                                           "log_softmax_forward"}) {
  for (const char* op : ops) {
    expect_parity(
        std::string(op) + " " + x.describe() + " dim " + std::to_string(dim),
        [&](Device d) {
          const Tensor xd = x.to(d), out = out_like(x, d);
          call_kernel<SoftmaxForwardKernel>(op, d, out, xd, dim);
          return std::vector<Tensor>{out};
        },
        tol_for(dt, kRow32, kRow64));
  }
}

TEST_F(Ch06_6_CudaSoftmax, LastDimOddSizes) {
  for (DType dt : kFloatTypes) {
    for (int64_t n : kRowSizes) check_softmax_forward(dt, random_tensor({3, n}, dt, 601 + n), -1);
  }
}

TEST_F(Ch06_6_CudaSoftmax, AttentionShapeWithMaskedEntries) {
  // [B, nh, T, T] scores with the future masked to -inf, as attention does.
  Tensor x = random_tensor({2, 3, 64, 64}, DType::kFloat32, 602);
  float* p = x.data<float>();
  for (int64_t r = 0; r < 2 * 3 * 64; ++r) {
    for (int64_t j = r % 64 + 1; j < 64; ++j) p[r * 64 + j] = -INFINITY;
  }
  // Softmax only: log-softmax is -inf there, and tensor_near does not match -inf with -inf.
  check_softmax_forward(DType::kFloat32, x, 3, {"softmax_forward"});
}

TEST_F(Ch06_6_CudaSoftmax, OtherDims) {
  for (DType dt : kFloatTypes) {
    const Tensor x = random_tensor({4, 33, 5}, dt, 603);
    check_softmax_forward(dt, x, 0);
    check_softmax_forward(dt, x, 1);
  }
}

TEST_F(Ch06_6_CudaSoftmax, RepeatedRunsAreBitwiseEqual) {
  const Tensor x = random_tensor({5, 4097}, DType::kFloat32, 604).to(Device::cuda());
  const Tensor a = out_like(x, x.device()), b = out_like(x, x.device());
  call_kernel<SoftmaxForwardKernel>("softmax_forward", x.device(), a, x, 1);
  call_kernel<SoftmaxForwardKernel>("softmax_forward", x.device(), b, x, 1);
  EXPECT_TRUE(test06::same_values(a, b));
}

// ----- softmax backward (given)
// -------------------------------------------------------------------

using Ch06_CudaSoftmaxBackward = CudaTest;

TEST_F(Ch06_CudaSoftmaxBackward, MatchesCpu) {
  for (DType dt : kFloatTypes) {
    for (int64_t n : kRowSizes) {
      for (int64_t dim : {int64_t{0}, int64_t{1}}) {
        // y: a softmax output computed on the CPU, so that this test does not need ch06.6.
        const Tensor x = random_tensor({3, n}, dt, 611 + n), dy = random_tensor({3, n}, dt, 612);
        for (bool log : {false, true}) {
          const Tensor y = empty(x.shape(), {dt});
          call_kernel<SoftmaxForwardKernel>(log ? "log_softmax_forward" : "softmax_forward",
                                            Device::cpu(), y, x, dim);
          const char* op = log ? "log_softmax_backward" : "softmax_backward";
          expect_parity(
              std::string(op) + " " + x.describe() + " dim " + std::to_string(dim),
              [&](Device d) {
                const Tensor dx = out_like(x, d);
                call_kernel<SoftmaxBackwardKernel>(op, d, dx, dy.to(d), y.to(d), dim);
                return std::vector<Tensor>{dx};
              },
              tol_for(dt, kRow32, kRow64));
        }
      }
    }
  }
}

// ----- layernorm (forward: exercise ch06.7)
// -------------------------------------------------------

using Ch06_7_CudaLayerNorm = CudaTest;

TEST_F(Ch06_7_CudaLayerNorm, ForwardOddSizes) {
  for (DType dt : kFloatTypes) {
    for (int64_t C :
         {int64_t{1}, int64_t{127}, int64_t{128}, int64_t{129}, int64_t{768}, int64_t{4097}}) {
      const Tensor x = random_tensor({2, 3, C}, dt, 701 + C), w = random_tensor({C}, dt, 702),
                   b = random_tensor({C}, dt, 703);
      expect_parity(
          "layernorm_forward " + x.describe(),
          [&](Device d) {
            const Tensor out = out_like(x, d), mean = empty({2, 3}, {dt, d}),
                         rstd = empty({2, 3}, {dt, d});
            call_kernel<LayerNormForwardKernel>("layernorm_forward", d, out, mean, rstd, x.to(d),
                                                w.to(d), b.to(d), 1e-5);
            return std::vector<Tensor>{out, mean, rstd};
          },
          tol_for(dt, {1e-5, 2e-5}, kRow64));
    }
  }
}

using Ch06_CudaLayerNormBackward = CudaTest;

TEST_F(Ch06_CudaLayerNormBackward, MatchesCpu) {
  for (DType dt : kFloatTypes) {
    // 3 rows: one block of 2 rows per warp; 4100 rows: 257 blocks of 8 warps (C = 768) whose
    // partial rows column_sum adds in 2 chunks of 256. C = 3100 in float64 (4097 in float32)
    // takes fewer warps per block; C = 6200 in float64 keeps its accumulators in global memory
    // (2 * C values exceed the 48 KB of shared memory); C = 129 has misaligned rows.
    for (int64_t rows : {int64_t{3}, int64_t{600}, int64_t{4100}}) {
      for (int64_t C : {int64_t{1}, int64_t{129}, int64_t{768}, int64_t{3100}, int64_t{6200}}) {
        if (rows * C > 4'000'000) continue;  // keeps the CPU reference quick
        const Tensor x = random_tensor({rows, C}, dt, 711 + C), w = random_tensor({C}, dt, 712),
                     b = random_tensor({C}, dt, 713), dy = random_tensor({rows, C}, dt, 714);
        // mean and rstd from the CPU forward: this test does not need ch06.7.
        const Tensor y = empty({rows, C}, {dt}), mean = empty({rows}, {dt}),
                     rstd = empty({rows}, {dt});
        call_kernel<LayerNormForwardKernel>("layernorm_forward", Device::cpu(), y, mean, rstd, x, w,
                                            b, 1e-5);
        const auto run = [&](Device d) {
          const Tensor dx = out_like(x, d), dw = out_like(w, d), db = out_like(w, d);
          call_kernel<LayerNormBackwardKernel>("layernorm_backward", d, dx, dw, db, dy.to(d),
                                               x.to(d), w.to(d), mean.to(d), rstd.to(d));
          return std::vector<Tensor>{dx, dw, db};
        };
        expect_parity("layernorm_backward " + x.describe(), run,
                      tol_for(dt, {1e-4, 1e-4}, {1e-12, 1e-11}));
        const std::vector<Tensor> again = run(Device::cuda()), first = run(Device::cuda());
        for (std::size_t i = 0; i < first.size(); ++i) {
          EXPECT_TRUE(test06::same_values(again[i], first[i])) << "output " << i;
        }
      }
    }
  }
}

// ----- element-wise
// ---------------------------------------------------------------------------------

using Ch06_CudaUnaryOps = CudaTest;

// Every unary and scalar kernel on `x` (and on positive(x) where the domain needs it).
void check_unary_ops(DType dt, const std::function<Tensor(const Tensor&)>& view, const Tensor& base,
                     const std::string& layout) {
  const Tol math = tol_for(dt, kMath32, kMath64);
  const auto unary = [&](const char* op, const Tensor& b, Tol tol) {
    expect_parity(
        std::string(op) + " of " + layout + " " + b.describe(),
        [&](Device d) {
          // The GPU kernel gets the strided view; the CPU reference a contiguous copy (chapter
          // 04's gelu_forward, like its other NN kernels, requires contiguous operands).
          const Tensor v = view(b.to(d)), x = d.is_cpu() ? v.contiguous() : v;
          const Tensor out = out_like(x, d);
          call_kernel<UnaryKernel>(op, d, out, x);
          return std::vector<Tensor>{out};
        },
        tol);
  };
  const auto scalar = [&](const char* op, const Tensor& b, double s, Tol tol) {
    expect_parity(
        std::string(op) + " " + std::to_string(s) + " of " + layout + " " + b.describe(),
        [&](Device d) {
          const Tensor x = view(b.to(d)), out = out_like(x, d);
          call_kernel<ScalarKernel>(op, d, out, x, s);
          return std::vector<Tensor>{out};
        },
        tol);
  };
  unary("neg", base, kExact);
  if (dt == DType::kInt64) return;
  const Tensor pos = positive(base);
  unary("exp", base, math);
  unary("log", pos, math);
  unary("sqrt", pos, math);
  unary("tanh", base, math);
  unary("gelu_forward", base, math);
  scalar("add_scalar", base, 0.375, kExact);
  scalar("mul_scalar", base, -1.5, kExact);
  scalar("pow_scalar", base, 2.0, kExact);
  scalar("pow_scalar", pos, 0.5, math);
  scalar("pow_scalar", pos, 3.0, math);
}

TEST_F(Ch06_CudaUnaryOps, ContiguousOddSizes) {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    for (int64_t n : test06::kOddSizes) {
      check_unary_ops(
          dt, [](const Tensor& t) { return t; }, random_tensor({n}, dt, 801 + n), "contiguous");
    }
  }
}

TEST_F(Ch06_CudaUnaryOps, NonContiguousAndMisaligned) {
  for (DType dt : kFloatTypes) {
    const Tensor base = random_tensor({129, 33}, dt, 802);
    check_unary_ops(
        dt,
        [](const Tensor& t) {
          return strided_view(t, {33, 129}, {1, 33});
        },
        base, "transposed");
    // Offset by one element: contiguous but not 16-byte aligned (scalar path).
    check_unary_ops(
        dt, [](const Tensor& t) { return strided_view(t, {4000}, {1}, 1); }, base, "offset 1");
  }
}

using Ch06_CudaGelu = CudaTest;

TEST_F(Ch06_CudaGelu, BackwardMatchesCpu) {
  for (DType dt : kFloatTypes) {
    for (int64_t n : kRowSizes) {
      const Tensor x = random_tensor({n}, dt, 811 + n), dy = random_tensor({n}, dt, 812);
      expect_parity(
          "gelu_backward " + x.describe(),
          [&](Device d) {
            const Tensor dx = out_like(x, d);
            call_kernel<UnaryBackwardKernel>("gelu_backward", d, dx, dy.to(d), x.to(d));
            return std::vector<Tensor>{dx};
          },
          tol_for(dt, kMath32, kMath64));
    }
  }
}

using Ch06_CudaMaskedFill = CudaTest;

TEST_F(Ch06_CudaMaskedFill, CausalMaskBroadcastOverBatchAndHeads) {
  for (DType dt : kFloatTypes) {
    const int64_t T = 129;
    const Tensor x = random_tensor({2, 3, T, T}, dt, 821),
                 dy = random_tensor({2, 3, T, T}, dt, 822);
    const auto run = [&](Device d) {
      // The [T, T] mask expanded to x's shape: stride 0 over batch and heads.
      const Tensor mask = causal_mask(T, d).expand(x.shape());
      const Tensor out = out_like(x, d), dx = out_like(x, d);
      call_kernel<MaskedFillForwardKernel>("masked_fill_forward", d, out, x.to(d), mask, -1e9);
      call_kernel<MaskedFillBackwardKernel>("masked_fill_backward", d, dx, dy.to(d), mask);
      return std::vector<Tensor>{out, dx};
    };
    expect_parity("masked_fill " + x.describe(), run, kExact);
  }
}

// ----- embedding
// ------------------------------------------------------------------------------------

using Ch06_CudaEmbedding = CudaTest;

TEST_F(Ch06_CudaEmbedding, ForwardAndBackwardAreExact) {
  for (DType dt : kFloatTypes) {
    for (int64_t C : {int64_t{1}, int64_t{127}, int64_t{768}}) {
      // 132 tokens over 50 rows: most rows repeat, some are unused (their gradient is 0).
      const Tensor w = random_tensor({50, C}, dt, 831), idx = random_indices({4, 33}, 50, 832);
      const Tensor dy = random_tensor({4, 33, C}, dt, 833);
      expect_parity(
          "embedding " + w.describe(),
          [&](Device d) {
            const Tensor out = empty({4, 33, C}, {dt, d}), dw = out_like(w, d);
            call_kernel<EmbeddingForwardKernel>("embedding_forward", d, out, w.to(d), idx.to(d));
            call_kernel<EmbeddingBackwardKernel>("embedding_backward", d, dw, dy.to(d), idx.to(d));
            return std::vector<Tensor>{out, dw};
          },
          kExact);
    }
  }
}

// Gradient-accumulation fusion (tt/autograd.h) of the embedding: three backwards into the
// weight's .grad. With fusion on, the second and third add their rows into .grad through
// "embedding_backward_accumulate" (no zeroed table, no "add" of the weight's shape); the
// accumulated gradient equals fusion off's bit for bit. A weight used twice in one graph (a
// tied head) keeps the unfused path.
TEST_F(Ch06_CudaEmbedding, AccumulatesIntoGradUnderFusionBitForBit) {
  const Device gpu = Device::cuda();
  for (DType dt : kFloatTypes) {
    const int64_t V = 50, C = 96;
    const auto run = [&](bool fusion, bool used_twice, int* fused, int* adds) {
      autograd::GradAccumulationFusionGuard guard(fusion);
      Tensor w = random_tensor({V, C}, dt, 840).to(gpu);
      w.set_requires_grad(true);
      test06::KernelCallCounter accumulating("embedding_backward_accumulate", {V, C}),
          adding("add", {V, C});
      for (int m = 0; m < 3; ++m) {
        const Tensor idx = random_indices({4, 33}, V, 841 + m).to(gpu);
        Tensor y = embedding(w, idx);
        if (used_twice) y = add(y, embedding(w, idx));
        autograd::backward(y, random_tensor({4, 33, C}, dt, 850 + m).to(gpu));
      }
      *fused = accumulating.count;
      *adds = adding.count;
      return w.grad();
    };
    int fused_off = 0, adds_off = 0, fused_on = 0, adds_on = 0;
    const Tensor off = run(false, false, &fused_off, &adds_off);
    const Tensor on = run(true, false, &fused_on, &adds_on);
    EXPECT_EQ(fused_off, 0);
    EXPECT_EQ(adds_off, 2) << "the first gradient is stored, the next two are added";
    EXPECT_EQ(fused_on, 2) << "the second and third backwards add into .grad themselves";
    EXPECT_EQ(adds_on, 0);
    EXPECT_TENSOR_NEAR(on, off, 0, 0) << dtype_name(dt);
    int fused_twice = 0, adds_twice = 0;
    run(true, true, &fused_twice, &adds_twice);
    EXPECT_EQ(fused_twice, 0) << "a weight used twice keeps the unfused path";
  }
}

TEST_F(Ch06_CudaEmbedding, OutOfRangeIndexThrows) {
  const Device gpu = Device::cuda();
  const Tensor w = random_tensor({5, 3}, DType::kFloat32, 834).to(gpu);
  const Tensor idx = from_vector(std::vector<int64_t>{1, 5}, {2}).to(gpu);
  const Tensor out = empty({2, 3}, {DType::kFloat32, gpu});
  EXPECT_TT_ERROR(call_kernel<EmbeddingForwardKernel>("embedding_forward", gpu, out, w, idx),
                  "embedding_forward", "indices[1] = 5", "out of range");
  const Tensor dw = empty({5, 3}, {DType::kFloat32, gpu});
  EXPECT_TT_ERROR(call_kernel<EmbeddingBackwardKernel>("embedding_backward", gpu, dw, out, idx),
                  "embedding_backward", "out of range");
}

// ----- cross-entropy
// --------------------------------------------------------------------------------

using Ch06_CudaCrossEntropy = CudaTest;

// Targets in [0, V) with every 5th row ignored (kIgnoreIndex).
Tensor targets_with_ignored(int64_t N, int64_t V, uint64_t seed) {
  Tensor t = random_indices({N}, V, seed);
  for (int64_t n = 0; n < N; n += 5) t.data<int64_t>()[n] = kIgnoreIndex;
  return t;
}

void check_cross_entropy(DType dt, int64_t N, int64_t V, const Tensor& t) {
  const Tensor x = random_tensor({N, V}, dt, 841 + V);
  const Tensor dloss = from_vector(std::vector<double>{1.7}, {}).to(dt);
  expect_parity(
      "cross_entropy " + x.describe(),
      [&](Device d) {
        const Tensor loss = empty({}, {dt, d}), lse = empty({N}, {dt, d});
        const Tensor dx = out_like(x, d), xd = x.to(d), td = t.to(d);
        call_kernel<CrossEntropyForwardKernel>("cross_entropy_forward", d, loss, lse, xd, td,
                                               kIgnoreIndex);
        call_kernel<CrossEntropyBackwardKernel>("cross_entropy_backward", d, dx, dloss.to(d), xd,
                                                td, lse, kIgnoreIndex);
        return std::vector<Tensor>{loss, lse, dx};
      },
      tol_for(dt, kRow32, kRow64));
}

TEST_F(Ch06_CudaCrossEntropy, MatchesCpuWithIgnoredRows) {
  for (DType dt : kFloatTypes) {
    for (int64_t V : kRowSizes) check_cross_entropy(dt, 37, V, targets_with_ignored(37, V, 842));
  }
}

TEST_F(Ch06_CudaCrossEntropy, AllRowsIgnoredGiveNan) {
  check_cross_entropy(DType::kFloat32, 4, 9,
                      from_vector(std::vector<int64_t>(4, kIgnoreIndex), {4}));
}

TEST_F(Ch06_CudaCrossEntropy, BadTargetThrows) {
  const Device gpu = Device::cuda();
  const Tensor x = random_tensor({2, 3}, DType::kFloat32, 843).to(gpu);
  const Tensor t = from_vector(std::vector<int64_t>{0, 3}, {2}).to(gpu);
  const Tensor loss = empty({}, {DType::kFloat32, gpu}), lse = empty({2}, {DType::kFloat32, gpu});
  EXPECT_TT_ERROR(call_kernel<CrossEntropyForwardKernel>("cross_entropy_forward", gpu, loss, lse, x,
                                                         t, kIgnoreIndex),
                  "cross_entropy_forward", "targets[1] = 3", "out of range");
}

// ----- max over a dim
// -------------------------------------------------------------------------------

using Ch06_CudaMaxDim = CudaTest;

TEST_F(Ch06_CudaMaxDim, ValuesIndicesAndBackwardAreExact) {
  struct Case {
    std::string name;
    Shape base;
    std::function<Tensor(const Tensor&)> view;
    int64_t dim;
  };
  const std::vector<Case> cases = {
      {"[33, 129] dim 1", {33, 129}, [](const Tensor& t) { return t; }, 1},
      {"[33, 129] dim 0", {33, 129}, [](const Tensor& t) { return t; }, 0},
      {"[4, 5, 6] dim 1", {4, 5, 6}, [](const Tensor& t) { return t; }, 1},
      {"transposed [65, 17] dim 1",
       {17, 65},
       [](const Tensor& t) {
         return strided_view(t, {65, 17}, {1, 65});
       },
       1},
  };
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kInt64}) {  // int64: many ties
    for (const Case& c : cases) {
      const Tensor base = random_tensor(c.base, dt, 851);
      expect_parity(
          "max_dim " + c.name + " " + dtype_name(dt),
          [&](Device d) {
            const Tensor x = c.view(base.to(d));
            Shape keep = x.shape();
            keep[static_cast<std::size_t>(c.dim)] = 1;
            const Tensor v = empty(keep, {dt, d}), i = empty(keep, {DType::kInt64, d});
            call_kernel<MaxDimKernel>("max_dim", d, v, i, x, c.dim);
            std::vector<Tensor> out{v, i};
            if (dt != DType::kInt64) {
              const Tensor gi = zeros(x.shape(), {dt, d});
              call_kernel<MaxDimBackwardKernel>("max_dim_backward", d, gi, v, i, c.dim);
              out.push_back(gi);
            }
            return out;
          },
          kExact);
    }
  }
}

// ----- front-ends with autograd on CUDA ----------------------------------------------------------

using Ch06_CudaNnFrontEnds = CudaTest;

// Runs `f` on a leaf x (a transposed, non-contiguous view of `base` moved to d), back-propagates
// the seeded gradient `dy`, and returns {f(x), x.grad()}.
std::vector<Tensor> forward_backward(const Tensor& base, Device d,
                                     const std::function<Tensor(const Tensor&)>& f, uint64_t seed) {
  const Tensor moved = base.to(d);
  const Tensor x = strided_view(moved, {base.size(1), base.size(0)}, {1, base.size(1)});
  x.set_requires_grad(true);
  const Tensor y = f(x);
  const Tensor dy = random_tensor(y.shape(), y.dtype(), seed).to(d);
  autograd::backward(y, dy);
  return {y, x.grad()};
}

TEST_F(Ch06_CudaNnFrontEnds, NonContiguousInputsMatchCpu) {
  const Tensor base = random_tensor({65, 129}, DType::kFloat32, 861);  // x is [129, 65]
  const Tensor w = random_tensor({65}, DType::kFloat32, 862);
  const Tensor b = random_tensor({65}, DType::kFloat32, 863);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax dim 0", [](const Tensor& x) { return log_softmax(x, 0); }},
      {"layernorm",
       [&](const Tensor& x) { return layernorm(x, w.to(x.device()), b.to(x.device())); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"masked_fill",
       [](const Tensor& x) {
         std::vector<int64_t> every_third(65, 0);
         for (std::size_t j = 0; j < every_third.size(); j += 3) every_third[j] = 1;
         return masked_fill(x, from_vector(every_third, {65}).to(x.device()), -1e4);
       }},
  };
  for (const auto& op : ops) {  // not a structured binding: clang 14 cannot capture one
    const auto& f = op.second;
    expect_parity(op.first, [&](Device d) { return forward_backward(base, d, f, 864); },
                  {1e-5, 2e-5});
  }
}

TEST_F(Ch06_CudaNnFrontEnds, CrossEntropyAndEmbeddingMatchCpu) {
  const Tensor logits = random_tensor({37, 129}, DType::kFloat32, 871);
  const Tensor targets = targets_with_ignored(37, 129, 872);
  const Tensor table = random_tensor({50, 64}, DType::kFloat32, 873);
  const Tensor idx = random_indices({3, 7}, 50, 874);
  expect_parity(
      "cross_entropy and embedding",
      [&](Device d) {
        const Tensor x = logits.to(d), wte = table.to(d);
        x.set_requires_grad(true);
        wte.set_requires_grad(true);
        const Tensor loss = cross_entropy(x, targets.to(d));
        autograd::backward(loss);
        const Tensor emb = embedding(wte, idx.to(d));
        autograd::backward(sum(emb));
        return std::vector<Tensor>{loss, x.grad(), emb, wte.grad()};
      },
      kRow32);
}

}  // namespace
}  // namespace tt
