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
#if TT_SOLUTION
  // 1. The update, all in float32, on the masters: chapter 05's kernel. A step far below
  //    bfloat16's spacing (lr 1e-4 next to a weight of 1.0) still moves a float32 master.
  const Device cpu = Device::cpu();
  if (skip.defined()) {
    call_kernel<optim::AdamWStepUnlessKernel>("adamw_step_unless", cpu, params, grads, exp_avgs,
                                              exp_avg_sqs, args, skip);
  } else {
    call_kernel<optim::AdamWStepKernel>("adamw_step", cpu, params, grads, exp_avgs, exp_avg_sqs,
                                        args);
  }
  // 2. The copies, from the masters as they now are (a skipped step leaves them unchanged, and
  //    the copies then still match them): each rounded once, to nearest even.
  for (std::size_t j = 0; j < params.size(); ++j) {
    const float* p = params[j].data<float>();
    bfloat16* c = copies[j].data<bfloat16>();
    const int64_t n = params[j].numel();
    for (int64_t i = 0; i < n; ++i) c[i] = float_to_bfloat16_rne(p[i]);
  }
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)copies, (void)args,
      (void)skip;
  TT_TODO("ch11.5",
          "adamw_master_update: params, exp_avgs and exp_avg_sqs end bit for bit as chapter 05's "
          "CPU AdamW step leaves them (unchanged when skip is defined and non-zero), and every "
          "copies[j] holds params[j]'s final values rounded to the nearest bfloat16, ties to "
          "even, skipped step included");
#endif
}

}  // namespace tt::cpu
