// The differentiable dtype conversion and the bf16 attention of tt/mixed_precision.h.
#include "tt/mixed_precision.h"

#include <vector>

#include "tt/autograd.h"
#include "tt/flash_attention.h"
#include "tt/flash_attention_bf16.h"
#include "tt/gpt2.h"

namespace tt {

namespace {

// y = x in another dtype; backward converts the gradient back to x's dtype.
struct ToDTypeFn : autograd::Function {
  explicit ToDTypeFn(DType dtype) : dtype_(dtype) {}
  std::string name() const override { return "ToDTypeBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    from_ = in[0].dtype();
    return {in[0].to(dtype_)};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    return {grads[0].to(from_)};
  }
  DType dtype_;
  DType from_ = DType::kFloat32;
};

}  // namespace

Tensor to_dtype(const Tensor& x, DType dtype) {
  TT_CHECK(x.defined(), "to_dtype: undefined tensor (to ", dtype_name(dtype), ")");
  if (x.dtype() == dtype) return x;
  const bool ok = (x.dtype() == DType::kFloat32 && dtype == DType::kBFloat16) ||
                  (x.dtype() == DType::kBFloat16 && dtype == DType::kFloat32);
  TT_CHECK(ok, "to_dtype: converts between float32 and bfloat16 only, got ", x.describe(), " -> ",
           dtype_name(dtype));
  return autograd::Function::apply<ToDTypeFn>({x}, dtype)[0];
}

Tensor bf16_attention(const Tensor& qkv, int64_t n_head) {
  const Tensor x = to_dtype(qkv, DType::kBFloat16);
  const bool packed = x.dim() == 3 && n_head > 0 && x.size(2) % (3 * n_head) == 0;
  const int64_t hs = packed ? x.size(2) / (3 * n_head) : 0;
  // The CPU emulation takes any head size; CUDA's tensor-core kernels hs 32, 64 and 128.
  if (!packed || x.device().is_cpu() || flash_attention_bf16_supports(hs)) {
    return flash_attention_qkv(x, n_head);  // its checks name the shapes of a bad qkv
  }
  const Tensor x32 = to_dtype(x, DType::kFloat32);
  const Tensor y = flash_attention_supports(x.device().type, hs)
                       ? flash_attention_qkv(x32, n_head)
                       : gpt2::causal_self_attention(x32, n_head);
  return to_dtype(y, DType::kBFloat16);
}

}  // namespace tt
