// Chapter 05 exercise ch05.5: linear warmup followed by cosine decay to a floor.
#include <cmath>
#include <numbers>

#include "tt/optim.h"
#include "tt/todo.h"

namespace tt::optim {

WarmupCosineLR::WarmupCosineLR(double max_lr, double min_lr, int64_t warmup_steps,
                               int64_t total_steps)
    : max_lr_(max_lr), min_lr_(min_lr), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  TT_CHECK(std::isfinite(max_lr) && max_lr >= min_lr && min_lr >= 0,
           "WarmupCosineLR: need finite max_lr >= min_lr >= 0, got ", max_lr, " and ", min_lr);
  TT_CHECK(warmup_steps >= 0 && total_steps > warmup_steps,
           "WarmupCosineLR: need total_steps > warmup_steps >= 0, got ", total_steps, " and ",
           warmup_steps);
}

double WarmupCosineLR::lr(int64_t step) const {
  TT_CHECK(step >= 0, "WarmupCosineLR::lr: step must be >= 0, got ", step);
#if TT_SOLUTION
  if (step < warmup_steps_) {
    return max_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  }
  if (step >= total_steps_) return min_lr_;
  const double ratio =
      static_cast<double>(step - warmup_steps_) / static_cast<double>(total_steps_ - warmup_steps_);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));  // 1 -> 0
  return min_lr_ + coeff * (max_lr_ - min_lr_);
#else
  TT_TODO("ch05.5",
          "WarmupCosineLR::lr: the rate of 0-based step s: linear warmup that is > 0 at s = 0 "
          "and reaches max_lr at s = W - 1, half a cosine from max_lr at s = W down to min_lr at "
          "s = S, min_lr for s >= S");
#endif
}

}  // namespace tt::optim
