/// @file device.h
/// @brief Where a tensor's memory lives: Device{type, index}, e.g. cpu or cuda:1.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace tt {

/// The kind of device. Each kind has one DeviceBackend (see backend.h).
enum class DeviceType : uint8_t {
  kCPU,   ///< host memory
  kCUDA,  ///< NVIDIA GPU memory (chapter 06)
};

/// Number of device types (size of per-device-type tables).
inline constexpr int kNumDeviceTypes = 2;

/// A device: a type plus an index ("cuda:1"). The CPU always has index 0.
struct Device {
  DeviceType type = DeviceType::kCPU;  ///< kind of device
  int index = 0;                       ///< which device of that kind

  /// The host.
  static constexpr Device cpu() { return Device{DeviceType::kCPU, 0}; }
  /// The CUDA device number `index`.
  static constexpr Device cuda(int index = 0) { return Device{DeviceType::kCUDA, index}; }
  /// Parses "cpu", "cuda" (= cuda:0) or "cuda:N"; throws tt::Error on anything else.
  static Device parse(const std::string& text);

  /// True when type is kCPU.
  constexpr bool is_cpu() const { return type == DeviceType::kCPU; }
  /// True when type is kCUDA.
  constexpr bool is_cuda() const { return type == DeviceType::kCUDA; }
  /// "cpu" or "cuda:N".
  std::string str() const;

  /// Devices are equal when type and index are.
  friend constexpr bool operator==(const Device&, const Device&) = default;
};

/// Name of a device type: "cpu" or "cuda".
const char* device_type_name(DeviceType type);
/// Prints device.str().
std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace tt
