// Chapter 15's LLaMA with context parallelism (tt/context_parallel.h,
// llama_context_parallel_loss) against one process: RoPE at each shard's global positions,
// grouped-query attention through the ring, the loss of the shard. At the world size of the run
// (one process: CP 1; mpirun -np 2 and -np 4: CP 2 and CP 4), zigzag and contiguous, the mean
// of the ranks' losses equals one process's loss and the ranks' averaged gradients equal its
// gradients within 1e-5 (float32; the ring sums the softmax in another order). The model is
// chapter 15's tiny one (L 2, C 32, NH 4, NKV 2: two query heads per key/value head), T 16 = 8
// zigzag chunks at CP 4. And the real train_llama --cp 2 (and DP2 x CP2 on 4 ranks) under mpirun
// logs the losses of one process; --tp and --cp with --tp are refused on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
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

// The real train_llama with chapter 16's strategy "cp" on a tiny generated dataset (GQA: 4 query
// and 2 key/value heads). Not an "Mpi" test: it starts mpirun itself, from a plain process.
TEST(Ch16_TrainLlamaCp, ContextParallelLogsTheLossesOfOneProcess) {
  if (!dist::built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job";
  tt::test09::TempDir dir;
  tt::test09::write_tiny_dataset(dir.file("data"));
  // B rows a replica: the global batch is 8 rows of 8 tokens in every layout.
  auto train_app = [&](int np, const std::string& extra, const std::string& out, int B = 8) {
    const std::string args = "--data '" + dir.file("data") + "' --out '" + dir.file(out) +
                             "' --device cpu --threads 1 --layers 2 --heads 4 --n-kv-head 2 " +
                             "--channels 32 --T 8 --B " + std::to_string(B) +
                             " --total-batch 64 --steps 6 --warmup 1 --eval-every 3 " +
                             "--eval-batches 1 --sample-tokens 2 --lr 3e-3 " + extra;
    return ch12_test::run_mpi_job(np, ch12_test::program_path("train_llama"), args);
  };
  const ch12_test::JobResult one = train_app(1, "", "one");
  ASSERT_EQ(one.status, 0) << one.output;
  // CP2 on 2 ranks, DP2 x CP2 on 4: within 2e-5 relative of one process (float32; the ring sums
  // the softmax in another order). The sanitizer build runs 2-rank jobs only (CI's time).
  for (const auto& [np, out] : {std::tuple<int, std::string>{2, "cp2"}, {4, "dp2cp2"}}) {
    if (np > 2 && tt::testing::kSanitized) continue;
    const int B = np == 4 ? 4 : 8;
    const std::string trace = dir.file(out + ".json");
    const ch12_test::JobResult job =
        train_app(np, "--cp 2 --trace '" + trace + "' --trace-steps 1", out, B);
    ASSERT_EQ(job.status, 0) << job.output;
    EXPECT_NE(job.output.find("context parallel (cp=2, zigzag)"), std::string::npos) << job.output;
    // Equal losses alone cannot tell a split from every rank computing whole sequences (the
    // average of equal gradients is the same): the trace shows each rank embedding B rows of 4
    // of the 8 positions (chapter 12's trace: the ops and their shapes).
    const std::string ops = tt::test09::read_bytes(trace);
    const std::string shard = "\"shapes\": \"[" + std::to_string(B) + ", 4, 32] [257, 32] [" +
                              std::to_string(B) + ", 4]\"";
    EXPECT_NE(ops.find(shard), std::string::npos) << out << ": no embedding of " << shard;
    EXPECT_TRUE(
        tt::test09::logs_match(dir.file(out) + "/train.csv", dir.file("one") + "/train.csv", 2e-5));
  }
  // What a LLaMA cannot train with yet: refused by name (every rank exits; no hang).
  const ch12_test::JobResult tp = train_app(2, "--tp 2", "tp2");
  EXPECT_NE(tp.status, 0);
  EXPECT_NE(tp.output.find("parallel strategy 'tp' does not train a LLaMA"), std::string::npos)
      << tp.output;
  if (!tt::testing::kSanitized) {
    const ch12_test::JobResult cptp = train_app(4, "--cp 2 --tp 2", "cp2tp2");
    EXPECT_NE(cptp.status, 0);
    EXPECT_NE(cptp.output.find("a LLaMA has no tensor parallelism"), std::string::npos)
        << cptp.output;
  }
}

}  // namespace
