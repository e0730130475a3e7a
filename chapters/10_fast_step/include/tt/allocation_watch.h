/// @file allocation_watch.h
/// @brief The peak memory of a piece of work at kernel granularity: a KernelObserver that samples
/// one device allocator's bytes in use around every dispatched kernel.
///
/// The allocators' own `peak_allocated` is a maximum since the process started and cannot be
/// reset; this watch measures the peak of one step (a forward and backward, a loss) relative to
/// what was in use when it was installed:
/// @code
///   tt::prof::AllocationWatch watch(Device::cuda());
///   step();
///   double mb = watch.peak_increase() / 1e6;
/// @endcode
/// Allocations and frees between two kernels are not seen individually, but every tensor a
/// kernel reads or writes is alive at its start or end, so the peak of live tensors is. Costs one
/// AllocatorStats read per kernel boundary; only one KernelObserver is installed at a time (the
/// profiler is one too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "tt/backend.h"
#include "tt/dispatcher.h"

namespace tt::prof {

/// Installs itself as the kernel observer at construction (restoring the previous one at
/// destruction) and records the most bytes `device`'s allocator had in use at any kernel start
/// or end. Subclasses may also look at every call (on_call).
class AllocationWatch : public KernelObserver {
 public:
  /// Starts watching `device` (its allocator's current bytes in use are the baseline).
  explicit AllocationWatch(Device device);
  /// Restores the observer that was installed before.
  ~AllocationWatch() override;
  AllocationWatch(const AllocationWatch&) = delete;
  AllocationWatch& operator=(const AllocationWatch&) = delete;

  /// KernelObserver: samples the allocator, then calls on_call (thread-safe).
  std::uint64_t on_kernel_begin(const KernelCall& call) override;
  /// KernelObserver: samples the allocator (thread-safe).
  void on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept override;

  /// Peak bytes in use above the baseline (0 if never above it).
  std::size_t peak_increase() const;

 protected:
  /// Called (under the watch's lock) at the start of every kernel call.
  virtual void on_call(const KernelCall& call) { (void)call; }

 private:
  void sample();

  Allocator& allocator_;
  std::size_t baseline_, peak_;
  mutable std::mutex mutex_;
  KernelObserver* previous_;
};

}  // namespace tt::prof
