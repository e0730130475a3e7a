// The registry of GPT-2 operation sets (tt/gpt2_ops.h) and chapter 09's own set, "reference":
// every member empty, so the model uses its compositions of chapter 04/05 ops.
#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "tt/autograd.h"
#include "tt/error.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/todo.h"
#include "tt/train.h"

namespace tt::gpt2 {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::function<ModelOps()>> factories;  // sorted by name
};

// A function-local static: registrations run during static initialization of other files.
Registry& registry() {
  static Registry r;
  return r;
}

// "fast, reference" (the caller holds the lock).
std::string joined_names(const Registry& r) {
  std::ostringstream os;
  for (auto it = r.factories.begin(); it != r.factories.end(); ++it) {
    os << (it == r.factories.begin() ? "" : ", ") << it->first;
  }
  return os.str();
}

}  // namespace

bool register_model_ops(const std::string& name, std::function<ModelOps()> factory) {
  TT_CHECK(!name.empty(), "register_model_ops: the name of an operation set must not be empty");
  TT_CHECK(static_cast<bool>(factory), "register_model_ops: '", name, "' has no factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TT_CHECK(!r.factories.contains(name), "register_model_ops: an operation set named '", name,
           "' is already registered (registered: ", joined_names(r), ")");
  r.factories.emplace(name, std::move(factory));
  return true;
}

ModelOps model_ops(const std::string& name) {
  std::function<ModelOps()> factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.factories.find(name);
    TT_CHECK(it != r.factories.end(), "model_ops: no operation set named '", name,
             "' (registered: ", joined_names(r),
             "; chapter 10's \"fast\" set exists when its library is linked)");
    factory = it->second;
  }
  return factory();  // outside the lock: a factory may look up another set
}

bool has_model_ops(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.contains(name);
}

std::vector<std::string> model_ops_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& entry : r.factories) names.push_back(entry.first);
  return names;
}

std::vector<std::string> reference_members(const ModelOps& ops) {
  std::vector<std::string> names;
  if (!ops.attention) names.emplace_back("attention");
  if (!ops.linear) names.emplace_back("linear");
  if (!ops.linear_gelu) names.emplace_back("linear_gelu");
  if (!ops.residual_layernorm) names.emplace_back("residual_layernorm");
  if (!ops.classifier_loss) names.emplace_back("classifier_loss");
  return names;
}

std::string model_ops_not_implemented(const ModelOps& ops, Device device) {
  const GPT2Config config{.block_size = 8,
                          .vocab_size = 10,
                          .padded_vocab_size = 12,
                          .n_layer = 1,
                          .n_head = 2,
                          .n_embd = 64};
  GPT2 model(config);
  model.to(device);
  model.set_ops(ops);
  std::vector<int64_t> tokens(5);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i);
  const Tensor idx = from_vector(tokens, {1, 5}).to(device);
  try {
    autograd::backward(model.loss(idx, idx));
    if (ops.adamw) ops.adamw(param_groups(model, 0.0), optim::AdamWOptions{})->step();
  } catch (const NotImplemented& e) {
    return e.what();
  }
  return "";
}

namespace {

/// The one slot of a hook that a later chapter fills (the step profiler, the graphed step
/// runner): one per factory type.
template <typename Factory>
Factory& hook_slot() {
  static Factory factory;
  return factory;
}

/// Fills the slot of `Factory`; `op` names the registering function, `what` the hook.
template <typename Factory>
bool register_hook(Factory factory, const char* op, const char* what) {
  TT_CHECK(static_cast<bool>(factory), op, ": no factory");
  TT_CHECK(!hook_slot<Factory>(), op, ": ", what,
           " is already registered (one chapter provides it)");
  hook_slot<Factory>() = std::move(factory);
  return true;
}

using StepProfilerFactory = std::function<std::unique_ptr<StepProfiler>(Device, bool)>;

}  // namespace

bool register_step_profiler(StepProfilerFactory factory) {
  return register_hook(std::move(factory), "register_step_profiler", "a step profiler");
}

std::unique_ptr<StepProfiler> make_step_profiler(Device device, bool bf16) {
  const auto& factory = hook_slot<StepProfilerFactory>();
  return factory ? factory(device, bf16) : nullptr;
}

bool register_graphed_step_runner(StepRunnerFactory factory) {
  return register_hook(std::move(factory), "register_graphed_step_runner", "a graphed step runner");
}

bool has_graphed_step_runner() {
  return static_cast<bool>(hook_slot<StepRunnerFactory>());
}

std::unique_ptr<StepRunner> make_graphed_step_runner(GPT2& model, optim::Optimizer& optimizer,
                                                     int64_t B, int64_t T,
                                                     const TrainStepOptions& options) {
  const auto& factory = hook_slot<StepRunnerFactory>();
  TT_CHECK(static_cast<bool>(factory),
           "make_graphed_step_runner: no graphed step runner is registered (chapter 10's "
           "fast::GraphedTrainStep, tt/fast_step.h, is not linked in)");
  return factory(model, optimizer, B, T, options);
}

ModelOps reference_model_ops() {
  ModelOps ops;
  ops.description = "reference (chapter 09 compositions)";
  return ops;
}

TT_REGISTER_MODEL_OPS("reference", reference_model_ops);

}  // namespace tt::gpt2
