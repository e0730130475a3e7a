// residual_layernorm_bf16 (tt/layernorm_bf16.h): chapter 10's fused residual + LayerNorm with a
// bfloat16 output; its kernels (tt/fused_ops.h) take the mixed dtypes themselves.
#include "tt/layernorm_bf16.h"

#include <string>

#include "tt/fused_ops.h"

namespace tt {

std::pair<Tensor, Tensor> residual_layernorm_bf16(const Tensor& residual, const Tensor& delta,
                                                  nn::LayerNorm& ln) {
  TT_CHECK(residual.defined() && residual.dtype() == DType::kFloat32, "residual_layernorm_bf16: ",
           "the residual stream must be float32 (the mixed-precision policy), got ",
           residual.defined() ? residual.describe() : std::string("an undefined tensor"));
  return residual_layernorm_to(residual, delta, ln, DType::kBFloat16);
}

}  // namespace tt
