#include "tt/npy_tensor.h"

#include <cstring>

namespace tt {

namespace {
DType to_dtype(NpyDType d) {
  switch (d) {
    case NpyDType::kFloat32:
      return DType::kFloat32;
    case NpyDType::kFloat64:
      return DType::kFloat64;
    case NpyDType::kInt64:
      return DType::kInt64;
  }
  TT_THROW("npy: unknown dtype");
}
NpyDType to_npy_dtype(DType d) {
  switch (d) {
    case DType::kFloat32:
      return NpyDType::kFloat32;
    case DType::kFloat64:
      return NpyDType::kFloat64;
    case DType::kInt64:
      return NpyDType::kInt64;
    case DType::kBFloat16:
      return NpyDType::kFloat32;  // numpy has no bfloat16: its exact float32 values
  }
  TT_THROW("npy: unknown dtype");
}
}  // namespace

Tensor tensor_from_npy(const NpyArray& array) {
  Tensor t = empty(array.shape, {to_dtype(array.dtype)});
  if (!array.data.empty()) std::memcpy(t.data_ptr(), array.data.data(), array.data.size());
  return t;
}

Tensor load_npy(const std::string& path) {
  return tensor_from_npy(read_npy(path));
}

NpyArray tensor_to_npy(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  NpyArray a;
  a.dtype = to_npy_dtype(t.dtype());
  a.shape = t.shape();
  if (t.dtype() == DType::kBFloat16) {  // widened exactly, element by element
    a.data.resize(static_cast<std::size_t>(t.numel()) * sizeof(float));
    const bfloat16* p = host.data<bfloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = bfloat16_to_float(p[i]);
      std::memcpy(a.data.data() + static_cast<std::size_t>(i) * sizeof(float), &v, sizeof v);
    }
    return a;
  }
  a.data.resize(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  if (!a.data.empty()) std::memcpy(a.data.data(), host.data_ptr(), a.data.size());
  return a;
}

void save_npy(const std::string& path, const Tensor& t) {
  write_npy(path, tensor_to_npy(t));
}

}  // namespace tt
