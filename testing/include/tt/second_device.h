/// @file second_device.h
/// @brief A device other than the CPU for mixed-device tests, available in every build that can
/// provide one: the real cuda:0 when a GPU is usable, otherwise (a build without a CUDA backend)
/// a stand-in "cuda" backend whose memory is host memory.
///
/// The stand-in only lets tensors exist on `cuda:0` (allocation, same-dtype copies, fill); no
/// kernel is registered for it, so an op that forgets its device check fails with "no kernel for
/// op ... on device type cuda" instead of the op's own message, and the test catches that. It is
/// registered on first use, in the test process only.
#pragma once

#include <cstring>
#include <optional>

#include "tt/backend.h"
#include "tt/cuda_probe.h"
#include "tt/tensor.h"

namespace tt::testing {

namespace detail {

/// The stand-in CUDA backend: host memory from a CpuAllocator, contiguous copies only.
class HostMemoryBackend final : public DeviceBackend {
 public:
  Allocator& allocator(int index) override {
    TT_CHECK(index == 0, "HostMemoryBackend: only device 0 exists, got ", index);
    return allocator_;
  }
  void copy(const Tensor& dst, const Tensor& src) override {
    TT_CHECK(dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() &&
                 dst.shape() == src.shape(),
             "HostMemoryBackend: copies need equal shapes and dtypes, contiguous; got ",
             dst.describe(), " and ", src.describe());
    if (dst.numel() > 0) {
      std::memmove(dst.data_ptr(), src.data_ptr(), dst.numel() * dtype_size(dst.dtype()));
    }
  }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes, int) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes, int) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void fill(const Tensor& dst, double value) override {
    TT_CHECK(dst.is_contiguous(), "HostMemoryBackend: fill needs a contiguous tensor");
    dispatch_dtype(dst.dtype(), "HostMemoryBackend::fill", [&]<typename T>() {
      T* p = static_cast<T*>(dst.data_ptr());
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) p[i] = static_cast<T>(value);
    });
  }

 private:
  CpuAllocator allocator_;
};

}  // namespace detail

/// cuda:0: the real one when this binary has the CUDA backend (chapter 06 linked) and a usable
/// GPU, the host-memory stand-in when it has no CUDA backend (a CPU build, or a chapter before
/// 06, GPU or not); std::nullopt with the backend but without a GPU (the caller skips).
inline std::optional<Device> second_device() {
  static const bool stand_in = [] {
    if (has_backend(DeviceType::kCUDA)) return false;  // the real backend
    static detail::HostMemoryBackend backend;
    register_backend(DeviceType::kCUDA, &backend);
    return true;
  }();
  if (stand_in || cuda_device_count() > 0) return Device::cuda(0);
  return std::nullopt;
}

}  // namespace tt::testing

/// Sets `var` to second_device() or skips the test (a CUDA build without a GPU).
#define TT_SECOND_DEVICE_OR_SKIP(var)                                                    \
  const std::optional<::tt::Device> var##_opt = ::tt::testing::second_device();          \
  if (!var##_opt) GTEST_SKIP() << "a CUDA build without a usable GPU: no second device"; \
  const ::tt::Device var = *var##_opt
