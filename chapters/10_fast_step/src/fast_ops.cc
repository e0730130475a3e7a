// Chapter 10's operation set "fast" for GPT-2 (tt/fast_ops.h), and the step profiler behind
// train_gpt2 --profile-step (a prof::Profiler around one step, printed as prof::profile_report).
#include "tt/fast_ops.h"

#include <memory>
#include <string>

#include "tt/flash_attention.h"
#include "tt/fused_classifier.h"
#include "tt/profiler.h"

namespace tt::fast {

void describe_piece(gpt2::ModelOps& ops, const std::string& piece) {
  ops.description += (ops.description.empty() ? "fast: " : ", ") + piece;
}

void install_attention(gpt2::ModelOps& ops) {
  ops.attention = flash_attention_qkv;
  describe_piece(ops, "FlashAttention (packed qkv)");
}

void install_classifier(gpt2::ModelOps& ops) {
  ops.classifier_loss = [](const Tensor& x, const Tensor& wte, int64_t vocab_size,
                           const Tensor& targets) {
    return fused_classifier_loss(x, wte, vocab_size, targets);
  };
  describe_piece(ops, "fused classifier");
}

gpt2::ModelOps fast_model_ops() {
  gpt2::ModelOps ops;
  // One line per piece of this chapter.
  install_attention(ops);
  install_classifier(ops);
  const std::vector<std::string> rest = gpt2::reference_members(ops);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    ops.description += (i == 0 ? "; reference: " : ", ") + rest[i];
  }
  return ops;
}

TT_REGISTER_MODEL_OPS("fast", fast_model_ops);

namespace {

/// One step under a prof::Profiler on the step's device.
class ProfiledStep final : public gpt2::StepProfiler {
 public:
  explicit ProfiledStep(Device device) : profiler_(device) {}
  void begin() override { profiler_.start(); }
  std::string end() override {
    profiler_.stop();
    return prof::profile_report(profiler_, prof::default_peaks(profiler_.device()),
                                "one training step on " + profiler_.device().str());
  }

 private:
  prof::Profiler profiler_;
};

const bool kStepProfilerRegistered =
    gpt2::register_step_profiler([](Device device) -> std::unique_ptr<gpt2::StepProfiler> {
      return std::make_unique<ProfiledStep>(device);
    });

}  // namespace

}  // namespace tt::fast
