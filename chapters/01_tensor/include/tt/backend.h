/// @file backend.h
/// @brief What a device must provide so that tensors can live on it: an Allocator for its
/// memory and a DeviceBackend that copies and fills.
///
/// Chapter 01 registers the CPU backend; chapter 06 registers the CUDA one. Compute kernels
/// (add, matmul, ...) are not part of a backend: they go through the kernel registry of
/// chapter 02.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tt/device.h"
#include "tt/dtype.h"

namespace tt {

class Tensor;

/// Allocation statistics, in bytes (what a caching allocator reports too).
struct AllocatorStats {
  std::size_t allocated = 0;          ///< bytes in use: handed out, not yet returned (leak tests)
  std::size_t peak_allocated = 0;     ///< maximum of `allocated` since start
  std::size_t reserved = 0;           ///< bytes held from the system (>= allocated when caching)
  std::size_t num_allocs = 0;         ///< number of allocate() calls
  std::size_t num_system_allocs = 0;  ///< calls that went to the system (malloc/cudaMalloc)
};

/// Hands out raw device memory. Implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns at least `nbytes` bytes (nullptr for 0 bytes); throws tt::Error when out of memory.
  virtual void* allocate(std::size_t nbytes) = 0;
  /// Returns memory obtained from allocate(nbytes) with the same `nbytes`.
  virtual void deallocate(void* ptr, std::size_t nbytes) = 0;
  /// Current statistics.
  virtual AllocatorStats stats() const = 0;
};

/// CPU memory aligned to kAlignment bytes (so SIMD loads of any row start are aligned).
///
/// Blocks of kCacheMinBytes or more are cached when freed and handed out again for a request of
/// the same rounded size: a training step frees and reallocates the same large activations every
/// step, and a block that went back to the system comes back as fresh pages, each of which the
/// kernel must fault in and zero on first touch (glibc returns blocks over 32 MiB to the system
/// at once). The cache keeps at most `peak_allocated` + kCacheMinBytes bytes (so it never more
/// than doubles what the program itself used at its peak; the MiB covers the rounding), and never
/// more than kCacheMaxBytes (a model loaded on the CPU and moved to a GPU leaves no more behind),
/// and drops its oldest blocks first. It is off in builds
/// with AddressSanitizer (which must see every free to find a use after free) and when the
/// environment variable TT_CPU_CACHING is "0".
class CpuAllocator final : public Allocator {
 public:
  /// Alignment of every block: a cache line, enough for AVX-512 loads.
  static constexpr std::size_t kAlignment = 64;
  /// Smallest block (rounded size) that is cached when freed: 1 MiB. Smaller blocks go back
  /// to malloc's own free lists, which already reuse them.
  static constexpr std::size_t kCacheMinBytes = std::size_t{1} << 20;
  /// Most bytes the cache holds: 1 GiB.
  static constexpr std::size_t kCacheMaxBytes = std::size_t{1} << 30;
  /// Aligned allocation rounded up to a multiple of kAlignment: a cached block of that size when
  /// there is one, otherwise a new one from the system.
  void* allocate(std::size_t nbytes) override;
  /// Frees a block from allocate(): into the cache (kCacheMinBytes or more, caching on), or to
  /// the system.
  void deallocate(void* ptr, std::size_t nbytes) override;
  /// Process-wide counts of every CpuAllocator: `allocated` is the bytes in use (the sizes
  /// requested, before rounding), so a step that frees what it allocates leaves it unchanged
  /// (Ch09_Leaks checks 1,100 GPT-2 steps); `peak_allocated` its maximum; `reserved` adds the
  /// cached bytes; `num_system_allocs` counts the blocks that came from the system.
  AllocatorStats stats() const override;
  /// Returns every cached block to the system.
  static void release_cached();
  /// Whether freed large blocks are cached (see the class comment).
  static bool caching_enabled();

 private:
  struct Counters;
  static Counters& counters();
};

/// Device runtime services used by Tensor: memory, copies and fill.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// The allocator of device number `index` of this type.
  virtual Allocator& allocator(int index) = 0;
  /// Element-wise copy between two tensors of this device type with the same shape (dtypes may
  /// differ: values are converted; either side may be non-contiguous or broadcast). Tensor::copy_
  /// never sends bfloat16 here except for a CPU bfloat16-to-bfloat16 copy: every other copy with
  /// a bfloat16 side goes to the bfloat16 cast (set_bfloat16_cast).
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  /// Copies `nbytes` of contiguous memory from the host to this device (`device_index`). The
  /// host buffer may be reused or freed as soon as the call returns; the copy itself may still
  /// be in flight (ordered before any later work of the device: CUDA stages it, chapter 06).
  virtual void copy_from_host(void* dst, const void* src, std::size_t nbytes, int device_index) = 0;
  /// Copies `nbytes` of contiguous memory from this device to the host.
  virtual void copy_to_host(void* dst, const void* src, std::size_t nbytes, int device_index) = 0;
  /// Sets every element of `dst` (any strides) to `value` converted to its dtype.
  virtual void fill(const Tensor& dst, double value) = 0;
  /// Waits until all queued work on the device has finished (no-op on the CPU).
  virtual void synchronize(int device_index) {}
};

/// Installs the backend of a device type (called once from a static registration).
/// Throws tt::Error if one is already installed.
void register_backend(DeviceType type, DeviceBackend* backend);

/// The backend of a device type; throws tt::Error naming the device when none is registered
/// (e.g. CUDA in a build without CUDA, or before chapter 06).
DeviceBackend& backend_for(DeviceType type);

/// True when a backend for `type` is registered.
bool has_backend(DeviceType type);

/// A bfloat16 cast: `dst = src` element by element for two tensors of one device and one shape,
/// any strides (src may be broadcast), where one side is bfloat16 and the other float32 or
/// bfloat16. float32 -> bfloat16 rounds to nearest even; bfloat16 -> float32 is exact.
using BFloat16Cast = void (*)(const Tensor& dst, const Tensor& src);

/// Installs the bfloat16 cast used by Tensor::copy_, to(), fill_ and the creation functions for
/// every conversion to or from bfloat16 (and every bfloat16 copy off the CPU). Chapter 11
/// installs it (the rounding is its exercise ch11.1); chapter 01 holds only this slot, so that
/// it does not depend on a later chapter. Installing a second, different cast throws tt::Error.
void set_bfloat16_cast(BFloat16Cast cast);

/// The installed bfloat16 cast; throws tt::Error naming `op`, both dtypes and the device when
/// none is installed (a program that does not link chapter 11).
BFloat16Cast bfloat16_cast(const char* op, DType dst, DType src, Device device);

/// True when a bfloat16 cast is installed (chapter 11 is linked).
bool has_bfloat16_cast();

}  // namespace tt
