// ============================================================================================
// YOUR EXERCISE FILE for chapter 11_mixed_precision. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch11
// Generated from solutions/11_mixed_precision/loss_scaler_update.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch11.4: the state machine of dynamic loss scaling (tt/loss_scaling.h). The scale
// backs off after an overflow and probes upwards again after a run of clean steps.
#include <algorithm>

#include "tt/loss_scaling.h"
#include "tt/todo.h"

namespace tt {

void DynamicLossScaler::update(bool finite) {
  (void)finite;
  TT_TODO("ch11.4",
          "DynamicLossScaler::update: after a non-finite step scale() halves (never below "
          "min_scale), good_steps() restarts from 0 and skipped_steps() grows by one; after a "
          "finite step good_steps() grows by one, and when it reaches growth_interval scale() "
          "doubles (never above max_scale) and good_steps() restarts from 0");
}

}  // namespace tt
