// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/fast_step.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 10, "A step without waste": chapter 09's training step with its decisions (clipping,
// the non-finite check) made on the device and its results read once, at the end (exercise
// ch10.9), and that step captured as a CUDA graph (exercise ch10.10); see tt/fast_step.h.
#include "tt/fast_step.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/todo.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#endif

namespace tt::fast {

PendingStep forward_backward_async(optim::Optimizer& optimizer,
                                   const std::function<Tensor(const Batch&)>& loss_of,
                                   const std::function<Batch()>& next_batch,
                                   const gpt2::TrainStepOptions& options) {
  TT_CHECK(options.grad_accum_steps >= 1,
           "fast::train_step_async: grad_accum_steps must be >= 1, got ", options.grad_accum_steps);
#if TT_WITH_CUDA
  // Token ids are checked by a kernel; finish_step reads the record.
  cuda::IndexChecksGuard device_checks(cuda::IndexChecks::kDevice);
#endif
  (void)optimizer, (void)loss_of, (void)next_batch;
  TT_TODO("ch10.9",
          "forward_backward_async: the gradients of the mean loss over grad_accum_steps "
          "micro-batches from next_batch (from zero), clipped to max_grad_norm (<= 0: not "
          "clipped), and a PendingStep whose status is a float64 [3] tensor on the loss's device "
          "{mean loss, norm before clipping, skip = loss or norm not finite} and whose tokens "
          "count the inputs; bit for bit chapter 09's train_step; nothing read on the host (no "
          "host synchronization, no update); throws when loss_of returns more than one element "
          "or a gradient is not contiguous on the loss's device");
}

PendingStep train_step_async(optim::Optimizer& optimizer,
                             const std::function<Tensor(const Batch&)>& loss_of,
                             const std::function<Batch()>& next_batch,
                             const gpt2::TrainStepOptions& options) {
  PendingStep pending = forward_backward_async(optimizer, loss_of, next_batch, options);
  optimizer.step_unless(pending.status.select(0, 2));  // no update where skip != 0
  return pending;
}

PendingStep train_step_async(gpt2::GPT2& model, optim::Optimizer& optimizer,
                             const std::function<Batch()>& next_batch,
                             const gpt2::TrainStepOptions& options) {
  const Device device = model.device();
  return train_step_async(
      optimizer,
      [&](const Batch& b) { return model.loss(b.inputs.to(device), b.targets.to(device)); },
      next_batch, options);
}

gpt2::TrainStepResult finish_step(optim::Optimizer& optimizer, const PendingStep& pending) {
  TT_CHECK(pending.status.defined() && pending.status.numel() == 3,
           "fast::finish_step: the pending step holds no status (was it made by "
           "train_step_async?)");
  const std::vector<double> s = pending.status.to(Device::cpu()).to_vector<double>();
#if TT_WITH_CUDA
  if (pending.status.device().is_cuda()) cuda::check_index_errors(pending.status.device().index);
#endif
  gpt2::TrainStepResult r;
  r.loss = s[0];
  r.grad_norm = s[1];
  r.finite = s[2] == 0.0;
  r.tokens = pending.tokens;
  if (!r.finite) optimizer.rewind_step_count();  // the kernels made no update
  return r;
}

gpt2::TrainStepResult train_step(gpt2::GPT2& model, optim::Optimizer& optimizer,
                                 const std::function<Batch()>& next_batch,
                                 const gpt2::TrainStepOptions& options) {
  return finish_step(optimizer, train_step_async(model, optimizer, next_batch, options));
}

// ----- GraphedTrainStep ------------------------------------------------------------------------

struct GraphedTrainStep::Impl {
  Impl(gpt2::GPT2& m, optim::Optimizer& o, int64_t b, int64_t t, const gpt2::TrainStepOptions& opts,
       int w)
      : model(m), optimizer(o), B(b), T(t), options(opts), warmup(w) {}

  gpt2::GPT2& model;
  optim::Optimizer& optimizer;
  int64_t B, T;
  gpt2::TrainStepOptions options;
  int warmup;
  int steps = 0;
  std::vector<Batch> buffers;  // one fixed [B, T] pair per micro-batch, on the model's device
  PendingStep captured_pending;
#if TT_WITH_CUDA
  std::unique_ptr<cuda::CudaGraph> graph;
#endif

  // forward_backward_async on the fixed buffers.
  PendingStep run_on_buffers() {
    std::size_t next = 0;
    return forward_backward_async(
        optimizer, [&](const Batch& b) { return model.loss(b.inputs, b.targets); },
        [&] { return buffers[next++]; }, options);
  }
};

GraphedTrainStep::GraphedTrainStep(gpt2::GPT2& model, optim::Optimizer& optimizer, int64_t B,
                                   int64_t T, const gpt2::TrainStepOptions& options, int warmup)
    : impl_(std::make_unique<Impl>(model, optimizer, B, T, options, warmup)) {
#if TT_WITH_CUDA
  const Device device = model.device();
  TT_CHECK(device.is_cuda(),
           "fast::GraphedTrainStep: CUDA graphs need the model on a CUDA "
           "device, got ",
           device.str());
  TT_CHECK(B >= 1 && T >= 1 && options.grad_accum_steps >= 1 && warmup >= 0,
           "fast::GraphedTrainStep: needs B, T, grad_accum_steps >= 1 and warmup >= 0, got B=", B,
           " T=", T, " grad_accum_steps=", options.grad_accum_steps, " warmup=", warmup);
  for (int64_t m = 0; m < options.grad_accum_steps; ++m) {
    impl_->buffers.push_back(
        {zeros({B, T}, {DType::kInt64, device}), zeros({B, T}, {DType::kInt64, device})});
  }
  impl_->graph = std::make_unique<cuda::CudaGraph>(device.index);
#else
  TT_CHECK(false, "fast::GraphedTrainStep: this build has no CUDA (CUDA graphs need a GPU)");
#endif
}

GraphedTrainStep::~GraphedTrainStep() = default;

PendingStep GraphedTrainStep::step(const std::function<Batch()>& next_batch) {
  Impl& s = *impl_;
  std::vector<Batch> batches;  // one per micro-batch, checked before anything runs
  for (const Batch& buffer : s.buffers) {
    batches.push_back(next_batch());
    const Batch& b = batches.back();
    TT_CHECK(
        b.inputs.shape() == buffer.inputs.shape() && b.targets.shape() == buffer.targets.shape(),
        "fast::GraphedTrainStep::step: batches must be [", s.B, ", ", s.T, "], got inputs ",
        b.inputs.describe(), " and targets ", b.targets.describe());
  }
  TT_TODO("ch10.10",
          "GraphedTrainStep::step: the step of train_step_async on these batches, bit for bit, "
          "with the forward and backward read from the fixed token buffers (s.buffers); the "
          "first `warmup` steps run eagerly, the next one captures forward_backward_async into "
          "s.graph once, and every later step replays it (captured() true, graph_nodes() "
          "unchanged) without a host wait or a cudaMalloc; the returned PendingStep is the one "
          "the replay writes; the optimizer's update runs after it, outside the graph");
}

bool GraphedTrainStep::captured() const {
#if TT_WITH_CUDA
  return impl_->graph->captured();
#else
  return false;
#endif
}

std::size_t GraphedTrainStep::graph_nodes() const {
#if TT_WITH_CUDA
  return impl_->graph->num_nodes();
#else
  return 0;
#endif
}

}  // namespace tt::fast

namespace tt::fast {
namespace {

/// GraphedTrainStep behind chapter 09's StepRunner hook (train_gpt2 --cuda-graph).
class GraphedStepRunner final : public gpt2::StepRunner {
 public:
  GraphedStepRunner(gpt2::GPT2& model, optim::Optimizer& optimizer, int64_t B, int64_t T,
                    const gpt2::TrainStepOptions& options)
      : optimizer_(optimizer), graphed_(model, optimizer, B, T, options, kWarmup) {}
  gpt2::TrainStepResult step(const std::function<Batch()>& next_batch) override {
    return finish_step(optimizer_, graphed_.step(next_batch));
  }
  std::string description() const override {
    return "CUDA graph (fast::GraphedTrainStep: " + std::to_string(kWarmup) +
           " eager steps, then one capture replayed every step)";
  }

 private:
  static constexpr int kWarmup = 2;
  optim::Optimizer& optimizer_;
  GraphedTrainStep graphed_;
};

const bool kGraphedStepRunnerRegistered = gpt2::register_graphed_step_runner(
    [](gpt2::GPT2& model, optim::Optimizer& optimizer, int64_t B, int64_t T,
       const gpt2::TrainStepOptions& options) -> std::unique_ptr<gpt2::StepRunner> {
      // The graphed step updates through the optimizer itself: no ParallelStrategy hook
      // (backward, clip_grad_norm, step, average) runs, so only one process can use it.
      const gpt2::ParallelStrategy* par = options.parallel;
      TT_CHECK(par == nullptr || (par->world_size() == 1 && par->name() == "single"),
               "fast::GraphedTrainStep: a CUDA-graphed step runs in one process without a "
               "parallel strategy, got '",
               par == nullptr ? std::string("single") : par->name(), "' over ",
               par == nullptr ? 1 : par->world_size(), " processes");
      return std::make_unique<GraphedStepRunner>(model, optimizer, B, T, options);
    });

}  // namespace
}  // namespace tt::fast
