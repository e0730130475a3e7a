// The host-side parts of chapter 07's fused optimizers that every build has.
#include <cmath>

#include "tt/fused_optim.h"

namespace tt {

AdamWCoefficients adamw_coefficients(const optim::AdamWStepArgs& args) {
  TT_CHECK(args.step >= 1, "adamw: step must be >= 1 (the first step is 1), got ", args.step);
  TT_CHECK(args.lr >= 0, "adamw: lr must be >= 0, got ", args.lr);
  TT_CHECK(args.beta1 >= 0 && args.beta1 < 1 && args.beta2 >= 0 && args.beta2 < 1,
           "adamw: betas must lie in [0, 1), got (", args.beta1, ", ", args.beta2, ")");
  TT_CHECK(args.eps > 0, "adamw: eps must be > 0, got ", args.eps);
  TT_CHECK(args.weight_decay >= 0, "adamw: weight_decay must be >= 0, got ", args.weight_decay);
  const double t = static_cast<double>(args.step);
  AdamWCoefficients c;
  c.decay = static_cast<float>(1.0 - args.lr * args.weight_decay);
  c.beta1 = static_cast<float>(args.beta1);
  c.beta2 = static_cast<float>(args.beta2);
  c.one_minus_beta1 = static_cast<float>(1.0 - args.beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - args.beta2);
  c.neg_step_size = static_cast<float>(-args.lr / (1.0 - std::pow(args.beta1, t)));
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(args.beta2, t)));
  c.eps = static_cast<float>(args.eps);
  return c;
}

}  // namespace tt
