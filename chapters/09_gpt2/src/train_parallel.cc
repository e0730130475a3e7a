// The one-process ParallelStrategy and the registry of strategies (tt/train_parallel.h).
#include "tt/train_parallel.h"

#include <map>
#include <mutex>
#include <utility>

#include "tt/autograd.h"
#include "tt/checkpoint.h"
#include "tt/error.h"
#include "tt/train.h"

namespace tt::gpt2 {

std::unique_ptr<optim::Optimizer> ParallelStrategy::make_optimizer(
    nn::Module& model, std::vector<optim::ParamGroup> groups, const optim::AdamWOptions& options,
    const AdamWFactory& adamw) {
  (void)model;
  if (adamw) return adamw(std::move(groups), options);
  return std::make_unique<optim::AdamW>(std::move(groups), options);
}

void ParallelStrategy::set_model_parallelism(int tp, bool sequence_parallel) {
  TT_CHECK(tp == 1 && !sequence_parallel, "the parallel strategy '", name(),
           "' does not split models: tensor parallelism (tp=", tp,
           sequence_parallel ? ", sequence parallel" : "", ") needs chapter 13's strategy \"tp\"");
}

void ParallelStrategy::set_context_parallelism(int cp) {
  TT_CHECK(cp == 1, "the parallel strategy '", name(), "' does not split sequences: context ",
           "parallelism (cp=", cp, ") needs chapter 16's strategy \"cp\"");
}

void ParallelStrategy::set_pipeline(const PipelineSpec& spec) {
  TT_CHECK(spec.stages == 1 && spec.micro_batches == 1, "the parallel strategy '", name(),
           "' does not run pipelines: pipeline parallelism (pp=", spec.stages,
           ", micro-batches=", spec.micro_batches, ") needs chapter 14's strategy \"pp\"");
}

std::unique_ptr<StepRunner> ParallelStrategy::make_step_runner(GPT2& model,
                                                               optim::Optimizer& optimizer,
                                                               int64_t B, int64_t T,
                                                               const TrainStepOptions& options) {
  (void)model, (void)optimizer, (void)B, (void)T, (void)options;
  return nullptr;
}

void ParallelStrategy::zero_grad(optim::Optimizer& optimizer) {
  optimizer.zero_grad();
}

void ParallelStrategy::backward(const Tensor& loss, bool last) {
  (void)last;
  autograd::backward(loss);
}

double ParallelStrategy::clip_grad_norm(optim::Optimizer& optimizer, double max_norm) {
  std::vector<Tensor> params;
  for (const auto& group : optimizer.param_groups()) {
    params.insert(params.end(), group.params.begin(), group.params.end());
  }
  return optim::clip_grad_norm_(params, max_norm);
}

void ParallelStrategy::step(optim::Optimizer& optimizer) {
  optimizer.step();
}

void ParallelStrategy::save_checkpoint(const std::string& path, const nn::Module& model,
                                       optim::Optimizer& optimizer) {
  ckpt::save_checkpoint(path, model, &optimizer, checkpoint_metadata());
}

void ParallelStrategy::load_checkpoint(const std::string& path, nn::Module& model,
                                       optim::Optimizer& optimizer) {
  ckpt::load_checkpoint(path, model, &optimizer);
}

int64_t ParallelStrategy::optimizer_state_bytes(const optim::Optimizer& optimizer) const {
  int64_t bytes = 0;
  for (const auto& [name, t] : optimizer.state_dict()) {
    if (name.starts_with("state."))
      bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  }
  return bytes;
}

ParallelStrategy& single_process() {
  static ParallelStrategy single;
  return single;
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::function<std::unique_ptr<ParallelStrategy>()>> factories;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool register_parallel_strategy(const std::string& name,
                                std::function<std::unique_ptr<ParallelStrategy>()> factory) {
  TT_CHECK(!name.empty() && factory, "register_parallel_strategy: empty name or factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TT_CHECK(r.factories.emplace(name, std::move(factory)).second, "register_parallel_strategy: '",
           name, "' is already registered");
  return true;
}

TT_REGISTER_PARALLEL_STRATEGY("single", [] { return std::make_unique<ParallelStrategy>(); });

std::unique_ptr<ParallelStrategy> make_parallel_strategy(const std::string& name) {
  std::function<std::unique_ptr<ParallelStrategy>()> factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string names;
    for (const std::string& n : parallel_strategy_names()) names += " " + n;
    TT_THROW("make_parallel_strategy: no strategy '", name, "' is registered (registered:", names,
             "; \"ddp\" and \"zero1\" come with chapter 12, data parallelism)");
  }
  return factory();
}

std::vector<std::string> parallel_strategy_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& entry : r.factories) names.push_back(entry.first);
  return names;
}

}  // namespace tt::gpt2
