// The epilogue and residual + LayerNorm pieces of chapter 10's "fast" ModelOps (tt/fused_ops.h).
#include "tt/fused_ops.h"

namespace tt::fast {

void install_epilogue(gpt2::ModelOps& ops) {
  ops.linear = [](const Tensor& x, nn::Linear& layer) { return linear_lt(x, layer); };
  ops.linear_gelu = [](const Tensor& x, nn::Linear& layer) { return linear_gelu_lt(x, layer); };
  ops.residual_layernorm = [](const Tensor& residual, const Tensor& delta, nn::LayerNorm& ln) {
    return residual_layernorm(residual, delta, ln);
  };
}

}  // namespace tt::fast
