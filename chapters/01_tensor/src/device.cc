#include "tt/device.h"

#include <cstdlib>

#include "tt/dtype.h"
#include "tt/error.h"

namespace tt {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda";
  }
  return "unknown";
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8) {
    int index = 0;
    for (std::size_t i = 5; i < text.size(); ++i) {
      TT_CHECK(text[i] >= '0' && text[i] <= '9', "Device::parse: invalid device '", text,
               "' (expected cpu, cuda or cuda:N)");
      index = index * 10 + (text[i] - '0');
    }
    return cuda(index);
  }
  TT_THROW("Device::parse: invalid device '", text, "' (expected cpu, cuda or cuda:N)");
}

std::ostream& operator<<(std::ostream& os, const Device& device) {
  return os << device.str();
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

void throw_no_bfloat16_kernel(const char* op) {
  TT_THROW(op, ": no bfloat16 kernel (dtype bfloat16 is not supported by this op; compute in ",
           "float32 with .to(DType::kFloat32))");
}

std::ostream& operator<<(std::ostream& os, DType dtype) {
  return os << dtype_name(dtype);
}

}  // namespace tt
