// Chapter 05 exercise ch05.4: clipping the global gradient norm. The kernels it calls,
// "sum_of_squares" and "scale_", are in optim_kernels.cc.
#include <cmath>

#include "tt/optim.h"
#include "tt/todo.h"

namespace tt::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  TT_CHECK(max_norm > 0, "clip_grad_norm_: max_norm must be > 0, got ", max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    TT_CHECK(g.is_contiguous() && g.device() == p.device(), "clip_grad_norm_: gradient ",
             g.describe(), " must be contiguous and on the parameter's device (", p.device().str(),
             ")");
    TT_CHECK(grads.empty() || g.device() == grads[0].device(),
             "clip_grad_norm_: gradients on different devices: ", grads[0].describe(), " and ",
             g.describe());
    grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
#if TT_SOLUTION
  const Device device = grads[0].device();
  const double total = std::sqrt(call_kernel<SumOfSquaresKernel>("sum_of_squares", device, grads));
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0) call_kernel<ScaleInplaceKernel>("scale_", device, grads, coef);
  return total;
#else
  TT_TODO("ch05.4",
          "clip_grad_norm_: returns n, the L2 norm of all gradients taken as one vector (before "
          "clipping); when max_norm / (n + 1e-6) < 1 every gradient is scaled by that factor in "
          "place, otherwise none changes; the work runs in the gradients' device kernels");
#endif
}

}  // namespace tt::optim
