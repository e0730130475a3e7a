// GPT-2 (chapter 09's model) trained as a pipeline: every schedule at PP = world size gives the
// losses, gradient norms, gradients and parameters of one process with gradient accumulation
// (fp32, within 1e-5); DP x PP the same; each rank holds only its stages' parameters (the
// others' memory released), and gathers the whole model on rank 0 only for a checkpoint; the
// validation loss through the stages is one process's; a checkpoint of a pipeline resumes at
// any pipeline size; misuse is refused on every rank before any collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "ch14_test_util.h"
#include "tt/backend.h"
#include "tt/checkpoint.h"
#include "tt/dist.h"
#include "tt/parallel.h"
#include "tt/pipeline.h"
#include "tt/process_grid.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"
#include "tt/train.h"

namespace {

using tt::Batch;
using tt::Tensor;
using tt::gpt2::GPT2;
using tt::gpt2::GPT2Config;
using tt::pp::PipelineOptions;
using tt::pp::PipelineTrainer;
using tt::pp::ScheduleKind;
namespace dist = tt::dist;

constexpr int64_t kB = 2, kT = 8;
constexpr uint64_t kSeed = 7;
constexpr double kTol = 1e-5;
// Steps of the equality runs: 20; 4 under the sanitizers (the same schedules and code paths at a
// fifth of the time; the numerics over 20 steps are the normal build's test).
constexpr int kSteps = tt::testing::steps_unless_sanitized(20, 4);

// Four blocks (one per stage at p = 4); `layers` more for interleaving (p x v stages).
GPT2Config config(int64_t layers = 4) {
  GPT2Config c = tt::test09::tiny_config();
  c.n_layer = layers;
  return c;
}

tt::optim::AdamWOptions adam() {
  tt::optim::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.1;
  return o;
}

// Micro-batch i of a run is fixed_batch(seed 100 + i); a data-parallel replica d of `dp` takes
// micro-batches d*m .. d*m+m-1 of each step's dp*m.
class Stream {
 public:
  explicit Stream(int m = 1, int dp = 1, int d = 0, int64_t skip_steps = 0)
      : m_(m), dp_(dp), d_(d), step_(skip_steps) {}
  Batch operator()() {
    const int64_t i = step_ * dp_ * m_ + d_ * m_ + j_;
    if (++j_ == m_) {
      j_ = 0;
      ++step_;
    }
    return tt::test09::fixed_batch(kB, kT, config().vocab_size, 100 + static_cast<uint64_t>(i));
  }

 private:
  int m_, dp_, d_, j_ = 0;
  int64_t step_;
};

// One process, gradient accumulation over `accum` micro-batches per step.
struct OneProcess {
  std::unique_ptr<GPT2> model;
  std::unique_ptr<tt::optim::AdamW> optimizer;
  std::vector<double> losses, norms;
  std::vector<std::pair<std::string, Tensor>> first_grads;  // after the first step (clipped)
};

OneProcess one_process(int steps, int accum, int64_t layers = 4) {
  OneProcess r;
  r.model = std::make_unique<GPT2>(config(layers), kSeed);
  r.optimizer = std::make_unique<tt::optim::AdamW>(tt::gpt2::param_groups(*r.model, 0.1), adam());
  Stream data(accum);
  for (int s = 0; s < steps; ++s) {
    const auto res = tt::gpt2::train_step(*r.model, *r.optimizer, std::ref(data),
                                          {.grad_accum_steps = accum, .max_grad_norm = 1.0});
    r.losses.push_back(res.loss);
    r.norms.push_back(res.grad_norm);
    if (s == 0) {
      for (const auto& [name, t] : r.model->named_parameters()) {
        r.first_grads.emplace_back(name, t.grad().clone());
      }
    }
  }
  return r;
}

double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const Tensor x = a.detach().to(tt::Device::cpu()).contiguous();
  const Tensor y = b.detach().to(tt::Device::cpu()).contiguous();
  double d = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    d = std::max(d, std::abs(double(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return d;
}

bool holds(const std::vector<Tensor>& params, const Tensor& t) {
  return std::any_of(params.begin(), params.end(), [&](const Tensor& p) { return p.is_same(t); });
}

// After a pipeline's steps: the rank holds only its stages' parameters (and the LayerNorms at
// their ends; the others are empty tensors), each within `tol` of one process's (`ref`); fewer
// elements than the whole model when there are several stages. The state gathered on pp rank
// `pp_rank` 0 is `ref`'s whole model; the other ranks receive nothing.
void expect_same_parameters(PipelineTrainer& trainer, int pp_rank, const GPT2& model,
                            const GPT2& ref, double tol = kTol) {
  const std::vector<Tensor> mine = trainer.stages().parameters();
  const std::vector<Tensor> boundary = trainer.stages().boundary_parameters();
  int64_t held = 0, stages = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    held += t.numel();
    if (holds(boundary, t)) stages += ref.parameter(name).numel();
    if (!holds(mine, t)) {
      if (!holds(boundary, t)) {
        EXPECT_EQ(t.numel(), 0) << name << " belongs to another stage";
      }
      continue;
    }
    stages += ref.parameter(name).numel();
    EXPECT_LE(max_diff(t, ref.parameter(name)), tol) << name;
  }
  EXPECT_EQ(held, stages);
  if (trainer.shape().stages > 1) {
    EXPECT_LT(held, ref.num_parameters());
  }
  const tt::nn::StateDict whole = trainer.gather_state(nullptr);
  if (pp_rank != 0) {
    EXPECT_TRUE(whole.empty());
    return;
  }
  ASSERT_EQ(whole.size(), ref.named_parameters().size());
  for (const auto& [key, t] : whole) {
    EXPECT_EQ(t.device(), tt::Device::cpu()) << key;
    EXPECT_LE(max_diff(t, ref.parameter(key.substr(6))), tol) << key;  // "model.<name>"
  }
}

// Trains `steps` steps of `kind` with m micro-batches (v chunks) on a pipeline of all the ranks
// of the world and compares every step with one process: loss, gradient norm, the rank's
// gradients after the first step, and at the end every parameter. On `device` (a GPU: the
// pipeline through NCCL, its timeline from CUDA events) within `tol` of one CPU process.
void expect_equal_to_one_process(ScheduleKind kind, int m, int v, int steps,
                                 tt::Device device = tt::Device::cpu(), double tol = kTol) {
  // Matrices of 16 columns: threads only add overhead (results do not depend on their number).
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  SCOPED_TRACE(std::string(tt::pp::schedule_kind_name(kind)) + " m=" + std::to_string(m) +
               " v=" + std::to_string(v) + " p=" + std::to_string(world.world_size()));
  const int64_t layers = std::max<int64_t>(4, world.world_size() * v);
  const OneProcess ref = one_process(steps, m, layers);
  GPT2 model(config(layers), kSeed);
  model.to(device);
  PipelineOptions options;
  options.schedule = kind;
  options.micro_batches = m;
  options.chunks = v;
  options.timeline = device.is_cuda();
  PipelineTrainer trainer(model, world, nullptr, options, kB, kT);
  tt::optim::AdamW optimizer(trainer.param_groups(0.1), adam());
  Stream data(m);
  for (int s = 0; s < steps; ++s) {
    const auto r = trainer.step(optimizer, std::ref(data));
    ASSERT_TRUE(r.finite);
    EXPECT_NEAR(r.loss, ref.losses[s], tol) << "step " << s;
    EXPECT_NEAR(r.grad_norm, ref.norms[s], tol * std::max(1.0, ref.norms[s])) << "step " << s;
    EXPECT_EQ(r.tokens, m * kB * kT);
    if (options.timeline) {
      const tt::pp::Timeline& t = trainer.last().timeline;
      EXPECT_GT(t.span_ms, 0.0);
      EXPECT_GT(t.busy_ms(), 0.0);
      EXPECT_GE(t.bubble(), 0.0);
      EXPECT_LT(t.bubble(), 1.0);
    }
    if (s > 0) continue;
    const std::vector<Tensor> mine = trainer.stages().parameters();
    for (const auto& [name, grad] : ref.first_grads) {
      const Tensor t = model.parameter(name);
      if (std::none_of(mine.begin(), mine.end(), [&](const Tensor& x) { return x.is_same(t); })) {
        continue;  // another rank's
      }
      ASSERT_TRUE(t.grad().defined()) << name;
      EXPECT_LE(max_diff(t.grad(), grad), tol) << name;
    }
  }
  expect_same_parameters(trainer, world.rank(), model, *ref.model, tol);
  world.barrier();
}

TEST(Ch14_Pipeline, OneFOneBEqualsOneProcessMpi) {
  expect_equal_to_one_process(ScheduleKind::kOneFOneB, 4, 1, kSteps);
  expect_equal_to_one_process(ScheduleKind::kOneFOneB, 8, 1, 2);
}

TEST(Ch14_Pipeline, AfabEqualsOneProcessMpi) {
  expect_equal_to_one_process(ScheduleKind::kAfab, 4, 1, kSteps);
  expect_equal_to_one_process(ScheduleKind::kAfab, 8, 1, 2);
}

TEST(Ch14_Pipeline, InterleavedEqualsOneProcessMultiRankMpi) {
  // Interleaving needs p >= 2: registered under mpirun only.
  const int p = dist::world().world_size();
  if (p == 1) GTEST_SKIP() << "interleaving needs 2+ ranks (ctest runs this under mpirun only)";
  expect_equal_to_one_process(ScheduleKind::kInterleaved, 2 * p, 2, 3);
}

TEST(Ch14_PipelineCudaMpi, OneFOneBOnGpusMatchesOneCpuProcess) {
  // One GPU per rank; activations and gradients through NCCL (batch_send_recv), the timeline
  // from CUDA events. GPU kernels sum in other orders than the CPU's: 1e-4.
  SKIP_WITHOUT_NCCL(dist::world());
  const tt::Device gpu = tt::Device::cuda(dist::world().local_rank());
  expect_equal_to_one_process(ScheduleKind::kOneFOneB, 4, 1, 5, gpu, 1e-4);
  expect_equal_to_one_process(ScheduleKind::kAfab, 4, 1, 2, gpu, 1e-4);
  if (dist::world().world_size() >= 2) {
    expect_equal_to_one_process(ScheduleKind::kInterleaved, 2 * dist::world().world_size(), 2, 2,
                                gpu, 1e-4);
  }
}

TEST(Ch14_Pipeline, DataTimesPipelineMpi) {
  // 4 ranks: DP2 x PP2 (pp innermost); 2 ranks: DP2 x PP1; 1 rank: DP1 x PP1.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size(), dp = n >= 2 ? 2 : 1, pp = n / dp, m = 4, steps = 4;
  tt::tp::ProcessGrid grid(world, {{"dp", dp}, {"pp", pp}});
  const OneProcess ref = one_process(steps, dp * m);
  GPT2 model(config(), kSeed);
  PipelineOptions options;
  options.micro_batches = m;
  PipelineTrainer trainer(model, grid.group("pp"), &grid.group("dp"), options, kB, kT);
  tt::optim::AdamW optimizer(trainer.param_groups(0.1), adam());
  Stream data(m, dp, grid.coordinate("dp"));
  for (int s = 0; s < steps; ++s) {
    const auto r = trainer.step(optimizer, std::ref(data));
    EXPECT_NEAR(r.loss, ref.losses[s], kTol) << "step " << s;
    EXPECT_NEAR(r.grad_norm, ref.norms[s], kTol * std::max(1.0, ref.norms[s])) << "step " << s;
    EXPECT_EQ(r.tokens, dp * m * kB * kT);
  }
  expect_same_parameters(trainer, grid.coordinate("pp"), model, *ref.model);
  world.barrier();
}

TEST(Ch14_Pipeline, RankHoldsOnlyItsStagesMpi) {
  // PP = world size (2 and 4 under mpirun): the trainer releases the memory of the other
  // stages' parameters; gradients and AdamW moments exist for this rank's stages only.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const int p = world.world_size();
  const GPT2 whole(config(), kSeed);
  GPT2 model(config(), kSeed);
  const tt::Allocator& cpu = tt::backend_for(tt::DeviceType::kCPU).allocator(0);
  const std::size_t before = cpu.stats().allocated;
  PipelineOptions options;
  options.micro_batches = 4;
  PipelineTrainer trainer(model, world, nullptr, options, kB, kT);
  const std::vector<Tensor> mine = trainer.stages().parameters();
  const std::vector<Tensor> boundary = trainer.stages().boundary_parameters();
  int64_t released = 0, own = 0, kept = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    const int64_t n = whole.parameter(name).numel();
    (holds(mine, t) ? own : holds(boundary, t) ? kept : released) += n;
    EXPECT_EQ(t.numel(), holds(mine, t) || holds(boundary, t) ? n : 0) << name;
    EXPECT_EQ(t.dim(), whole.parameter(name).dim()) << name;  // param_groups sorts by it
  }
  // The boundary LayerNorms: 2C numbers per stage that ends before the last block.
  EXPECT_EQ(kept, world.rank() + 1 < p ? 2 * config().n_embd : 0);
  EXPECT_EQ(model.num_parameters(), own + kept);
  EXPECT_EQ(own + kept + released, whole.num_parameters());
  if (p > 1) {
    EXPECT_GT(released, 0);
  }
  // The released bytes went back to the allocator (this thread allocated nothing meanwhile
  // that it still holds beyond the trainer's small bookkeeping).
  const auto freed = static_cast<int64_t>(before) - static_cast<int64_t>(cpu.stats().allocated);
  EXPECT_GE(freed + 64 * 1024, released * static_cast<int64_t>(sizeof(float))) << "p=" << p;
  tt::optim::AdamW optimizer(trainer.param_groups(0.1), adam());
  Stream data(options.micro_batches);
  trainer.step(optimizer, std::ref(data));
  int64_t grads = 0, moments = 0;
  for (const Tensor& t : model.parameters()) grads += t.grad().defined() ? t.grad().numel() : 0;
  for (const auto& [key, t] : optimizer.state_dict()) {
    if (key.starts_with("state.")) moments += t.numel();
  }
  EXPECT_EQ(grads, own);
  EXPECT_EQ(moments, 2 * own);
  world.barrier();
}

TEST(Ch14_Pipeline, EvaluatesThroughTheStagesMpi) {
  // The validation loss of every schedule's stages (v = 2 interleaved on 2+ ranks) is one
  // process's on the same batches, on every rank.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const int p = world.world_size(), v = p > 1 ? 2 : 1;
  const int64_t layers = std::max<int64_t>(4, p * v);
  GPT2 ref(config(layers), kSeed);
  Stream ref_data(1);
  const double want = tt::gpt2::evaluate(ref, std::ref(ref_data), 3);
  GPT2 model(config(layers), kSeed);
  PipelineOptions options;
  options.schedule = v > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
  options.chunks = v;
  options.micro_batches = 2 * p;
  PipelineTrainer trainer(model, world, nullptr, options, kB, kT);
  Stream data(1);
  EXPECT_NEAR(trainer.evaluate(std::ref(data), 3), want, kTol);
  world.barrier();
}

TEST(Ch14_Pipeline, CheckpointResumesAtAnyPipelineSizeMpi) {
  // Train 3 steps at PP = 2 (PP = 1 in a world of one), save one one-process checkpoint,
  // resume for 2 steps at every pipeline size that divides the world (1, 2, 4): always the
  // one-process run's 5 steps.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size(), m = 4, saved_pp = std::min(n, 2);
  const OneProcess ref = one_process(5, m);
  tt::testing::TempDir dir;
  const std::string path = tt::test14::rank0_path(world, dir.file("pp.ckpt"));
  {
    // Pipelines of saved_pp consecutive ranks, each training the same model on the same data.
    std::unique_ptr<dist::ProcessGroup> pp = world.split(world.rank() / saved_pp, world.rank());
    GPT2 model(config(), kSeed);
    PipelineOptions options;
    options.micro_batches = m;
    PipelineTrainer trainer(model, *pp, nullptr, options, kB, kT);
    tt::optim::AdamW optimizer(trainer.param_groups(0.1), adam());
    Stream data(m);
    for (int s = 0; s < 3; ++s) trainer.step(optimizer, std::ref(data));
    // The whole state on each pipeline's rank 0 (every pipeline trained the same): world rank
    // 0 writes it.
    const tt::nn::StateDict state = trainer.gather_state(&optimizer);
    EXPECT_EQ(state.empty(), pp->rank() != 0);
    if (world.rank() == 0) tt::ckpt::save(path, state);
    world.barrier();
  }
  for (int q = 1; q <= n; q *= 2) {
    if (n % q != 0) continue;
    SCOPED_TRACE("resumed at PP=" + std::to_string(q));
    std::unique_ptr<dist::ProcessGroup> group = world.split(world.rank() / q, world.rank());
    GPT2 model(config(), /*seed=*/99);  // other weights: the checkpoint must replace them all
    PipelineOptions options;
    options.micro_batches = m;
    PipelineTrainer trainer(model, *group, nullptr, options, kB, kT);
    tt::optim::AdamW optimizer(trainer.param_groups(0.1), adam());
    trainer.load_state(tt::ckpt::load(path), &optimizer);  // this rank's stages only
    EXPECT_EQ(optimizer.step_count(), 3);
    Stream data(m, 1, 0, /*skip_steps=*/3);
    for (int s = 3; s < 5; ++s) {
      EXPECT_NEAR(trainer.step(optimizer, std::ref(data)).loss, ref.losses[s], kTol)
          << "step " << s;
    }
    expect_same_parameters(trainer, group->rank(), model, *ref.model);
  }
  // One process (chapter 05's loader) reads the pipeline's checkpoint too.
  GPT2 model(config(), /*seed=*/99);
  tt::optim::AdamW full(tt::gpt2::param_groups(model, 0.1), adam());
  tt::ckpt::load_checkpoint(path, model, &full);
  EXPECT_EQ(full.step_count(), 3);
  world.barrier();
}

TEST(Ch14_Pipeline, MisuseIsRefusedOnEveryRankMpi) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size();
  const auto message = [&](const GPT2Config& c, PipelineOptions o) {
    GPT2 model(c, kSeed);
    try {
      PipelineTrainer trainer(model, world, nullptr, o, kB, kT);
    } catch (const tt::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // More virtual stages than blocks.
  GPT2Config two = config();
  two.n_layer = 2;
  PipelineOptions inter;
  inter.schedule = ScheduleKind::kInterleaved;
  inter.chunks = 2 + n;  // p * v > 2 blocks on every world size
  inter.micro_batches = 2 * n;
  const std::string layers = message(two, inter);
  if (n == 1) {
    EXPECT_NE(layers.find("needs p >= 2"), std::string::npos) << layers;
  } else {
    EXPECT_NE(layers.find("more stages than layers"), std::string::npos) << layers;
  }
  // Interleaving with m not a multiple of p.
  if (n >= 2) {
    PipelineOptions odd;
    odd.schedule = ScheduleKind::kInterleaved;
    odd.chunks = 2;
    odd.micro_batches = n + 1;
    const std::string m = message(config(), odd);
    EXPECT_NE(m.find("must be a multiple of the number of stages"), std::string::npos) << m;
  }
  // Every rank threw before any collective: the world still works.
  world.barrier();
}

}  // namespace
