// The tensor-parallel MLP on GPUs, through NCCL: each tp group is a sub-group of the world
// (ProcessGroup::split) and gets its own NCCL communicator on its first CUDA collective. Skips
// on every rank unless every rank has NCCL and a GPU of its own (chapter 12's check, so that no
// rank waits for one that skipped). Run under mpirun with as many ranks as GPUs.
#include <gtest/gtest.h>

#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "ch13_test_util.h"

namespace {

using ch13_test::make_input;
using ch13_test::make_linear;
using ch13_test::max_abs_diff;
using tt::Tensor;

TEST(Ch13_TensorParallelCudaMpi, MlpOnGpusMatchesTheCpuMlp) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device gpu = tt::Device::cuda(world.local_rank());
  constexpr int64_t kRows = 5, kC = 8, kH = 32;
  // GPU matmuls may sum in another order (or in TF32): a looser bound than the CPU tests' 1e-5.
  constexpr double kTol = 2e-3;
  ch13_test::for_each_tp([&](int tp, tt::dist::ProcessGroup& group) {
    tt::nn::Linear fc = make_linear(kC, kH, 14), proj = make_linear(kH, kC, 15);
    Tensor w = make_input(kRows, kC, 16);
    Tensor x = make_input(kRows, kC, 17).set_requires_grad();
    Tensor ref = proj.forward(tt::gelu(fc.forward(x)));  // the plain MLP on the CPU
    tt::autograd::backward(tt::sum(tt::mul(ref, w)));

    fc.to(gpu);
    proj.to(gpu);
    tt::tp::TensorParallelMLP mlp(fc, proj, group);
    Tensor xg = make_input(kRows, kC, 17).to(gpu).set_requires_grad();
    Tensor y = mlp.forward(xg);
    tt::autograd::backward(tt::sum(tt::mul(y, w.to(gpu))));
    EXPECT_LE(max_abs_diff(y.detach().to(tt::Device::cpu()), ref), kTol);
    ASSERT_TRUE(xg.grad().defined());
    EXPECT_LE(max_abs_diff(xg.grad().to(tt::Device::cpu()), x.grad()), kTol)
        << "the input gradient: f's all-reduce through the tp group's NCCL communicator";
  });
}

}  // namespace
