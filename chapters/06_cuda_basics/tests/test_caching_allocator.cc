// Exercise ch06.4: the caching allocator's policy, tested on the host over a counting fake of
// cudaMalloc/cudaFree (these run without a GPU), then the same property on a real GPU.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ch06_test_util.h"
#include "tt/caching_allocator.h"
#include "tt/ops.h"

namespace tt {
namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

// A RawAllocator over std::aligned_alloc that counts calls and can pretend to have only
// `capacity` bytes (then returns nullptr, like cudaMalloc's cudaErrorMemoryAllocation).
class FakeRaw final : public RawAllocator {
 public:
  explicit FakeRaw(std::size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  ~FakeRaw() override { EXPECT_EQ(in_use_, 0u) << "blocks not returned to the fake device"; }
  void* raw_allocate(std::size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocs;
    if (nbytes > capacity_ - in_use_) return nullptr;
    void* p = std::aligned_alloc(512, (nbytes + 511) / 512 * 512);
    in_use_ += nbytes;
    sizes_[p] = nbytes;
    return p;
  }
  void raw_free(void* ptr) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++frees;
    in_use_ -= sizes_.at(ptr);
    sizes_.erase(ptr);
    std::free(ptr);
  }
  std::string device_name() const override { return "fake:0"; }

  std::size_t allocs = 0;  ///< raw_allocate calls (including failed ones)
  std::size_t frees = 0;   ///< raw_free calls

 private:
  std::mutex mutex_;
  std::size_t capacity_, in_use_ = 0;
  std::unordered_map<void*, std::size_t> sizes_;
};

TEST(Ch06_4_SizeClass, RoundsSmallTo512AndLargeTo2MiB) {
  EXPECT_EQ(size_class(0), 0u);
  EXPECT_EQ(size_class(1), 512u);
  EXPECT_EQ(size_class(512), 512u);
  EXPECT_EQ(size_class(513), 1024u);
  EXPECT_EQ(size_class(4 * 1000), 4096u);
  EXPECT_EQ(size_class(MiB - 1), MiB);
  EXPECT_EQ(size_class(MiB), MiB) << "1 MiB is still small (<= kSmallSizeLimit)";
  EXPECT_EQ(size_class(MiB + 1), 2 * MiB);
  EXPECT_EQ(size_class(2 * MiB), 2 * MiB);
  EXPECT_EQ(size_class(2 * MiB + 1), 4 * MiB);
  EXPECT_EQ(size_class(8 * 1024 * 768 * 4), 24 * MiB) << "a GPT-2 activation, B*T*C floats";
}

TEST(Ch06_4_CachingAllocator, ReusesAFreedBlockOfTheSameClass) {
  FakeRaw raw;
  CachingAllocator alloc(raw);
  void* p = alloc.allocate(1000);
  ASSERT_NE(p, nullptr);
  alloc.deallocate(p, 1000);
  void* q = alloc.allocate(700);  // same 1024-byte class
  EXPECT_EQ(q, p) << "a cached block of the same size class must be handed out again";
  EXPECT_EQ(raw.allocs, 1u) << "the second request must not reach the raw allocator";
  alloc.deallocate(q, 700);
}

TEST(Ch06_4_CachingAllocator, ResetPeakRestartsAtTheBytesInUse) {
  FakeRaw raw;
  CachingAllocator alloc(raw);
  void* a = alloc.allocate(4 * KiB);
  void* b = alloc.allocate(8 * KiB);
  alloc.deallocate(b, 8 * KiB);
  EXPECT_EQ(alloc.stats().peak_allocated, 12 * KiB);
  alloc.reset_peak();
  EXPECT_EQ(alloc.stats().peak_allocated, 4 * KiB) << "the peak restarts at what is in use";
  void* c = alloc.allocate(2 * KiB);
  EXPECT_EQ(alloc.stats().peak_allocated, 6 * KiB);
  alloc.deallocate(c, 2 * KiB);
  alloc.deallocate(a, 4 * KiB);
  EXPECT_EQ(alloc.stats().peak_allocated, 6 * KiB) << "freeing does not lower the peak";
}

TEST(Ch06_4_CachingAllocator, DifferentClassesDoNotShare) {
  FakeRaw raw;
  CachingAllocator alloc(raw);
  void* p = alloc.allocate(512);
  alloc.deallocate(p, 512);
  void* q = alloc.allocate(513);  // class 1024: the cached 512-byte block is too small
  EXPECT_NE(q, p);
  EXPECT_EQ(raw.allocs, 2u);
  alloc.deallocate(q, 513);
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.reserved, 512u + 1024u);
  EXPECT_EQ(alloc.cached_bytes(), 1536u);
}

TEST(Ch06_4_CachingAllocator, SteadyStepsStopCallingTheRawAllocator) {
  // A "training step": activations of several sizes allocated, then freed in another order.
  const std::vector<std::size_t> sizes = {24 * MiB, 3 * KiB, 96 * MiB,       24 * MiB,
                                          12,       3 * KiB, (24 * MiB) + 4, 768 * 4};
  FakeRaw raw;
  CachingAllocator alloc(raw);
  std::size_t allocs_after_first_step = 0;
  for (int step = 0; step < 10; ++step) {
    std::vector<void*> live;
    for (std::size_t n : sizes) live.push_back(alloc.allocate(n));
    EXPECT_EQ(std::set<void*>(live.begin(), live.end()).size(), live.size())
        << "two live tensors share a block at step " << step;
    for (std::size_t i : {3, 6, 1, 4, 7, 2, 5, 0})
      alloc.deallocate(live[i], sizes[i]);  // any order
    if (step == 0) allocs_after_first_step = raw.allocs;
    EXPECT_EQ(raw.allocs, allocs_after_first_step)
        << "step " << step << " called the raw allocator";
    EXPECT_EQ(alloc.stats().allocated, 0u);
  }
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.num_system_allocs, sizes.size()) << "one raw allocation per live tensor of a step";
  EXPECT_EQ(s.num_allocs, 10 * sizes.size());
  std::size_t step_bytes = 0;
  for (std::size_t n : sizes) step_bytes += size_class(n);
  EXPECT_EQ(s.peak_allocated, step_bytes);
  EXPECT_EQ(s.reserved, step_bytes);
  EXPECT_EQ(raw.frees, 0u);
}

TEST(Ch06_4_CachingAllocator, OutOfMemoryFreesTheCacheAndRetries) {
  FakeRaw raw(4 * KiB);
  CachingAllocator alloc(raw);
  void* p = alloc.allocate(2 * KiB);
  alloc.deallocate(p, 2 * KiB);       // cached: 2 KiB of the 4 KiB "device" held
  void* q = alloc.allocate(3 * KiB);  // needs the cached block's memory back
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(raw.frees, 1u) << "the cached 2 KiB block should have been released";
  EXPECT_EQ(raw.allocs, 3u) << "first block, failed attempt, retry";
  EXPECT_EQ(alloc.stats().reserved, 3 * KiB);
  alloc.deallocate(q, 3 * KiB);
}

TEST(Ch06_4_CachingAllocator, OutOfMemoryThrowsNamingTheDevice) {
  FakeRaw raw(1 * MiB);
  CachingAllocator alloc(raw);
  void* p = alloc.allocate(512 * KiB);
  EXPECT_TT_ERROR(alloc.allocate(768 * KiB), "out of memory", "fake:0", "786432 bytes");
  alloc.deallocate(p, 512 * KiB);
}

TEST(Ch06_4_CachingAllocator, EmptyCacheReturnsFreeBlocksOnly) {
  FakeRaw raw;
  CachingAllocator alloc(raw);
  void* a = alloc.allocate(10 * KiB);
  void* b = alloc.allocate(5 * MiB);
  alloc.deallocate(b, 5 * MiB);
  EXPECT_EQ(alloc.stats().reserved, 10 * KiB + 6 * MiB);
  alloc.empty_cache();
  EXPECT_EQ(raw.frees, 1u);
  EXPECT_EQ(alloc.stats().reserved, 10 * KiB) << "the live block stays reserved";
  EXPECT_EQ(alloc.stats().allocated, 10 * KiB);
  alloc.deallocate(a, 10 * KiB);
}

TEST(Ch06_4_CachingAllocator, ZeroBytesIsNullAndFree) {
  FakeRaw raw;
  CachingAllocator alloc(raw);
  EXPECT_EQ(alloc.allocate(0), nullptr);
  alloc.deallocate(nullptr, 0);
  EXPECT_EQ(raw.allocs, 0u);
  EXPECT_EQ(alloc.stats().num_allocs, 0u);
}

TEST(Ch06_4_CachingAllocator, ThreadSafe) {
  FakeRaw raw;
  CachingAllocator alloc(raw);
  constexpr int kThreads = 4, kIters = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  // An exception escaping a std::thread terminates the process: keep the first one and
  // rethrow it on the test's thread (a starter's TT_TODO must fail the test, not crash it).
  std::exception_ptr error;
  std::mutex error_mutex;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        uint32_t s = 12345u + static_cast<uint32_t>(t);
        for (int i = 0; i < kIters; ++i) {
          s = s * 1664525u + 1013904223u;
          const std::size_t n = 1 + (s >> 8) % (4 * KiB);
          auto* p = static_cast<unsigned char*>(alloc.allocate(n));
          std::memset(p, t + 1, n);  // a block shared with another thread would be overwritten
          std::this_thread::yield();
          if (p[0] != t + 1 || p[n - 1] != t + 1) ++corrupted;
          alloc.deallocate(p, n);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (error) std::rethrow_exception(error);
  EXPECT_EQ(corrupted.load(), 0) << "a block was handed to two threads at once";
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.num_allocs, static_cast<std::size_t>(kThreads * kIters));
  EXPECT_LE(s.num_system_allocs, static_cast<std::size_t>(kThreads * 8))
      << "at most one block per (thread, size class) should ever be created";
}

// ----- given code: the uncached allocator ---------------------------------------------------

TEST(Ch06_UncachedAllocator, CallsTheRawAllocatorEveryTime) {
  FakeRaw raw;
  UncachedAllocator alloc(raw);
  for (int i = 0; i < 3; ++i) alloc.deallocate(alloc.allocate(1000), 1000);
  EXPECT_EQ(raw.allocs, 3u);
  EXPECT_EQ(raw.frees, 3u);
  const AllocatorStats s = alloc.stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.peak_allocated, 1000u);
  EXPECT_EQ(s.num_system_allocs, 3u);
  FakeRaw tiny(100);
  UncachedAllocator small(tiny);
  EXPECT_TT_ERROR(small.allocate(1000), "out of memory", "fake:0");
}

// ----- on a GPU --------------------------------------------------------------------------

class Ch06_4_CudaCachingAllocator : public test06::CudaTest {
 protected:
  bool use_caching() const override { return true; }
};

TEST_F(Ch06_4_CudaCachingAllocator, SteadyTrainingStepsStopCallingCudaMalloc) {
#if TT_WITH_CUDA
  const Device dev = Device::cuda(0);
  std::size_t mallocs_after_warmup = 0;
  for (int step = 0; step < 6; ++step) {
    // A miniature step: activations of GPT-2-like and odd sizes, some work, everything freed.
    Tensor x = empty({64, 768}, {DType::kFloat32, dev});
    Tensor h = empty({64, 3072}, {DType::kFloat32, dev});
    Tensor y = empty({64, 768}, {DType::kFloat32, dev});
    Tensor odd = empty({4097}, {DType::kFloat64, dev});
    x.fill_(1.0);
    y.copy_(x);
    h.fill_(0.0);
    odd.fill_(2.0);
    EXPECT_EQ(y.to(Device::cpu()).to_vector<float>()[767], 1.0f);
    x = y = h = odd = Tensor();
    const AllocatorStats s = cuda::caching_allocator(0).stats();
    if (step == 1) mallocs_after_warmup = s.num_system_allocs;
    if (step > 1) {
      EXPECT_EQ(s.num_system_allocs, mallocs_after_warmup)
          << "step " << step << " called cudaMalloc although every size was seen before";
    }
  }
  const AllocatorStats s = cuda::caching_allocator(0).stats();
  EXPECT_GE(s.reserved, s.allocated);
  EXPECT_GE(s.peak_allocated, size_class(64 * 3072 * 4));
  cuda::empty_cache();
  EXPECT_EQ(cuda::caching_allocator(0).stats().reserved,
            cuda::caching_allocator(0).stats().allocated)
      << "empty_cache must return every free block";
#endif
}

TEST_F(Ch06_4_CudaCachingAllocator, TensorsRoundTripThroughCachedBlocks) {
  for (int64_t n : test06::kOddSizes) {
    const Tensor x = test06::random_tensor({n}, DType::kFloat32, 7 + n);
    EXPECT_TRUE(test06::same_values(x.to(Device::cuda()), x)) << "n = " << n;
    EXPECT_TRUE(test06::same_values(x.to(Device::cuda()), x)) << "n = " << n << " (reused block)";
  }
}

TEST_F(Ch06_4_CudaCachingAllocator, OutOfMemoryIsATtError) {
#if TT_WITH_CUDA
  EXPECT_TT_ERROR(cuda::caching_allocator(0).allocate(std::size_t{1} << 50), "out of memory",
                  "cuda:0");
  void* p = nullptr;
  const std::size_t huge = std::size_t{1} << 50;
  EXPECT_TT_ERROR(
      ([&] { TT_CUDA_CHECK(cudaMalloc(&p, huge)); }()),
      "CUDA error cudaErrorMemoryAllocation (out of memory) in cudaMalloc(&p, huge) at ",
      "test_caching_allocator.cc:");
#endif
}

}  // namespace
}  // namespace tt
