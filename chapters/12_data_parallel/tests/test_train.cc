// Chapter 09's training step through chapter 12's strategies ("ddp", "zero1") on a tiny GPT-2:
// N ranks must train exactly like one process on the same global batch (DDP), ZeRO-1 like DDP,
// gradient accumulation under no_sync like the large batch, and a ZeRO-1 checkpoint must resume
// exactly (also as DDP). Runs with any world size (plain, and mpirun -np 2 / 4).
//
// Tolerances. One process sums the loss gradient over all global rows in one pass; N ranks sum
// their rows, then the all-reduce sums the N partial gradients: another float32 summation
// order, so parameters differ by rounding (~1e-7 relative per step), which AdamW's m/sqrt(v)
// amplifies where a gradient is near 0: 1e-5 absolute + 1e-4 relative after 3 steps (as the
// ZeRO-1 test of the MLP). ZeRO-1 and DDP average the same per-rank gradients: with 1 or 2 ranks
// the reduction is a single a+b (commutative, so every algorithm gives the same bits) and, with
// clipping off, the updates are elementwise and identical, so they must match BIT FOR BIT; with
// 4 ranks MPI's all-reduce and reduce-scatter may add in different orders, and clipping by a
// norm summed per shard differs from the whole-gradient norm in the last bits: the same 1e-5 +
// 1e-4 tolerance. Except the attention's KEY BIAS: its true gradient is exactly zero (softmax is
// shift-invariant), so its computed gradient is rounding noise, which AdamW's m/sqrt(v) turns
// into updates of any size up to ~lr: two summation orders give unrelated noise there (1e-5 in
// one build, more with other compiler flags), so it is only held to lr per step.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ch12_test_util.h"
#include "tt/gpt2.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace tt::dist {
namespace {

namespace fs = std::filesystem;
using gpt2::ParallelStrategy;

constexpr int64_t kT = 8, kV = 64;
/// Rows of a global batch (one optimizer step): divisible by 1, 2, 4 ranks times 2 micro-batches.
constexpr int64_t kGlobalRows = 8;
constexpr int kSteps = 3;
constexpr double kLr = 1e-2;  ///< AdamW learning rate

/// The tiny GPT-2 of these tests: L2 C32 V64.
gpt2::GPT2Config tiny_config() {
  return {.block_size = kT,
          .vocab_size = kV,
          .padded_vocab_size = kV,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 32};
}

/// The global batch of step `step`: kGlobalRows rows of seeded random tokens, on every rank.
Batch global_batch(int64_t step) {
  Generator gen(5000 + static_cast<uint64_t>(step));
  std::vector<int64_t> tokens(static_cast<std::size_t>(kGlobalRows * (kT + 1)));
  for (int64_t& t : tokens) t = static_cast<int64_t>(gen.next_u64() % kV);
  const Tensor all = from_vector<int64_t>(tokens, {kGlobalRows, kT + 1});
  return {all.narrow(1, 0, kT).contiguous(), all.narrow(1, 1, kT).contiguous()};
}

/// What a run leaves: the parameters, and the bytes this rank communicated.
struct TrainRun {
  std::unique_ptr<gpt2::GPT2> model;
  std::unique_ptr<optim::Optimizer> opt;
  int64_t bytes = 0;
  std::vector<double> losses;
};

/// Builds the model on `device` (seed: each rank may start elsewhere; the strategy broadcasts
/// rank 0's).
TrainRun start(ParallelStrategy& par, uint64_t seed, Device device = Device::cpu()) {
  TrainRun run;
  run.model = std::make_unique<gpt2::GPT2>(tiny_config(), seed);
  run.model->to(device);
  const optim::AdamWOptions ao{.lr = kLr, .beta1 = 0.9, .beta2 = 0.95};
  run.opt = par.make_optimizer(*run.model, gpt2::param_groups(*run.model, 0.1), ao);
  return run;
}

/// Steps [first, last) of training: step s's global batch is global_batch(s), cut into `accum`
/// micro-batches of kGlobalRows/accum rows, of which this rank takes its 1/N share.
void train(ParallelStrategy& par, TrainRun& run, int64_t accum, double clip, int first, int last) {
  const int64_t n = par.world_size();
  const int64_t micro_rows = kGlobalRows / accum, rows = micro_rows / n;
  gpt2::TrainStepOptions so;
  so.grad_accum_steps = accum;
  so.max_grad_norm = clip;
  so.parallel = &par;
  const int64_t before = world().bytes_communicated();
  for (int step = first; step < last; ++step) {
    const Batch global = global_batch(step);
    int64_t micro = 0;
    auto next = [&] {
      const int64_t begin = micro++ * micro_rows + par.rank() * rows;
      return Batch{global.inputs.narrow(0, begin, rows).contiguous(),
                   global.targets.narrow(0, begin, rows).contiguous()};
    };
    const gpt2::TrainStepResult r = gpt2::train_step(*run.model, *run.opt, next, so);
    EXPECT_TRUE(r.finite);
    EXPECT_EQ(r.tokens, kGlobalRows * kT) << "tokens count every rank's";
    run.losses.push_back(r.loss);
  }
  run.bytes += world().bytes_communicated() - before;
}

TrainRun trained(ParallelStrategy& par, int64_t accum, double clip, uint64_t seed = 7,
                 Device device = Device::cpu()) {
  TrainRun run = start(par, seed, device);
  train(par, run, accum, clip, 0, kSteps);
  return run;
}

/// The parameters of `run`, copied to the host (expect_identical_across_ranks compares bytes).
std::vector<Tensor> host_parameters(const TrainRun& run) {
  std::vector<Tensor> out;
  for (const Tensor& p : run.model->parameters()) out.push_back(p.detach().to(Device::cpu()));
  return out;
}

/// Bit-for-bit equality of two parameter lists.
void expect_bit_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].detach().to(Device::cpu()).contiguous();
    const Tensor y = b[i].detach().to(Device::cpu()).contiguous();
    ASSERT_EQ(x.numel(), y.numel());
    EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.numel()) * 4), 0)
        << "parameter " << i << " differs";
  }
}

/// EXPECTs two trained tiny GPT-2s to agree within 1e-5 abs + 1e-4 rel (see the file comment),
/// except the attention's key bias (the middle third of every c_attn.bias), whose true gradient
/// is zero: its update is AdamW on rounding noise, |m/sqrt(v)| <= 1, so it only has to stay
/// within lr per step.
void expect_models_near(const TrainRun& actual, const TrainRun& expected) {
  const auto a = actual.model->named_parameters(), e = expected.model->named_parameters();
  ASSERT_EQ(a.size(), e.size());
  const int64_t C = tiny_config().n_embd;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].second.detach(), y = e[i].second.detach();
    if (!a[i].first.ends_with("attn.c_attn.bias")) {
      EXPECT_TENSOR_NEAR(x, y, 1e-5, 1e-4) << a[i].first;
      continue;
    }
    EXPECT_TENSOR_NEAR(x.narrow(0, 0, C), y.narrow(0, 0, C), 1e-5, 1e-4) << a[i].first << " (q)";
    EXPECT_TENSOR_NEAR(x.narrow(0, C, C), y.narrow(0, C, C), kLr * kSteps, 0)
        << a[i].first << " (k)";
    EXPECT_TENSOR_NEAR(x.narrow(0, 2 * C, C), y.narrow(0, 2 * C, C), 1e-5, 1e-4)
        << a[i].first << " (v)";
  }
}

TEST(Ch12_TrainMpi, DdpEqualsOneProcessOnTheGlobalBatch) {
  ProcessGroup& g = world();
  auto ddp = gpt2::make_parallel_strategy("ddp");
  EXPECT_EQ(ddp->world_size(), g.world_size());
  // Every rank starts from another initialisation: the broadcast from rank 0 must fix it.
  const TrainRun dist = trained(*ddp, 1, 1.0, 7 + 100 * static_cast<uint64_t>(g.rank()));
  ch12_test::expect_identical_across_ranks(g, dist.model->parameters());

  const TrainRun one = trained(gpt2::single_process(), 1, 1.0);
  expect_models_near(dist, one);
  for (int s = 0; s < kSteps; ++s) {  // the logged loss is the mean over the ranks
    EXPECT_NEAR(dist.losses[static_cast<std::size_t>(s)], one.losses[static_cast<std::size_t>(s)],
                1e-5)
        << "step " << s;
  }
}

// DDP on GPUs: each rank trains on its own, cuda:local_rank, and the Reducer averages the CUDA
// gradients through NCCL. With one rank that average is the identity: the run must equal the
// one-process CUDA run bit for bit; with more, as on the CPU (see the file comment).
TEST(Ch12_TrainCudaMpi, DdpOnGpusEqualsOneProcessOnAGpu) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  const Device gpu = Device::cuda(g.local_rank());
  auto ddp = gpt2::make_parallel_strategy("ddp");
  const TrainRun dist = trained(*ddp, 2, 1.0, 7 + 100 * static_cast<uint64_t>(g.rank()), gpu);
  EXPECT_EQ(dist.model->device(), gpu);
  ch12_test::expect_identical_across_ranks(g, host_parameters(dist));
  const TrainRun one = trained(gpt2::single_process(), 2, 1.0, 7, gpu);
  if (g.world_size() == 1) {
    expect_bit_equal(dist.model->parameters(), one.model->parameters());
    EXPECT_EQ(dist.losses, one.losses);
  } else {
    expect_models_near(dist, one);
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(dist.losses[static_cast<std::size_t>(s)], one.losses[static_cast<std::size_t>(s)],
                  1e-5)
          << "step " << s;
    }
  }
}

TEST(Ch12_TrainMpi, AccumulationUnderNoSyncEqualsTheLargeBatch) {
  auto ddp = gpt2::make_parallel_strategy("ddp");
  const TrainRun accum = trained(*ddp, 2, 1.0);
  const TrainRun large = trained(*ddp, 1, 1.0);
  expect_models_near(accum, large);
  const TrainRun one = trained(gpt2::single_process(), 1, 1.0);
  expect_models_near(accum, one);
  // no_sync: the first micro-batch's backward communicates nothing, so two micro-batches cost
  // what one does (one all-reduce of the gradients and one of the loss, per step).
  EXPECT_EQ(accum.bytes, large.bytes);
  const int64_t P = accum.model->num_parameters();
  EXPECT_EQ(large.bytes, kSteps * (P * 4 + 8)) << "one gradient and one loss all-reduce per step";
}

/// "zero1" trains like "ddp" on `device` (the CPU, or this rank's GPU), with and without
/// clipping; its optimizer state is 1/N of DDP's.
void expect_zero1_equals_ddp(ProcessGroup& g, Device device) {
  auto ddp = gpt2::make_parallel_strategy("ddp");
  auto zero = gpt2::make_parallel_strategy("zero1");
  for (double clip : {0.0, 1.0}) {
    SCOPED_TRACE("max_grad_norm " + std::to_string(clip) + " on " + device.str());
    const TrainRun d = trained(*ddp, 2, clip, 7, device);
    const TrainRun z = trained(*zero, 2, clip, 7 + 100 * static_cast<uint64_t>(g.rank()), device);
    EXPECT_EQ(z.model->device(), device);
    ch12_test::expect_identical_across_ranks(g, host_parameters(z));
    if (clip == 0.0 && g.world_size() <= 2) {
      expect_bit_equal(z.model->parameters(), d.model->parameters());
    } else {
      expect_models_near(z, d);
    }
    // Optimizer state: AdamW's 8 bytes per parameter, over the ranks for ZeRO-1.
    const int64_t P = d.model->num_parameters(), N = g.world_size();
    EXPECT_EQ(ddp->optimizer_state_bytes(*d.opt), 8 * P);
    EXPECT_EQ(zero->optimizer_state_bytes(*z.opt), 8 * ((P + N - 1) / N));
  }
}

TEST(Ch12_TrainMpi, Zero1EqualsDdp) {
  expect_zero1_equals_ddp(world(), Device::cpu());
}

// ZeRO-1 on GPUs (ZeroAdamW's shards on cuda:local_rank, NCCL): the same as on the CPU.
TEST(Ch12_TrainCudaMpi, Zero1OnGpusEqualsDdpOnGpus) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  expect_zero1_equals_ddp(g, Device::cuda(g.local_rank()));
}

/// A "zero1" run on `device` saved after 2 steps and resumed (as "zero1", and as "ddp") takes
/// the last step exactly like the uninterrupted run.
void expect_zero1_checkpoint_resumes_exactly(ProcessGroup& g, Device device) {
  // One file name for every rank: rank 0's pid and the device type (not device.str(): the
  // ranks' GPUs differ, cuda:0, cuda:1, ..., and every rank must read rank 0's file).
  const Tensor pid = full({1}, static_cast<double>(::getpid()), {.dtype = DType::kInt64});
  g.broadcast(pid, 0);
  const fs::path dir = fs::temp_directory_path() /
                       ("tt_ch12_train_" + std::to_string(pid.at<int64_t>({0})) + "_" +
                        (device.is_cuda() ? "cuda" : "cpu"));
  if (g.rank() == 0) fs::create_directories(dir);
  g.barrier();
  const std::string path = (dir / "zero1.ttckpt").string();

  auto zero = gpt2::make_parallel_strategy("zero1");
  const TrainRun full_run = trained(*zero, 1, 0.0, 7, device);
  TrainRun first = start(*zero, 7, device);
  train(*zero, first, 1, 0.0, 0, 2);
  zero->save_checkpoint(path, *first.model, *first.opt);  // gathers the shards to rank 0

  // A fresh ZeRO-1 run (another init) resumes from the file and takes the last step.
  TrainRun resumed = start(*zero, 99, device);
  zero->load_checkpoint(path, *resumed.model, *resumed.opt);
  EXPECT_EQ(resumed.opt->step_count(), 2);
  train(*zero, resumed, 1, 0.0, 2, kSteps);
  expect_bit_equal(resumed.model->parameters(), full_run.model->parameters());

  // The file is AdamW's format with the full moments: DDP resumes from it too.
  auto ddp = gpt2::make_parallel_strategy("ddp");
  TrainRun as_ddp = start(*ddp, 99, device);
  ddp->load_checkpoint(path, *as_ddp.model, *as_ddp.opt);
  train(*ddp, as_ddp, 1, 0.0, 2, kSteps);
  if (g.world_size() <= 2) {  // clipping off: see the file comment
    expect_bit_equal(as_ddp.model->parameters(), full_run.model->parameters());
  } else {
    expect_models_near(as_ddp, full_run);
  }
  g.barrier();
  if (g.rank() == 0) fs::remove_all(dir);
}

TEST(Ch12_TrainMpi, Zero1CheckpointResumesExactlyAlsoAsDdp) {
  expect_zero1_checkpoint_resumes_exactly(world(), Device::cpu());
}

// On GPUs the moments are gathered on the GPU, written from rank 0 and read back into the
// shards on each rank's GPU.
TEST(Ch12_TrainCudaMpi, Zero1CheckpointOnGpusResumesExactlyAlsoAsDdp) {
  ProcessGroup& g = world();
  SKIP_WITHOUT_NCCL(g);
  expect_zero1_checkpoint_resumes_exactly(g, Device::cuda(g.local_rank()));
}

TEST(Ch12_Train, StrategiesAreRegisteredByName) {
  const std::vector<std::string> names = gpt2::parallel_strategy_names();
  for (const char* name : {"single", "ddp", "zero1"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_TT_ERROR(gpt2::make_parallel_strategy("fsdp"), "no strategy 'fsdp'", "ddp", "zero1");
}

}  // namespace
}  // namespace tt::dist
