// "A step without waste" (tt/fast_step.h): the sync-free training step equals chapter 09's
// train_step bit for bit (CPU and CUDA), keeps chapter 09's non-finite policy, and on CUDA a
// steady-state step makes no cudaMalloc and no host synchronization until its one read.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/fast_step.h"
#include "tt/functional.h"
#include "tt/gpt2_ops.h"
#include "tt/testing.h"
#include "tt/train.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#include "tt/cuda_matmul.h"
#include "tt/cuda_ops.h"
#endif

namespace tt::fast {
namespace {

gpt2::GPT2Config small_config() {
  return {.block_size = 32,
          .vocab_size = 96,
          .padded_vocab_size = 128,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 64};
}

/// A batch of B rows of T tokens in [0, V) (seeded), on the CPU.
Batch random_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> x(static_cast<std::size_t>(B * T)), y(x.size());
  for (auto& t : x) t = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(V));
  for (auto& t : y) t = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(V));
  return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

optim::AdamW make_adamw(const gpt2::GPT2& model) {
  optim::AdamWOptions o;
  o.lr = 1e-3;
  o.beta2 = 0.95;
  return optim::AdamW(gpt2::param_groups(model, 0.1), o);
}

/// Bitwise equality of every parameter of a and b (named in the failure).
void expect_same_parameters(const gpt2::GPT2& a, const gpt2::GPT2& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const std::vector<float> x = pa[i].second.to(Device::cpu()).to_vector<float>();
    const std::vector<float> y = pb[i].second.to(Device::cpu()).to_vector<float>();
    ASSERT_EQ(x.size(), y.size());
    std::size_t diff = 0;
    for (std::size_t k = 0; k < x.size(); ++k) diff += (x[k] != y[k]) ? 1 : 0;
    EXPECT_EQ(diff, 0u) << pa[i].first << ": " << diff << " of " << x.size()
                        << " values differ from chapter 09's step";
  }
}

/// Three steps of chapter 09's train_step and of fast::train_step from the same model: the same
/// losses, norms and parameters, bit for bit. Clipping is active (max_grad_norm 0.05) and two
/// micro-batches are accumulated.
void compare_with_chapter_09(Device device) {
  gpt2::GPT2 a(small_config(), 5), b(small_config(), 5);
  a.to(device);
  b.to(device);
  optim::AdamW opt_a = make_adamw(a), opt_b = make_adamw(b);
  const gpt2::TrainStepOptions options{2, 0.05};
  uint64_t seed_a = 10, seed_b = 10;
  for (int step = 0; step < 3; ++step) {
    const gpt2::TrainStepResult ra = gpt2::train_step(
        a, opt_a, [&] { return random_batch(2, 16, 96, seed_a++); }, options);
    const gpt2::TrainStepResult rb = fast::train_step(
        b, opt_b, [&] { return random_batch(2, 16, 96, seed_b++); }, options);
    EXPECT_EQ(rb.loss, ra.loss) << "step " << step;
    EXPECT_EQ(rb.grad_norm, ra.grad_norm) << "step " << step;
    EXPECT_GT(ra.grad_norm, 0.05) << "step " << step << ": clipping should be active";
    EXPECT_TRUE(rb.finite);
    EXPECT_EQ(rb.tokens, ra.tokens);
  }
  EXPECT_EQ(opt_b.step_count(), 3);
  expect_same_parameters(a, b);
}

/// A loss made NaN: no update, the step count is unchanged, finite = false (chapter 09's policy).
void nan_step_changes_nothing(Device device) {
  gpt2::GPT2 m(small_config(), 6);
  m.to(device);
  optim::AdamW opt = make_adamw(m);
  const Batch batch = random_batch(2, 16, 96, 3);
  const auto good = fast::train_step(m, opt, [&] { return batch; }, {1, 1.0});
  ASSERT_TRUE(good.finite);
  std::vector<Tensor> before;
  for (const Tensor& p : m.parameters()) before.push_back(p.to(Device::cpu()).clone());
  const PendingStep pending = train_step_async(
      opt,
      [&](const Batch& b) { return mul(m.loss(b.inputs.to(device), b.targets.to(device)), NAN); },
      [&] { return batch; }, {1, 1.0});
  const gpt2::TrainStepResult r = finish_step(opt, pending);
  EXPECT_FALSE(r.finite);
  EXPECT_TRUE(std::isnan(r.loss));
  EXPECT_EQ(opt.step_count(), 1) << "the skipped step must not count";
  const auto params = m.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].to(Device::cpu()).to_vector<float>(), before[i].to_vector<float>())
        << "parameter " << i << " changed in a skipped step";
  }
  // The next finite step is chapter 09's second step (t = 2 in the bias correction).
  EXPECT_TRUE(fast::train_step(m, opt, [&] { return batch; }, {1, 1.0}).finite);
  EXPECT_EQ(opt.step_count(), 2);
}

/// Global L2 norm of the gradients of `params` (float64 on the host).
double grad_norm_of(const std::vector<Tensor>& params) {
  double sumsq = 0;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    for (float g : p.grad().to(Device::cpu()).to_vector<float>()) sumsq += double(g) * g;
  }
  return std::sqrt(sumsq);
}

/// forward_backward_async alone: the status holds the mean loss, the norm before clipping and a
/// zero skip flag, on the loss's device; the gradients are clipped to max_norm; the parameters
/// and the step count are untouched (the update is not part of it).
void status_holds_loss_norm_and_flag(Device device) {
  gpt2::GPT2 m(small_config(), 13), twin(small_config(), 13);
  m.to(device);
  twin.to(device);
  optim::AdamW opt = make_adamw(m);
  const std::vector<Batch> batches = {random_batch(2, 16, 96, 30), random_batch(2, 16, 96, 31)};
  // The unclipped reference: the same two micro-batches, each loss / 2, no clipping.
  double mean_loss = 0;
  for (const Batch& b : batches) {
    const Tensor loss = twin.loss(b.inputs.to(device), b.targets.to(device));
    mean_loss += loss.item() * 0.5;
    autograd::backward(mul(loss, 0.5));
  }
  const double norm = grad_norm_of(twin.parameters());
  const double max_norm = 0.01;
  ASSERT_GT(norm, 10 * max_norm) << "the test needs clipping to be active";
  std::vector<Tensor> before;
  for (const Tensor& p : m.parameters()) before.push_back(p.to(Device::cpu()).clone());
  std::size_t next = 0;
  const PendingStep pending = forward_backward_async(
      opt, [&](const Batch& b) { return m.loss(b.inputs.to(device), b.targets.to(device)); },
      [&] { return batches[next++]; }, {2, max_norm});
  EXPECT_EQ(next, 2u) << "one batch per micro-batch";
  EXPECT_EQ(pending.tokens, 2 * 2 * 16);
  ASSERT_TRUE(pending.status.defined());
  EXPECT_EQ(pending.status.shape(), Shape({3}));
  EXPECT_EQ(pending.status.dtype(), DType::kFloat64);
  EXPECT_EQ(pending.status.device(), device) << "the status stays where the loss is";
  const std::vector<double> st = pending.status.to(Device::cpu()).to_vector<double>();
  EXPECT_NEAR(st[0], mean_loss, 1e-12 * std::abs(mean_loss)) << "status[0]: the mean loss";
  EXPECT_NEAR(st[1], norm, 1e-5 * norm) << "status[1]: the norm before clipping";
  EXPECT_EQ(st[2], 0.0) << "status[2]: a finite step is not skipped";
  EXPECT_NEAR(grad_norm_of(m.parameters()), max_norm, 1e-4 * max_norm)
      << "the gradients must be clipped to max_grad_norm";
  EXPECT_EQ(opt.step_count(), 0) << "forward_backward_async makes no update";
  const auto params = m.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].to(Device::cpu()).to_vector<float>(), before[i].to_vector<float>())
        << "parameter " << i << " changed: the update is not part of forward_backward_async";
  }
}

TEST(Ch10_9_FastStep, EqualsChapter09TrainStepBitForBit) {
  compare_with_chapter_09(Device::cpu());
}

TEST(Ch10_9_FastStep, NonFiniteLossSkipsTheUpdate) {
  nan_step_changes_nothing(Device::cpu());
}

TEST(Ch10_9_FastStep, StatusHoldsTheMeanLossTheNormAndTheFlag) {
  status_holds_loss_norm_and_flag(Device::cpu());
}

TEST(Ch10_9_FastStep, RejectsBadArguments) {
  gpt2::GPT2 m(small_config(), 7);
  optim::AdamW opt = make_adamw(m);
  const Batch batch = random_batch(2, 8, 96, 4);
  EXPECT_TT_ERROR(fast::train_step(m, opt, [&] { return batch; }, {0, 1.0}), "grad_accum_steps");
  EXPECT_TT_ERROR(
      train_step_async(
          opt, [&](const Batch&) { return zeros({2}); }, [&] { return batch; }, {1, 1.0}),
      "one-element");
  EXPECT_TT_ERROR(finish_step(opt, PendingStep{}), "no status");
  optim::SGD sgd(m.parameters(), {});
  EXPECT_TT_ERROR(fast::train_step(m, sgd, [&] { return batch; }, {1, 1.0}), "SGD", "step_unless");
  EXPECT_TT_ERROR(opt.rewind_step_count(), "rewind_step_count");
}

#if TT_WITH_CUDA

TEST(Ch10_9_FastStepCuda, EqualsChapter09TrainStepBitForBit) {
  TT_SKIP_IF_NO_CUDA();
  compare_with_chapter_09(Device::cuda(0));
}

TEST(Ch10_9_FastStepCuda, NonFiniteLossSkipsTheUpdate) {
  TT_SKIP_IF_NO_CUDA();
  nan_step_changes_nothing(Device::cuda(0));
}

TEST(Ch10_9_FastStepCuda, StatusHoldsTheMeanLossTheNormAndTheFlag) {
  TT_SKIP_IF_NO_CUDA();
  status_holds_loss_norm_and_flag(Device::cuda(0));
}

/// Installs the ModelOps set `ops` on `model` ("reference": chapter 09's compositions).
void use_ops(gpt2::GPT2& model, const std::string& ops) {
  model.set_ops(gpt2::model_ops(ops));
}

/// A steady-state step with the ModelOps set `ops` neither waits for the GPU nor calls
/// cudaMalloc (only finish_step waits).
void steady_state_step_is_sync_and_malloc_free(const std::string& ops) {
  cuda::AllowTf32Guard tf32(true);
  gpt2::GPT2 model(small_config(), 8);
  use_ops(model, ops);
  model.to(Device::cuda(0));
  optim::AdamW opt = make_adamw(model);
  std::vector<Batch> batches;
  for (uint64_t s = 0; s < 6; ++s) batches.push_back(random_batch(4, 32, 96, 100 + s));
  std::size_t next = 0;
  const auto next_batch = [&] { return batches[next++ % batches.size()]; };
  const gpt2::TrainStepOptions options{2, 1.0};
  for (int warmup = 0; warmup < 2; ++warmup) {
    ASSERT_TRUE(fast::train_step(model, opt, next_batch, options).finite);
  }
  for (int step = 0; step < 3; ++step) {
    cuda::reset_peak_memory_stats(0);
    cuda::reset_host_sync_count();
    const AllocatorStats before = cuda::memory_stats(0);
    const PendingStep pending = train_step_async(model, opt, next_batch, options);
    const AllocatorStats after = cuda::memory_stats(0);
    EXPECT_EQ(cuda::host_sync_count(), 0)
        << "steady step " << step << ": the host waited for the GPU inside the step";
    EXPECT_EQ(after.num_system_allocs - before.num_system_allocs, 0u)
        << "steady step " << step << ": cudaMalloc inside the step";
    EXPECT_GT(after.num_allocs, before.num_allocs) << "the counters must see the step's tensors";
    EXPECT_GT(after.peak_allocated, before.allocated);
    const gpt2::TrainStepResult r = finish_step(opt, pending);
    EXPECT_TRUE(r.finite);
    EXPECT_GT(r.loss, 0.0);
    EXPECT_LE(cuda::host_sync_count(), 2) << "finish_step reads the status and the index record";
    EXPECT_GE(cuda::host_sync_count(), 1) << "finish_step must wait for the results";
  }
}

TEST(Ch10_9_FastStepCuda, SteadyStateStepMakesNoCudaMallocAndNoHostSync) {
  TT_SKIP_IF_NO_CUDA();
  if (!cuda::caching_enabled()) {
    GTEST_SKIP() << "the caching allocator is off (TT_CUDA_CACHING=0): every tensor is a "
                    "cudaMalloc and a cudaFree then";
  }
  steady_state_step_is_sync_and_malloc_free("reference");
}

TEST(Ch10_9_FastStepCuda, SteadyFastOpsStepMakesNoCudaMallocAndNoHostSync) {
  TT_SKIP_IF_NO_CUDA();
  if (!cuda::caching_enabled()) GTEST_SKIP() << "the caching allocator is off (TT_CUDA_CACHING=0)";
  steady_state_step_is_sync_and_malloc_free("fast");
}

TEST(Ch10_9_FastStepCuda, OutOfRangeTokenIsReportedAtTheEnd) {
  TT_SKIP_IF_NO_CUDA();
  gpt2::GPT2 model(small_config(), 9);
  model.to(Device::cuda(0));
  optim::AdamW opt = make_adamw(model);
  Batch batch = random_batch(2, 8, 96, 5);
  batch.targets.data<int64_t>()[3] = 500;  // beyond V = 96
  const PendingStep pending = train_step_async(model, opt, [&] { return batch; }, {1, 1.0});
  EXPECT_TT_ERROR(finish_step(opt, pending), "check_index_errors", "500");
  EXPECT_NO_THROW(cuda::check_index_errors(0)) << "the record must be cleared after the report";
}

/// The graphed step with the ModelOps set `ops` equals the eager one bit for bit, and its
/// replays neither wait nor allocate.
void graphed_step_equals_eager(const std::string& ops) {
  cuda::AllowTf32Guard tf32(true);
  gpt2::GPT2 a(small_config(), 11), b(small_config(), 11);
  use_ops(a, ops);
  use_ops(b, ops);
  a.to(Device::cuda(0));
  b.to(Device::cuda(0));
  optim::AdamW opt_a = make_adamw(a), opt_b = make_adamw(b);
  const gpt2::TrainStepOptions options{2, 0.05};
  std::vector<Batch> batches;
  for (uint64_t s = 0; s < 4; ++s) batches.push_back(random_batch(2, 16, 96, 200 + s));
  std::size_t na = 0, nb = 0;
  GraphedTrainStep graphed(b, opt_b, 2, 16, options, 2);
  for (int step = 0; step < 6; ++step) {
    const gpt2::TrainStepResult ra = fast::train_step(
        a, opt_a, [&] { return batches[na++ % batches.size()]; }, options);
    cuda::reset_host_sync_count();
    const AllocatorStats before = cuda::memory_stats(0);
    const PendingStep pending = graphed.step([&] { return batches[nb++ % batches.size()]; });
    if (step >= 3) {  // warm-up: steps 0, 1; capture: step 2; replays after
      EXPECT_TRUE(graphed.captured());
      EXPECT_EQ(cuda::host_sync_count(), 0) << "replayed step " << step << " waited";
      EXPECT_EQ(cuda::memory_stats(0).num_system_allocs, before.num_system_allocs)
          << "replayed step " << step << " called cudaMalloc";
    }
    const gpt2::TrainStepResult rb = finish_step(opt_b, pending);
    EXPECT_EQ(rb.loss, ra.loss) << "step " << step;
    EXPECT_EQ(rb.grad_norm, ra.grad_norm) << "step " << step;
    EXPECT_EQ(rb.tokens, ra.tokens);
  }
  EXPECT_GT(graphed.graph_nodes(), 50u);
  EXPECT_EQ(opt_b.step_count(), 6);
  expect_same_parameters(a, b);
}

TEST(Ch10_10_GraphedStepCuda, GraphedStepEqualsTheEagerStepAndNeitherWaitsNorAllocates) {
  TT_SKIP_IF_NO_CUDA();
  if (!cuda::caching_enabled()) GTEST_SKIP() << "the caching allocator is off (TT_CUDA_CACHING=0)";
  graphed_step_equals_eager("reference");
}

TEST(Ch10_10_GraphedStepCuda, GraphedFastOpsStepEqualsTheEagerStep) {
  TT_SKIP_IF_NO_CUDA();
  if (!cuda::caching_enabled()) GTEST_SKIP() << "the caching allocator is off (TT_CUDA_CACHING=0)";
  graphed_step_equals_eager("fast");
}

/// The warm-up steps run eagerly (nothing captured), the next step captures once, and later
/// steps replay that graph (the node count stays) on the new tokens copied into its buffers.
TEST(Ch10_10_GraphedStepCuda, WarmsUpThenCapturesOnceAndReplaysOnNewBatches) {
  TT_SKIP_IF_NO_CUDA();
  if (!cuda::caching_enabled()) GTEST_SKIP() << "the caching allocator is off (TT_CUDA_CACHING=0)";
  gpt2::GPT2 m(small_config(), 14);
  m.to(Device::cuda(0));
  optim::AdamW opt = make_adamw(m);
  const std::vector<Batch> batches = {random_batch(2, 16, 96, 40), random_batch(2, 16, 96, 41)};
  std::size_t next = 0;
  const auto next_batch = [&] { return batches[next++ % batches.size()]; };
  GraphedTrainStep graphed(m, opt, 2, 16, {1, 1.0}, /*warmup=*/1);
  EXPECT_FALSE(graphed.captured());
  EXPECT_TRUE(finish_step(opt, graphed.step(next_batch)).finite);
  EXPECT_FALSE(graphed.captured()) << "the warm-up step must run eagerly";
  EXPECT_EQ(graphed.graph_nodes(), 0u);
  std::vector<double> losses;
  std::size_t nodes = 0;
  for (int step = 1; step < 5; ++step) {
    const gpt2::TrainStepResult r = finish_step(opt, graphed.step(next_batch));
    EXPECT_TRUE(r.finite) << "step " << step;
    EXPECT_TRUE(graphed.captured()) << "step " << step;
    if (step == 1) nodes = graphed.graph_nodes();
    EXPECT_EQ(graphed.graph_nodes(), nodes) << "step " << step << " captured again";
    losses.push_back(r.loss);
  }
  EXPECT_GT(nodes, 10u);
  EXPECT_EQ(next, 5u) << "one batch per step";
  EXPECT_EQ(opt.step_count(), 5);
  // Steps 1..4 alternate between the two batches: a replay that ignored the new tokens would
  // repeat the captured loss; one that skipped the update would see the same loss again.
  EXPECT_NE(losses[1], losses[0]) << "the replay must read the tokens copied for its step";
  EXPECT_NE(losses[2], losses[0]) << "the same batch two updates later must give another loss";
}

TEST(Ch10_10_GraphedStepCuda, GraphedStepRejectsACpuModelAndOtherShapes) {
  TT_SKIP_IF_NO_CUDA();
  gpt2::GPT2 cpu_model(small_config(), 12);
  optim::AdamW opt_cpu = make_adamw(cpu_model);
  EXPECT_TT_ERROR(GraphedTrainStep(cpu_model, opt_cpu, 2, 16, {1, 1.0}), "GraphedTrainStep", "cpu");
  gpt2::GPT2 m(small_config(), 12);
  m.to(Device::cuda(0));
  optim::AdamW opt = make_adamw(m);
  GraphedTrainStep graphed(m, opt, 2, 16, {1, 1.0});
  EXPECT_TT_ERROR(graphed.step([] { return random_batch(2, 8, 96, 1); }), "GraphedTrainStep",
                  "[2, 16]");
}

#endif  // TT_WITH_CUDA

}  // namespace
}  // namespace tt::fast
