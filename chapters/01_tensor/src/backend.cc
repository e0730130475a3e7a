// The backend registry, the aligned CPU allocator and the CPU backend.
#include "tt/backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "tt/tensor.h"

namespace tt {

// ----- registry --------------------------------------------------------------------------

namespace {
std::array<DeviceBackend*, kNumDeviceTypes>& backends() {
  static std::array<DeviceBackend*, kNumDeviceTypes> table{};
  return table;
}
}  // namespace

void register_backend(DeviceType type, DeviceBackend* backend) {
  auto& slot = backends()[static_cast<int>(type)];
  TT_CHECK(slot == nullptr, "register_backend: a backend for ", device_type_name(type),
           " is already registered");
  slot = backend;
}

bool has_backend(DeviceType type) {
  return backends()[static_cast<int>(type)] != nullptr;
}

DeviceBackend& backend_for(DeviceType type) {
  DeviceBackend* b = backends()[static_cast<int>(type)];
  TT_CHECK(b != nullptr, "no backend registered for device type '", device_type_name(type),
           "' (CUDA needs a build with CUDA enabled; see chapter 06)");
  return *b;
}

// ----- the bfloat16 cast slot -------------------------------------------------------------

namespace {
std::atomic<BFloat16Cast>& bfloat16_cast_slot() {
  static std::atomic<BFloat16Cast> slot{nullptr};
  return slot;
}
}  // namespace

void set_bfloat16_cast(BFloat16Cast cast) {
  TT_CHECK(cast != nullptr, "set_bfloat16_cast: null cast");
  BFloat16Cast expected = nullptr;
  TT_CHECK(bfloat16_cast_slot().compare_exchange_strong(expected, cast) || expected == cast,
           "set_bfloat16_cast: another bfloat16 cast is already installed");
}

bool has_bfloat16_cast() {
  return bfloat16_cast_slot().load() != nullptr;
}

BFloat16Cast bfloat16_cast(const char* op, DType dst, DType src, Device device) {
  BFloat16Cast cast = bfloat16_cast_slot().load();
  TT_CHECK(cast != nullptr, op, ": ", dtype_name(src), " -> ", dtype_name(dst), " on ", device,
           " needs the bfloat16 cast of chapter 11 (rounding to nearest even, exercise ch11.1), ",
           "which this program does not link (link tt_ch11 or a later chapter)");
  return cast;
}

// ----- CPU allocator ---------------------------------------------------------------------

struct CpuAllocator::Counters {
  std::atomic<std::size_t> allocated{0};
  std::atomic<std::size_t> peak{0};
  std::atomic<std::size_t> num_allocs{0};
  std::atomic<std::size_t> num_system_allocs{0};
};

CpuAllocator::Counters& CpuAllocator::counters() {
  static Counters c;
  return c;
}

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

/// The freed large blocks of every CpuAllocator: by rounded size for reuse, by age (the order
/// they were freed in) for eviction. Never destroyed: tensors in other static objects may be
/// freed after it would have been.
struct CpuBlockCache {
  struct Block {
    void* ptr;
    std::size_t bytes;
  };
  std::mutex mutex;
  std::atomic<std::size_t> bytes{0};  // held in the cache (rounded sizes); written under mutex
  std::uint64_t next_age = 0;
  std::map<std::uint64_t, Block> by_age;              // oldest first
  std::multimap<std::size_t, std::uint64_t> by_size;  // rounded size -> age

  /// The most recently freed cached block of exactly `size` bytes (the likeliest to be still in
  /// the CPU's caches), or nullptr.
  void* take(std::size_t size) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = by_size.upper_bound(size);
    if (it == by_size.begin() || (--it)->first != size) return nullptr;
    const auto age = by_age.find(it->second);
    void* p = age->second.ptr;
    bytes.fetch_sub(age->second.bytes);
    by_age.erase(age);
    by_size.erase(it);
    return p;
  }
  /// Keeps `ptr` (`size` bytes), then frees the oldest blocks while more than `cap` bytes are
  /// cached.
  void put(void* ptr, std::size_t size, std::size_t cap) {
    std::lock_guard<std::mutex> lock(mutex);
    const std::uint64_t age = next_age++;
    by_age.emplace(age, Block{ptr, size});
    by_size.emplace(size, age);
    bytes.fetch_add(size);
    while (bytes.load() > cap && !by_age.empty()) evict(by_age.begin());
  }
  /// Frees every cached block.
  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    while (!by_age.empty()) evict(by_age.begin());
  }

 private:
  void evict(std::map<std::uint64_t, Block>::iterator it) {
    const Block b = it->second;
    auto [lo, hi] = by_size.equal_range(b.bytes);
    for (auto s = lo; s != hi; ++s) {
      if (s->second == it->first) {
        by_size.erase(s);
        break;
      }
    }
    by_age.erase(it);
    bytes.fetch_sub(b.bytes);
    std::free(b.ptr);
  }
};

CpuBlockCache& block_cache() {
  static auto& cache = *std::make_unique<CpuBlockCache>().release();
  return cache;
}

std::size_t rounded_size(std::size_t nbytes) {
  return (nbytes + CpuAllocator::kAlignment - 1) / CpuAllocator::kAlignment *
         CpuAllocator::kAlignment;
}

}  // namespace

bool CpuAllocator::caching_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TT_CPU_CACHING");
    return !kSanitized && (env == nullptr || std::strcmp(env, "0") != 0);
  }();
  return enabled;
}

void* CpuAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const std::size_t rounded = rounded_size(nbytes);
  auto& c = counters();
  void* p = nullptr;
  if (rounded >= kCacheMinBytes && caching_enabled()) {
    p = block_cache().take(rounded);
  }
  if (p == nullptr) {
    p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr &&
        block_cache().bytes.load() > 0) {  // the cache may hold what the system lacks
      release_cached();
      p = std::aligned_alloc(kAlignment, rounded);
    }
    TT_CHECK(p != nullptr, "CpuAllocator: out of memory allocating ", nbytes, " bytes");
    c.num_system_allocs.fetch_add(1);
  }
  const std::size_t now = c.allocated.fetch_add(nbytes) + nbytes;
  std::size_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  c.num_allocs.fetch_add(1);
  return p;
}

void CpuAllocator::deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  auto& c = counters();
  c.allocated.fetch_sub(nbytes);
  const std::size_t rounded = rounded_size(nbytes);
  if (rounded >= kCacheMinBytes && caching_enabled()) {
    block_cache().put(ptr, rounded, std::min(c.peak.load() + kCacheMinBytes, kCacheMaxBytes));
    return;
  }
  std::free(ptr);
}

void CpuAllocator::release_cached() {
  block_cache().clear();
}

AllocatorStats CpuAllocator::stats() const {
  const auto& c = counters();
  AllocatorStats s;
  s.allocated = c.allocated.load();
  s.peak_allocated = c.peak.load();
  s.reserved = s.allocated + block_cache().bytes.load();
  s.num_allocs = c.num_allocs.load();
  s.num_system_allocs = c.num_system_allocs.load();
  return s;
}

// ----- CPU copy ------------------------------------------------------------------------

void cpu_copy_strided(const Tensor& dst, const Tensor& src) {
  TT_CHECK(dst.shape() == src.shape(), "copy_: shape mismatch, dst ", dst.shape(), " vs src ",
           src.shape());
  TT_CHECK(dst.device().is_cpu() && src.device().is_cpu(),
           "cpu_copy_strided: expected CPU tensors, got ", dst.device(), " and ", src.device());
  if (dst.dtype() == DType::kBFloat16 && src.dtype() == DType::kBFloat16) {  // the bits
    cpu_map_strided<bfloat16, bfloat16>(dst, src, "copy_", [](bfloat16 v) { return v; });
    return;
  }
  dispatch_dtype(dst.dtype(), "copy_", [&]<typename D>() {
    dispatch_dtype(src.dtype(), "copy_", [&]<typename S>() {
      cpu_map_strided<D, S>(dst, src, "copy_", [](S v) { return static_cast<D>(v); });
    });
  });
}

// ----- CPU backend -----------------------------------------------------------------------

namespace {

class CpuBackend final : public DeviceBackend {
 public:
  Allocator& allocator(int index) override {
    TT_CHECK(index == 0, "CPU device index must be 0, got ", index);
    return allocator_;
  }
  void copy(const Tensor& dst, const Tensor& src) override { cpu_copy_strided(dst, src); }
  void copy_from_host(void* dst, const void* src, std::size_t nbytes, int) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes, int) override {
    if (nbytes) std::memcpy(dst, src, nbytes);
  }
  void fill(const Tensor& dst, double value) override {
    if (dst.is_contiguous()) {
      dispatch_dtype(dst.dtype(), "fill_", [&]<typename T>() {
        T* p = static_cast<T*>(dst.data_ptr());
        const T v = static_cast<T>(value);
        for (int64_t i = 0, n = dst.numel(); i < n; ++i) p[i] = v;
      });
      return;
    }
    // Non-contiguous: copy from a broadcast scalar (stride 0 everywhere).
    cpu_copy_strided(dst, scalar_tensor(value, {dst.dtype()}).expand(dst.shape()));
  }

 private:
  CpuAllocator allocator_;
};

const bool kCpuBackendRegistered = [] {
  static CpuBackend backend;
  register_backend(DeviceType::kCPU, &backend);
  return true;
}();

}  // namespace

}  // namespace tt
