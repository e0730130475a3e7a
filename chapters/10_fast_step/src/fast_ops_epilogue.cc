// The epilogue piece of chapter 10's "fast" operation set (tt/fast_ops.h): the ops of
// tt/fused_ops.h as the set's linear, linear_gelu and residual_layernorm.
#include "tt/fast_ops.h"
#include "tt/fused_ops.h"

namespace tt::fast {

void install_epilogue(gpt2::ModelOps& ops) {
  ops.linear = linear_lt;
  ops.linear_gelu = linear_gelu_lt;
  ops.residual_layernorm = residual_layernorm;
  describe_piece(ops,
                 "cuBLASLt epilogues (bias, GELU, bias gradients), fused residual + LayerNorm");
}

}  // namespace tt::fast
