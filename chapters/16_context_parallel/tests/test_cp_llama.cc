// Chapter 15's LLaMA with context parallelism (tt/context_parallel.h,
// llama_context_parallel_loss) against one process: RoPE at each shard's global positions,
// grouped-query attention through the ring, the loss of the shard. At the world size of the run
// (one process: CP 1; mpirun -np 2 and -np 4: CP 2 and CP 4), zigzag and contiguous, the mean
// of the ranks' losses equals one process's loss and the ranks' averaged gradients equal its
// gradients within 1e-5 (float32; the ring sums the softmax in another order). The model is
// chapter 15's tiny one (L 2, C 32, NH 4, NKV 2: two query heads per key/value head), T 16 = 8
// zigzag chunks at CP 4.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "../../15_llama/tests/ch15_test_util.h"
#include "tt/autograd.h"
#include "tt/context_parallel.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/llama.h"
#include "tt/testing.h"

namespace {

using tt::Tensor;
namespace cp = tt::cp;
namespace dist = tt::dist;
namespace llama = tt::llama;

constexpr int64_t kB = 2, kT = 16;

// Token ids [kB, kT] from `seed`, the same on every rank.
Tensor ids(uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> v(static_cast<std::size_t>(kB * kT));
  for (auto& t : v) t = static_cast<int64_t>(gen() % tt::ch15::tiny_config().vocab_size);
  return tt::from_vector(v, {kB, kT});
}

TEST(Ch16_ContextParallelLlama, LossAndGradientsMatchOneProcessMpi) {
  dist::ProcessGroup& world = dist::world();
  const Tensor idx = ids(5), targets = ids(6);
  llama::Llama reference(tt::ch15::tiny_config(), 7);
  const Tensor want = reference.loss(idx, targets);
  tt::autograd::backward(want);
  const auto ref = reference.named_parameters();
  for (const cp::Layout layout : {cp::Layout::kZigzag, cp::Layout::kContiguous}) {
    const std::string what = std::string(cp::layout_name(layout)) + " over " +
                             std::to_string(world.world_size()) + " ranks";
    llama::Llama model(tt::ch15::tiny_config(), 7);
    const Tensor loss = cp::llama_context_parallel_loss(model, idx, targets, world, layout);
    tt::autograd::backward(loss);
    // The ranks' mean loss and averaged gradients are the whole rows'.
    const Tensor mean = loss.detach().clone();
    world.all_reduce(mean, tt::dist::ReduceOp::kAvg);
    EXPECT_NEAR(mean.item(), want.item(), 1e-5) << what;
    const auto got = model.named_parameters();
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const Tensor g = got[i].second.grad().clone();
      world.all_reduce(g, tt::dist::ReduceOp::kAvg);
      EXPECT_TENSOR_NEAR(g, ref[i].second.grad(), 1e-5, 0) << got[i].first << ", " << what;
    }
    // The model attends by itself again afterwards: its plain loss is the reference's.
    EXPECT_NEAR(model.loss(idx, targets).item(), want.item(), 1e-6) << what;
  }
  // A length the layout cannot shard is refused before anything is sent, on every rank.
  llama::Llama model(tt::ch15::tiny_config(), 7);
  const Tensor odd = tt::zeros({kB, kT + 1}, {.dtype = tt::DType::kInt64});
  EXPECT_TT_ERROR(cp::llama_context_parallel_loss(model, odd, odd, world),
                  "cp::llama_context_parallel_loss", "[2, 17]", "zigzag");
  world.barrier();
}

}  // namespace
