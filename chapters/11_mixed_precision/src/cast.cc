// The CPU "cast" kernel and the installation of chapter 01's bfloat16 cast slot: from here on,
// every bfloat16 conversion of a tensor (to(), copy_, fill_, creation) dispatches "cast" on the
// tensors' device.
#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"

namespace tt {

namespace cpu {

void cast(const Tensor& dst, const Tensor& src) {
  constexpr const char* kOp = "cpu::cast";
  const DType dt = dst.dtype(), st = src.dtype();
  if (dt == DType::kBFloat16 && st == DType::kFloat32) {
    cpu_map_strided<bfloat16, float>(dst, src, kOp, float_to_bfloat16_rne);
  } else if (dt == DType::kFloat32 && st == DType::kBFloat16) {
    cpu_map_strided<float, bfloat16>(dst, src, kOp, bfloat16_to_float);
  } else if (dt == DType::kBFloat16 && st == DType::kBFloat16) {
    cpu_map_strided<bfloat16, bfloat16>(dst, src, kOp, [](bfloat16 v) { return v; });
  } else {
    TT_THROW(kOp, ": converts between float32 and bfloat16 only, got ", dtype_name(st), " -> ",
             dtype_name(dt), " (dst ", dst.describe(), ", src ", src.describe(), ")");
  }
}

}  // namespace cpu

TT_REGISTER_KERNEL("cast", DeviceType::kCPU, cpu::cast);

namespace {

// Chapter 01's slot: dispatch "cast" on the tensors' device (the dispatcher's error lists the
// devices that have one when this device has none).
void cast_on_device(const Tensor& dst, const Tensor& src) {
  call_kernel<CastKernel>("cast", dst.device(), dst, src);
}

const bool kBFloat16CastInstalled = [] {
  set_bfloat16_cast(&cast_on_device);
  return true;
}();

}  // namespace

}  // namespace tt
