// AllocationWatch (tt/allocation_watch.h): the peak bytes in use of one device during a step.
#include "tt/allocation_watch.h"

#include <algorithm>

namespace tt::prof {

AllocationWatch::AllocationWatch(Device device)
    : allocator_(backend_for(device.type).allocator(device.index)),
      baseline_(allocator_.stats().allocated),
      peak_(baseline_),
      previous_(set_kernel_observer(this)) {}

AllocationWatch::~AllocationWatch() {
  set_kernel_observer(previous_);
}

std::uint64_t AllocationWatch::on_kernel_begin(const KernelCall& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  sample();
  on_call(call);
  return 0;
}

void AllocationWatch::on_kernel_end(const KernelCall&, std::uint64_t) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  sample();
}

std::size_t AllocationWatch::peak_increase() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_ - baseline_;
}

void AllocationWatch::sample() {
  peak_ = std::max(peak_, allocator_.stats().allocated);
}

}  // namespace tt::prof
