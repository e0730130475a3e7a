// Exercise ch11.4: the state machine of dynamic loss scaling (tt/loss_scaling.h). The scale
// backs off after an overflow and probes upwards again after a run of clean steps.
#include <algorithm>

#include "tt/loss_scaling.h"
#include "tt/todo.h"

namespace tt {

void DynamicLossScaler::update(bool finite) {
#if TT_SOLUTION
  if (!finite) {
    // The step was skipped: S was too large for some gradient. Back off, start counting again.
    scale_ = std::max(scale_ * 0.5, options_.min_scale);
    good_steps_ = 0;
    ++skipped_steps_;
    return;
  }
  // A clean step. After growth_interval of them in a row, try a larger S (an overflow will
  // bring it back down): the largest S that does not overflow keeps the most small gradients.
  if (++good_steps_ >= options_.growth_interval) {
    scale_ = std::min(scale_ * 2.0, options_.max_scale);
    good_steps_ = 0;
  }
#else
  (void)finite;
  TT_TODO("ch11.4",
          "DynamicLossScaler::update: after a non-finite step scale() halves (never below "
          "min_scale), good_steps() restarts from 0 and skipped_steps() grows by one; after a "
          "finite step good_steps() grows by one, and when it reaches growth_interval scale() "
          "doubles (never above max_scale) and good_steps() restarts from 0");
#endif
}

}  // namespace tt
