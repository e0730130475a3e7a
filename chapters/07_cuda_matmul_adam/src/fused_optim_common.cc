// The host-side parts of chapter 07's fused optimizers that every build has.
#include <cmath>

#include "tt/fused_optim.h"

namespace tt {

AdamWCoefficients adamw_coefficients(const AdamWConfig& config, int64_t step) {
  TT_CHECK(step >= 1, "adamw: step must be >= 1 (the first step is 1), got ", step);
  TT_CHECK(config.lr >= 0, "adamw: lr must be >= 0, got ", config.lr);
  TT_CHECK(config.beta1 >= 0 && config.beta1 < 1 && config.beta2 >= 0 && config.beta2 < 1,
           "adamw: betas must lie in [0, 1), got (", config.beta1, ", ", config.beta2, ")");
  TT_CHECK(config.eps > 0, "adamw: eps must be > 0, got ", config.eps);
  TT_CHECK(config.weight_decay >= 0, "adamw: weight_decay must be >= 0, got ", config.weight_decay);
  const double t = static_cast<double>(step);
  AdamWCoefficients c;
  c.lr = static_cast<float>(config.lr);
  c.beta1 = static_cast<float>(config.beta1);
  c.beta2 = static_cast<float>(config.beta2);
  c.one_minus_beta1 = static_cast<float>(1.0 - config.beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - config.beta2);
  c.eps = static_cast<float>(config.eps);
  c.weight_decay = static_cast<float>(config.weight_decay);
  c.bias_correction1 = static_cast<float>(1.0 - std::pow(config.beta1, t));
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2, t)));
  return c;
}

}  // namespace tt
