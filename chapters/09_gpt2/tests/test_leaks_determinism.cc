// Leaks and determinism of GPT-2 training on the CPU.
//  - 1,000 forward-only steps (under no_grad) and 100 training steps keep the number of live
//    tensors (TensorImpl), live autograd nodes and CPU allocator bytes in use exactly flat
//    after a warm-up.
//  - Two runs with the same seed and thread count give bit-identical losses and parameters.
//  - 1 and 2 threads give bit-identical results while every matrix product has a small K (see
//    "Determinism" in the chapter README: above Eigen's multi-threaded K block, 1 and 2 threads
//    sum K in different blocks; Ch04_Determinism.EigenGemm... shows the mechanism).
#include <cstdint>
#include <cstring>
#include <vector>

#include "ch09_test_util.h"
#include "tt/autograd.h"
#include "tt/backend.h"
#include "tt/cpu_gemm.h"
#include "tt/parallel.h"
#include "tt/train.h"

namespace tt::gpt2 {
namespace {

using test09::fixed_batch;
using test09::tiny_config;

/// What must not grow: live tensors, live graph nodes, CPU bytes handed out and not returned.
struct LiveCounts {
  int64_t tensors = 0, nodes = 0;
  std::size_t cpu_bytes = 0;
  bool operator==(const LiveCounts&) const = default;
};

LiveCounts live_counts() {
  return {TensorImpl::live_count(), autograd::Node::live_count(),
          backend_for(DeviceType::kCPU).allocator(0).stats().allocated};
}

std::ostream& operator<<(std::ostream& os, const LiveCounts& c) {
  return os << "{tensors " << c.tensors << ", nodes " << c.nodes << ", cpu bytes " << c.cpu_bytes
            << "}";
}

TEST(Ch09_Leaks, ForwardAndTrainingStepsKeepTensorsNodesAndBytesFlat) {
  // One thread: the counts do not depend on it (kernels allocate no tensors inside parallel
  // regions), and 3,000 tiny OpenMP regions per second are slow on a loaded 2-core machine.
  const ScopedNumThreads one_thread(1);
  GPT2 model(tiny_config(), 11);
  optim::AdamW opt(param_groups(model, 0.1), {});
  const Batch batch = fixed_batch(2, 8, 50, 3);
  auto forward_only = [&] {
    autograd::NoGradGuard no_grad;
    return model.loss(batch.inputs, batch.targets).item();
  };
  auto train = [&] { return train_step(model, opt, [&] { return batch; }, {1, 1.0}).loss; };
  // Warm-up: the first training step creates every parameter's .grad (kept between steps) and
  // the optimizer's first state; after it, every step must return what it takes.
  forward_only();
  const double first = train();
  const LiveCounts warm = live_counts();
  for (int i = 0; i < 1000; ++i) forward_only();
  EXPECT_EQ(live_counts(), warm) << "after 1000 forward-only steps";
  double last = 0;
  for (int i = 0; i < 100; ++i) last = train();
  EXPECT_EQ(live_counts(), warm) << "after 100 training steps";
  EXPECT_LT(last, first - 0.1);  // the steps really trained (on one batch: it is memorized)
  EXPECT_EQ(opt.step_count(), 101);
}

/// Losses of `steps` AdamW steps of a freshly initialized `config` model, and its parameters.
struct TrainedRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
};

TrainedRun train_run(const GPT2Config& config, int64_t B, int64_t T, int steps) {
  GPT2 model(config, 21);
  optim::AdamW opt(param_groups(model, 0.1), {.lr = 1e-2});
  TrainedRun run;
  for (int s = 0; s < steps; ++s) {
    const Batch b = fixed_batch(B, T, config.vocab_size, 500 + static_cast<uint64_t>(s));
    run.losses.push_back(train_step(model, opt, [&] { return b; }, {1, 1.0}).loss);
  }
  for (const Tensor& p : model.parameters()) run.params.push_back(p.to_vector<float>());
  return run;
}

/// True when the two runs agree bit for bit (memcmp: -0.0 vs 0.0 or NaN payloads would count).
::testing::AssertionResult bitwise_equal(const TrainedRun& a, const TrainedRun& b) {
  if (a.losses.size() != b.losses.size() ||
      std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(double)) != 0) {
    return ::testing::AssertionFailure() << "losses differ: " << ::testing::PrintToString(a.losses)
                                         << " vs " << ::testing::PrintToString(b.losses);
  }
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    if (a.params[i].size() != b.params[i].size() ||
        std::memcmp(a.params[i].data(), b.params[i].data(), a.params[i].size() * sizeof(float))) {
      return ::testing::AssertionFailure() << "parameter " << i << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

/// A model whose products (at B = 2, T = 32) are large enough for Eigen to use 2 threads (e.g.
/// the qkv projection [64, 64] @ [64, 192]) and for the row-parallel kernels to split their
/// rows, while every product keeps K <= 256 (C = 64, 4C = 256, B*T = 64, V = 96), below the K
/// block of Eigen's multi-threaded GEMM (288 on AVX2 CPUs with a 32 KB L1, 320 with AVX-512).
GPT2Config small_config() {
  return {.block_size = 64,
          .vocab_size = 96,
          .padded_vocab_size = 128,
          .n_layer = 2,
          .n_head = 4,
          .n_embd = 64};
}

TEST(Ch09_Determinism, SameSeedAndThreadCountGiveBitIdenticalRuns) {
  const TrainedRun a = train_run(small_config(), 2, 32, 2);
  const TrainedRun b = train_run(small_config(), 2, 32, 2);
  EXPECT_TRUE(bitwise_equal(a, b));
}

TEST(Ch09_Determinism, OneAndTwoThreadsGiveBitIdenticalRunsWhileEveryKIsSmall) {
  const TrainedRun one = [] {
    const ScopedNumThreads threads(1);
    return train_run(small_config(), 2, 32, 2);
  }();
  const TrainedRun two = [] {
    const ScopedNumThreads threads(2);
    return train_run(small_config(), 2, 32, 2);
  }();
  EXPECT_TRUE(bitwise_equal(one, two));
}

TEST(Ch09_Determinism, OneAndTwoThreadsGiveBitIdenticalRunsForAnyKWithTheFmaGemm) {
  // The default "matmul" on FMA hardware is chapter 04's gemm_fma: one FMA chain per element
  // whatever the split between threads, so here K goes past Eigen's blocks of at most 320 (4C =
  // 384, and B*T = 512 in the weight gradients) and the runs still agree bit for bit.
  if (!cpu::gemm_fma_is_native()) {
    GTEST_SKIP() << "\"matmul\" is Eigen's GEMM in this build (no FMA instructions)";
  }
  GPT2Config config = small_config();
  config.n_embd = 96;
  config.n_head = 4;
  const TrainedRun one = [&] {
    const ScopedNumThreads threads(1);
    return train_run(config, 8, 64, 2);
  }();
  const TrainedRun two = [&] {
    const ScopedNumThreads threads(2);
    return train_run(config, 8, 64, 2);
  }();
  EXPECT_TRUE(bitwise_equal(one, two));
}

}  // namespace
}  // namespace tt::gpt2
