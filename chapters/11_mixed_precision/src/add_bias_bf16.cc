// add_bias_bf16 (tt/mixed_precision.h): a float32 bias added to a bfloat16 tensor in one pass,
// with its autograd function and the CPU kernels.
#include "tt/autograd.h"
#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"
#include "tt/mixed_precision.h"

namespace tt {

namespace {

/// Checks the tensors of "add_bias_bf16" (out may be undefined: the front-end's check) and
/// returns N.
int64_t check_add_bias(const char* op, const Tensor& y, const Tensor& bias) {
  TT_CHECK(y.defined() && bias.defined() && y.dtype() == DType::kBFloat16 &&
               bias.dtype() == DType::kFloat32 && y.dim() >= 1 && bias.dim() == 1 &&
               bias.size(0) == y.size(-1) && y.device() == bias.device(),
           op, ": expected a bfloat16 y [..., N] and a float32 bias [N] on one device, got y ",
           y.describe(), " and bias ", bias.describe());
  return bias.size(0);
}

struct AddBiasBf16Fn final : autograd::Function {
  std::string name() const override { return "AddBiasBf16Backward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor out = empty(in[0].shape(), {DType::kBFloat16, in[0].device()});
    call_kernel<AddBiasBf16Kernel>("add_bias_bf16", in[0].device(), out, in[0].contiguous(),
                                   in[1].contiguous());
    n_ = in[1].size(0);
    return {out};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor dy = grads[0].contiguous();
    Tensor dbias;
    if (needs_input_grad(1)) {
      dbias = empty({n_}, {DType::kFloat32, dy.device()});
      call_kernel<BiasGradBf16Kernel>("bias_grad_bf16", dy.device(), dbias, dy);
    }
    return {needs_input_grad(0) ? dy : Tensor(), dbias};
  }
  int64_t n_ = 0;
};

}  // namespace

void check_add_bias_bf16_kernel(const char* op, DeviceType device_type, const Tensor& out,
                                const Tensor& y, const Tensor& bias) {
  check_add_bias(op, y, bias);
  TT_CHECK(out.defined() && out.shape() == y.shape() && out.dtype() == DType::kBFloat16 &&
               out.device() == y.device() && out.device().type == device_type &&
               out.is_contiguous() && y.is_contiguous() && bias.is_contiguous(),
           op, ": expected contiguous out and y of one shape (bfloat16) and a contiguous bias on ",
           device_type == DeviceType::kCPU ? "the CPU" : "a CUDA device", ", got out ",
           out.describe(), ", y ", y.describe(), ", bias ", bias.describe());
}

void check_bias_grad_bf16_kernel(const char* op, DeviceType device_type, const Tensor& dbias,
                                 const Tensor& dy) {
  TT_CHECK(dbias.defined() && dy.defined() && dbias.dtype() == DType::kFloat32 &&
               dy.dtype() == DType::kBFloat16 && dbias.dim() == 1 && dy.dim() >= 1 &&
               dy.size(-1) == dbias.size(0) && dbias.is_contiguous() && dy.is_contiguous() &&
               dbias.device() == dy.device() && dy.device().type == device_type,
           op, ": expected a contiguous float32 dbias [N] and bfloat16 dy [..., N] on one ",
           device_type == DeviceType::kCPU ? "CPU" : "CUDA", " device, got dbias ",
           dbias.describe(), " and dy ", dy.describe());
}

Tensor add_bias_bf16(const Tensor& y, const Tensor& bias) {
  check_add_bias("add_bias_bf16", y, bias);
  return autograd::Function::apply<AddBiasBf16Fn>({y, bias})[0];
}

namespace cpu {

void add_bias_bf16(const Tensor& out, const Tensor& y, const Tensor& bias) {
  check_add_bias_bf16_kernel("cpu::add_bias_bf16", DeviceType::kCPU, out, y, bias);
  const int64_t n = bias.numel(), rows = n == 0 ? 0 : y.numel() / n;
  const auto* in = y.data<bfloat16>();
  const float* b = bias.data<float>();
  auto* o = out.data<bfloat16>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      const int64_t i = r * n + c;
      o[i] = float_to_bfloat16_rne(bfloat16_to_float(in[i]) + b[c]);
    }
  }
}

void bias_grad_bf16(const Tensor& dbias, const Tensor& dy) {
  check_bias_grad_bf16_kernel("cpu::bias_grad_bf16", DeviceType::kCPU, dbias, dy);
  const int64_t n = dbias.numel(), rows = n == 0 ? 0 : dy.numel() / n;
  const auto* g = dy.data<bfloat16>();
  float* db = dbias.data<float>();
  for (int64_t c = 0; c < n; ++c) db[c] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < n; ++c) db[c] += bfloat16_to_float(g[r * n + c]);
  }
}

}  // namespace cpu

TT_REGISTER_KERNEL("add_bias_bf16", DeviceType::kCPU, cpu::add_bias_bf16);
TT_REGISTER_KERNEL("bias_grad_bf16", DeviceType::kCPU, cpu::bias_grad_bf16);

}  // namespace tt
