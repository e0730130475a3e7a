// ============================================================================================
// YOUR EXERCISE FILE for chapter 06_cuda_basics. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch06
// Generated from solutions/06_cuda_basics/caching_allocator.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 06 exercise ch06.4: the caching allocator's size classes and block reuse. The
// bookkeeping (statistics, deallocate, empty_cache) is given.
#include "tt/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tt/error.h"
#include "tt/todo.h"

namespace tt {

namespace {
std::string mib(std::size_t bytes) {
  return detail::str(static_cast<double>(bytes) / (1024.0 * 1024.0), " MiB");
}

// Statistics of a block of `bytes` handed out (shared by both allocators).
void count_allocation(AllocatorStats& stats, std::size_t bytes) {
  stats.allocated += bytes;
  stats.peak_allocated = std::max(stats.peak_allocated, stats.allocated);
  ++stats.num_allocs;
}
}  // namespace

std::size_t size_class(std::size_t nbytes) {
  TT_TODO("ch06.4",
          "size_class and CachingAllocator::allocate: size_class(nbytes) is nbytes rounded up to "
          "a multiple of kSmallGranularity when nbytes <= kSmallSizeLimit, of kLargeGranularity "
          "above; 0 stays 0");
}

// ----- CachingAllocator --------------------------------------------------------------------

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

void* CachingAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  TT_TODO("ch06.4",
          "size_class and CachingAllocator::allocate: allocate(nbytes) returns a live block of "
          "size_class(nbytes) bytes, a cached block of exactly that class when there is one (no "
          "raw call); when raw_ is out of memory the cache is freed and one retry made, then "
          "tt::Error naming the device; stats kept; thread-safe");
}

void CachingAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_blocks_.find(ptr);
  if (it == live_blocks_.end()) {
    // Called from destructors (Storage), so it cannot throw; a foreign or double-freed pointer
    // means memory is already corrupted.
    std::fprintf(stderr,
                 "CachingAllocator(%s): deallocate of %p (%zu bytes), which is not a live "
                 "block of this allocator\n",
                 raw_.device_name().c_str(), ptr, nbytes);
    std::abort();
  }
  const std::size_t cls = it->second;
  live_blocks_.erase(it);
  stats_.allocated -= cls;
  free_blocks_[cls].push_back(ptr);
}

void CachingAllocator::release_cache_locked() {
  for (auto& [cls, blocks] : free_blocks_) {
    for (void* p : blocks) raw_.raw_free(p);
    stats_.reserved -= cls * blocks.size();
  }
  free_blocks_.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.reserved - stats_.allocated;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

// ----- UncachedAllocator -------------------------------------------------------------------

void* UncachedAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* p = raw_.raw_allocate(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  TT_CHECK(p != nullptr, "UncachedAllocator(", raw_.device_name(), "): out of memory allocating ",
           nbytes, " bytes; allocated ", mib(stats_.allocated));
  count_allocation(stats_, nbytes);
  stats_.reserved = stats_.allocated;
  ++stats_.num_system_allocs;
  return p;
}

void UncachedAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  raw_.raw_free(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.allocated -= nbytes;
  stats_.reserved = stats_.allocated;
}

AllocatorStats UncachedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void UncachedAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

}  // namespace tt
