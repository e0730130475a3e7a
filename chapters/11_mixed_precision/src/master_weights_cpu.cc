// ============================================================================================
// YOUR EXERCISE FILE for chapter 11_mixed_precision. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch11
// Generated from solutions/11_mixed_precision/master_weights_cpu.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch11.5: the master-weight AdamW update on the CPU (tt/master_weights.h). The float32
// masters take the whole update; the bfloat16 copies the forward pass multiplies with are
// derived from them afterwards, rounded once.
#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"
#include "tt/master_weights.h"
#include "tt/todo.h"

namespace tt::cpu {

void adamw_master_update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs,
                         const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& copies,
                         const optim::AdamWStepArgs& args, const Tensor& skip) {
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)copies, (void)args,
      (void)skip;
  TT_TODO("ch11.5",
          "adamw_master_update: params, exp_avgs and exp_avg_sqs end bit for bit as chapter 05's "
          "CPU AdamW step leaves them (unchanged when skip is defined and non-zero), and every "
          "copies[j] holds params[j]'s final values rounded to the nearest bfloat16, ties to "
          "even, skipped step included");
}

}  // namespace tt::cpu
