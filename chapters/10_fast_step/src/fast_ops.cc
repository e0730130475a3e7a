// Chapter 10's operation set "fast" for GPT-2 (tt/fast_ops.h), and the step profiler behind
// train_gpt2 --profile-step (a prof::Profiler around one step, printed as prof::profile_report).
#include "tt/fast_ops.h"

#include <memory>
#include <string>

#include "tt/flash_attention.h"
#include "tt/fused_classifier.h"
#include "tt/gpt2.h"
#include "tt/profiler.h"

namespace tt::fast {

void describe_piece(gpt2::ModelOps& ops, const std::string& piece) {
  ops.description += (ops.description.empty() ? "fast: " : ", ") + piece;
}

void install_attention(gpt2::ModelOps& ops) {
  // Head sizes the device's kernels do not take (e.g. hs = 16 on CUDA) run chapter 09's
  // composition instead, as PyTorch's SDPA falls back to its math kernel.
  ops.attention = [](const Tensor& qkv, int64_t n_head) {
    const bool packed =
        qkv.defined() && qkv.dim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0;
    if (packed && !flash_attention_supports(qkv.device().type, qkv.size(2) / (3 * n_head))) {
      return gpt2::causal_self_attention(qkv, n_head);
    }
    return flash_attention_qkv(qkv, n_head);
  };
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
  install_epilogue(ops);
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
  ProfiledStep(Device device, bool bf16) : profiler_(device), bf16_(bf16) {}
  void begin() override { profiler_.start(); }
  std::string end() override {
    profiler_.stop();
    return prof::profile_report(profiler_, prof::default_peaks(profiler_.device(), bf16_),
                                "one training step on " + profiler_.device().str());
  }

 private:
  prof::Profiler profiler_;
  bool bf16_;
};

const bool kStepProfilerRegistered =
    gpt2::register_step_profiler(
        [](Device device, bool bf16) -> std::unique_ptr<gpt2::StepProfiler> {
          return std::make_unique<ProfiledStep>(device, bf16);
        });

}  // namespace

}  // namespace tt::fast
