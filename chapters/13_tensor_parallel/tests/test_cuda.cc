// The tensor-parallel MLP on GPUs, through NCCL: each tp group is a sub-group of the world
// (ProcessGroup::split) and gets its own NCCL communicator on its first CUDA collective. Skips
// on every rank unless every rank has NCCL and a GPU of its own (chapter 12's check, so that no
// rank waits for one that skipped). Run under mpirun with as many ranks as GPUs.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "ch13_test_util.h"
#include "tt/backend.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/tp_gpt2.h"

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

// GPT-2 split over the GPUs of each tp group (vocab-parallel embedding and loss, attention by
// heads, the MLP, with and without sequence parallelism) against the one-process model on the
// CPU: logits, loss and the gradient of the first LayerNorm (a replicated parameter, summed over
// the group with sequence parallelism).
TEST(Ch13_TensorParallelCudaMpi, Gpt2OnGpusMatchesTheCpuModel) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device gpu = tt::Device::cuda(world.local_rank());
  constexpr double kTol = 2e-3;  // cuBLAS may use another summation order (TF32 off by default)
  const tt::gpt2::GPT2Config config{.block_size = 16,
                                    .vocab_size = 51,
                                    .padded_vocab_size = 52,
                                    .n_layer = 2,
                                    .n_head = 4,
                                    .n_embd = 32};
  std::mt19937_64 gen(5);
  std::vector<int64_t> ids(16), next(16);
  for (auto& t : ids) t = static_cast<int64_t>(gen() % 51);
  for (auto& t : next) t = static_cast<int64_t>(gen() % 51);
  const Tensor idx = tt::from_vector(ids, {2, 8}), targets = tt::from_vector(next, {2, 8});
  tt::gpt2::GPT2 ref(config, 7);
  Tensor ref_logits;
  {
    tt::autograd::NoGradGuard no_grad;
    ref_logits = ref.forward(idx);
  }
  Tensor ref_loss = ref.loss(idx, targets);
  tt::autograd::backward(ref_loss);
  ch13_test::for_each_tp([&](int, tt::dist::ProcessGroup& group) {
    for (const tt::tp::TpOptions& options : ch13_test::kSplits) {
      SCOPED_TRACE(ch13_test::options_name(options));
      tt::gpt2::GPT2 model(config, 7);
      model.to(gpu);
      tt::tp::TensorParallelGPT2 split(model, group, options);
      const Tensor logits = split.logits(idx.to(gpu));
      EXPECT_LE(max_abs_diff(logits.to(tt::Device::cpu()), ref_logits), kTol);
      Tensor loss = model.loss(idx.to(gpu), targets.to(gpu));
      EXPECT_NEAR(loss.item(), ref_loss.item(), kTol);
      tt::autograd::backward(loss);
      split.finish_backward();
      const Tensor g = model.parameter("h.0.ln_1.weight").grad();
      ASSERT_TRUE(g.defined());
      EXPECT_LE(max_abs_diff(g.to(tt::Device::cpu()), ref.parameter("h.0.ln_1.weight").grad()),
                kTol);
    }
  });
}

// The fused vocab-parallel head on GPUs (chapter 10's split-vocabulary row kernels, the
// statistics all-gathered through NCCL) against the fused classifier on the CPU (ch13_test_util.h):
// float32 (TF32 off) at 1e-5; bfloat16 (cuBLASLt's bf16 GEMMs against chapter 11's CPU
// emulation: a logit may round to the neighbouring bf16 value) at 1e-3 on the loss and 2e-2 on
// the gradients. V = 9 of 16: at tp = 4 the last rank holds only padding.
TEST(Ch13_TensorParallelCudaMpi, VocabParallelClassifierOnGpusMatchesTheCpu) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device gpu = tt::Device::cuda(world.local_rank());
  ch13_test::check_fused_head(13, 16, tt::DType::kFloat32, 51, gpu, 1e-5, 1e-5);
  ch13_test::check_fused_head(9, 16, tt::DType::kFloat32, 54, gpu, 1e-5, 1e-5);
  ch13_test::check_fused_head(13, 16, tt::DType::kBFloat16, 57, gpu, 1e-3, 2e-2);
  ch13_test::check_fused_head(9, 16, tt::DType::kBFloat16, 60, gpu, 1e-3, 2e-2);
}

// With the world's NCCL communicator made first (init_cuda, what train_gpt2 --tp/--pp/--cp does
// on GPUs), every group of a grid gets its own by ncclCommSplit when the grid splits the world:
// named so, its collectives sum and gather over the right ranks in the right order, and it
// keeps working after the world frees its communicator.
TEST(Ch13_TensorParallelCudaMpi, GridGroupsAreNcclCommSplitOfTheWorld) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device gpu = tt::Device::cuda(world.local_rank());
  world.init_cuda();
  EXPECT_NE(world.cuda_backend_name(), "");
  for (int tp : ch13_test::tp_sizes(world.world_size())) {
    SCOPED_TRACE("tp=" + std::to_string(tp));
    tt::tp::ProcessGrid grid = tt::tp::ProcessGrid::dp_tp(world, tp);
    for (const char* dim : {"dp", "tp"}) {
      SCOPED_TRACE(dim);
      tt::dist::ProcessGroup& g = grid.group(dim);
      EXPECT_EQ(g.cuda_backend_name(), "nccl (ncclCommSplit)");
      // The world ranks of the group, in group order, gathered on the GPU.
      Tensor mine = tt::full({1}, static_cast<double>(world.rank()), {tt::DType::kFloat32, gpu});
      Tensor all = tt::empty({g.world_size(), 1}, {tt::DType::kFloat32, gpu});
      g.all_gather(all, mine);
      const std::vector<float> got = all.to(tt::Device::cpu()).contiguous().to_vector<float>();
      std::vector<int> coord = grid.coordinates_of(world.rank());
      const int d = std::string(dim) == "dp" ? 0 : 1;
      double want_sum = 0;
      for (int k = 0; k < g.world_size(); ++k) {
        coord[d] = k;
        EXPECT_EQ(got[k], static_cast<float>(grid.rank_of(coord))) << "member " << k;
        want_sum += grid.rank_of(coord);
      }
      g.all_reduce(mine);
      EXPECT_EQ(mine.to(tt::Device::cpu()).item(), want_sum);
    }
    // The groups keep their communicators when the world frees its own (what the strategies do
    // once their grids are split).
    world.release_cuda();
    EXPECT_EQ(world.cuda_backend_name(), "");
    Tensor one = tt::full({1}, 1.0, {tt::DType::kFloat32, gpu});
    grid.group("tp").all_reduce(one);
    EXPECT_EQ(one.to(tt::Device::cpu()).item(), static_cast<double>(tp));
    world.init_cuda();  // for the next tp's grid
  }
}

// Activation memory of the bf16 GPT-2 on GPUs: the bytes the CUDA allocator holds between
// forward and backward (the tensors kept for backward, and the loss), per rank, at every tp of
// the world, plain TP against SP keeping the gathered inputs and SP with the re-gather. Printed
// for the README (the measure is the ratio at tp = 4); the test checks the order.
// L = 2, C = 256 (4 heads of 64, the bf16 FlashAttention's size), B = 8, T = 256.
TEST(Ch13_TensorParallelCudaMpi, SequenceParallelActivationMemoryOnGpus) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  SKIP_WITHOUT_NCCL(world);
  const tt::Device gpu = tt::Device::cuda(world.local_rank());
  const tt::gpt2::GPT2Config config{.block_size = 256,
                                    .vocab_size = 1000,
                                    .padded_vocab_size = 1024,
                                    .n_layer = 2,
                                    .n_head = 4,
                                    .n_embd = 256};
  std::mt19937_64 gen(11);
  std::vector<int64_t> ids(8 * 256);
  for (auto& t : ids) t = static_cast<int64_t>(gen() % 1000);
  const Tensor idx = tt::from_vector(ids, {8, 256}).to(gpu);
  tt::Allocator& alloc = tt::backend_for(tt::DeviceType::kCUDA).allocator(world.local_rank());
  ch13_test::for_each_tp([&](int tp, tt::dist::ProcessGroup& group) {
    auto held = [&](const tt::tp::TpOptions& options) {
      tt::gpt2::GPT2 model(config, 3);
      model.to(gpu);
      model.set_ops(tt::gpt2::model_ops("bf16"));
      tt::tp::TensorParallelGPT2 split(model, group, options);
      const auto before = static_cast<int64_t>(alloc.stats().allocated);
      Tensor loss = model.loss(idx, idx);
      const auto bytes = static_cast<int64_t>(alloc.stats().allocated) - before;
      tt::autograd::backward(loss);
      return bytes;
    };
    const int64_t plain = held({});
    const int64_t keep = held({.sequence_parallel = true, .regather_in_backward = false});
    const int64_t regather = held({.sequence_parallel = true, .regather_in_backward = true});
    if (world.rank() == 0) {
      std::printf(
          "[ activations ] bf16 on GPUs, tp=%d: %.2f MiB per rank; sequence parallel %.2f MiB "
          "(%.2fx less), with the re-gather %.2f MiB (%.2fx less)\n",
          tp, plain / 1048576.0, keep / 1048576.0, static_cast<double>(plain) / keep,
          regather / 1048576.0, static_cast<double>(plain) / regather);
    }
    if (tp > 1) {
      EXPECT_LT(keep, plain);
      EXPECT_LT(regather, keep) << "the re-gather keeps 1/tp of each column-parallel input";
    }
  });
}

}  // namespace
