/// @file caching_allocator.h
/// @brief A caching allocator: freed blocks go to per-size-class free lists and are handed out
/// again, so a training loop that allocates the same sizes every step stops calling the
/// system allocator (cudaMalloc) after its first step.
///
/// Why: `cudaMalloc` and `cudaFree` are slow (tens of microseconds to milliseconds) and
/// `cudaFree` synchronizes the whole device. A training step allocates hundreds of activations
/// and gradients and frees them again; caching turns each of those into a map lookup.
///
/// The allocator is plain C++ over a RawAllocator (cudaMalloc/cudaFree for a GPU, anything in
/// tests), so its policy is tested on any machine. One instance serves one device; chapter 06's
/// CUDA backend keeps one per GPU.
///
/// Size classes: requests are rounded up (size_class()) to a multiple of
/// \f$ 512 \f$ bytes up to kSmallSizeLimit and of \f$ 2\,\text{MiB} \f$ above. A freed block is
/// reused only for a request of the same class (no splitting, no best fit: simple, and waste is
/// bounded by the rounding).
///
/// Reuse is safe without events because everything of a device runs on one stream (see
/// tt/cuda_device.h): a block freed on the host may still be read by a queued kernel, but any
/// kernel that receives the block later is queued after that one.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tt/backend.h"

namespace tt {

/// Where a CachingAllocator gets its memory from (cudaMalloc/cudaFree of one GPU, or a test
/// double that counts calls).
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  /// Returns `nbytes` (> 0) bytes, or nullptr when the device is out of memory (so that the
  /// caller can release its cache and retry); throws tt::Error on any other failure.
  virtual void* raw_allocate(std::size_t nbytes) = 0;
  /// Returns a block obtained from raw_allocate. Must not throw.
  virtual void raw_free(void* ptr) noexcept = 0;
  /// The device this memory belongs to, for error messages ("cuda:0").
  virtual std::string device_name() const = 0;
};

/// Requests up to this size (1 MiB) are "small" and rounded to kSmallGranularity.
inline constexpr std::size_t kSmallSizeLimit = std::size_t{1} << 20;
/// Rounding of small requests: 512 bytes (keeps every block 512-byte aligned for vector loads).
inline constexpr std::size_t kSmallGranularity = 512;
/// Rounding of large requests: 2 MiB.
inline constexpr std::size_t kLargeGranularity = std::size_t{2} << 20;

/// The size class of a request: `nbytes` rounded up to a multiple of kSmallGranularity when
/// `nbytes <= kSmallSizeLimit`, of kLargeGranularity otherwise; 0 stays 0 (exercise ch06.4).
std::size_t size_class(std::size_t nbytes);

/// An Allocator that caches freed blocks per size class. Thread-safe (one mutex).
///
/// Statistics: `allocated` counts the size classes of live blocks, `reserved` every byte held
/// from the RawAllocator (live + cached), `num_system_allocs` the raw_allocate calls.
class CachingAllocator final : public Allocator {
 public:
  /// Caches blocks of `raw`, which must outlive this allocator.
  explicit CachingAllocator(RawAllocator& raw) : raw_(raw) {}
  /// Returns every cached block to the RawAllocator (blocks still in use are left alone).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of size_class(nbytes) bytes: a cached one of that class when there is one,
  /// otherwise a new one from the RawAllocator; when that fails, frees the whole cache and tries
  /// once more before throwing tt::Error ("out of memory", with the statistics). nullptr for 0
  /// bytes (exercise ch06.4).
  void* allocate(std::size_t nbytes) override;
  /// Puts a block back on the free list of its class (never calls the RawAllocator).
  void deallocate(void* ptr, std::size_t nbytes) override;
  /// Current statistics.
  AllocatorStats stats() const override;
  /// Returns every cached (free) block to the RawAllocator; `reserved` drops to `allocated`.
  void empty_cache();
  /// Bytes held in free lists (reserved - allocated).
  std::size_t cached_bytes() const;
  /// Restarts the peak: `peak_allocated` becomes the bytes allocated now (to measure the peak of
  /// one phase, e.g. one training step, call this before it and read stats() after it).
  void reset_peak();

 private:
  void release_cache_locked();  // frees every cached block; mutex_ held

  RawAllocator& raw_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks_;  // size class -> blocks
  std::unordered_map<void*, std::size_t> live_blocks_;               // block -> size class
  AllocatorStats stats_;
};

/// An Allocator that calls the RawAllocator every time (no cache): what the CUDA backend uses
/// when caching is switched off, e.g. under compute-sanitizer, which then sees the exact bounds
/// of every tensor. Thread-safe.
class UncachedAllocator final : public Allocator {
 public:
  /// Allocates from `raw`, which must outlive this allocator.
  explicit UncachedAllocator(RawAllocator& raw) : raw_(raw) {}
  /// raw_allocate(nbytes) (nullptr for 0 bytes); throws tt::Error when out of memory.
  void* allocate(std::size_t nbytes) override;
  /// raw_free(ptr).
  void deallocate(void* ptr, std::size_t nbytes) override;
  /// Current statistics (reserved == allocated).
  AllocatorStats stats() const override;
  /// Restarts the peak at the bytes allocated now (as CachingAllocator::reset_peak).
  void reset_peak();

 private:
  RawAllocator& raw_;
  mutable std::mutex mutex_;
  AllocatorStats stats_;
};

}  // namespace tt
