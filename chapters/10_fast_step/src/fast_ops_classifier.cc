// The fused classifier's part of the "fast" GPT-2 operations (wired into the set by the lead).
#include "tt/fused_classifier.h"

namespace tt::fast {

void install_classifier(gpt2::ModelOps& ops) {
  ops.classifier_loss = [](const Tensor& x, const Tensor& wte, int64_t vocab_size,
                           const Tensor& targets) {
    return fused_classifier_loss(x, wte, vocab_size, targets);
  };
}

}  // namespace tt::fast
