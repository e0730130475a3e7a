/// @file dispatcher.h
/// @brief The kernel registry: ops find their implementation by (op name, device type), with
/// the C++ signature checked at every lookup.
///
/// A kernel is a plain function. It is registered once, next to its definition:
/// @code
/// void add_cpu(const Tensor& out, const Tensor& a, const Tensor& b);
/// TT_REGISTER_KERNEL("add", DeviceType::kCPU, add_cpu);
/// @endcode
/// and called through the registry with the signature the caller expects:
/// @code
/// call_kernel<BinaryKernel>("add", a.device(), out, a, b);
/// @endcode
/// If the registered function has another signature the lookup throws, naming both, instead of
/// calling a function through the wrong type (undefined behaviour).
///
/// **Observing dispatched kernels.** Every call_kernel() can be watched by one process-wide
/// KernelObserver (set_kernel_observer): it is told the op name, the device and the shape, dtype
/// and bytes of every tensor argument just before the kernel runs and just after it returns.
/// Chapter 10's per-op profiler is such an observer. When none is installed (the default) the
/// cost is one atomic load and a branch per call; nothing is collected.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tt/device.h"
#include "tt/tensor.h"

namespace tt {

/// Readable C++ name of a type (demangled typeid name), e.g. "void (tt::Tensor const&)".
std::string demangled_type_name(const std::type_info& type);

/// Everything the registry knows about one registered kernel.
struct KernelEntry {
  std::string op;                           ///< op name, e.g. "add"
  DeviceType device = DeviceType::kCPU;     ///< device type it runs on
  void (*fn)() = nullptr;                   ///< the function, type-erased
  std::type_index signature{typeid(void)};  ///< exact function type it was registered with
  std::string signature_name;               ///< readable form of `signature`
  std::string file;                         ///< where TT_REGISTER_KERNEL was written
  int line = 0;                             ///< line of the registration
};

/// Throws tt::Error naming the op, the device and both signatures when `entry` was registered
/// with a signature other than `signature` (exercise ch02.2).
void check_kernel_signature(const KernelEntry& entry, std::type_index signature,
                            const std::string& signature_name);

/// The process-wide table of kernels.
class KernelRegistry {
 public:
  /// The single registry.
  static KernelRegistry& instance();

  /// Records a kernel. Never throws and never rejects: it runs during static initialization,
  /// where an exception would abort the program. Problems (a duplicate) are reported by find().
  bool add(KernelEntry entry) noexcept;

  /// The kernel of `op` for `device`, checked with check_kernel_signature (exercise ch02.1).
  /// Throws tt::Error when the op has no kernel for that device (listing the devices it has),
  /// when the op is unknown (listing the known ops), when two kernels were registered for the
  /// same (op, device), or when the signature differs (naming both signatures).
  const KernelEntry& find(const std::string& op, DeviceType device, std::type_index signature,
                          const std::string& signature_name) const;

  /// Typed lookup: the function pointer of `op` on `device` with signature `Sig`.
  template <typename Sig>
  Sig* find(const std::string& op, DeviceType device) const {
    const KernelEntry& e = find(op, device, typeid(Sig), demangled_type_name(typeid(Sig)));
    return reinterpret_cast<Sig*>(e.fn);
  }

  /// Every registration as "op [device] signature (file:line)", sorted (for docs and errors).
  std::vector<std::string> list() const;

  /// True when `op` has a kernel for `device` (no signature check).
  bool has(const std::string& op, DeviceType device) const;

 private:
  KernelRegistry() = default;
  mutable std::mutex mutex_;
  // Key: (op, device). A vector so that duplicate registrations can be reported, not lost.
  std::map<std::pair<std::string, DeviceType>, std::vector<KernelEntry>> table_;
};

/// Registers `fn` as the kernel of `op` on `device`; the signature is deduced from `fn`.
/// Returns true (so it can initialize a static variable).
template <typename Sig>
bool register_kernel(const char* op, DeviceType device, Sig* fn, const char* file, int line) {
  KernelEntry e;
  e.op = op;
  e.device = device;
  e.fn = reinterpret_cast<void (*)()>(fn);
  e.signature = std::type_index(typeid(Sig));
  e.signature_name = demangled_type_name(typeid(Sig));
  e.file = file;
  e.line = line;
  return KernelRegistry::instance().add(std::move(e));
}

/// One tensor argument of a dispatched kernel call, as a KernelObserver sees it.
struct KernelTensorArg {
  Shape shape;                    ///< its shape
  DType dtype = DType::kFloat32;  ///< its element type
  std::size_t bytes = 0;          ///< footprint: elements at distinct addresses x element size
};

/// A dispatched kernel call: what call_kernel() tells the KernelObserver.
struct KernelCall {
  const std::string& op;                 ///< the op name the kernel was looked up with
  Device device;                         ///< the device it runs on
  std::vector<KernelTensorArg> tensors;  ///< every defined Tensor argument, in argument order
                                         ///< (a std::vector<Tensor> argument adds each element)
};

/// Watches every call_kernel(): on_kernel_begin() just before the kernel runs, on_kernel_end()
/// just after it returns (or throws), with the same KernelCall and the token begin returned.
/// Calls may come from several threads; an observer that keeps state must lock it.
class KernelObserver {
 public:
  virtual ~KernelObserver() = default;
  /// Before the kernel; the returned token is passed to on_kernel_end. May throw (the kernel
  /// then does not run).
  virtual std::uint64_t on_kernel_begin(const KernelCall& call) = 0;
  /// After the kernel returned or threw; must not throw.
  virtual void on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept = 0;
};

namespace detail {
/// The installed observer (nullptr: none). Use kernel_observer() / set_kernel_observer().
extern std::atomic<KernelObserver*> g_kernel_observer;
}  // namespace detail

/// The installed KernelObserver, or nullptr (the default).
inline KernelObserver* kernel_observer() noexcept {
  return detail::g_kernel_observer.load(std::memory_order_acquire);
}

/// Installs `observer` for every thread (nullptr removes it) and returns the previous one, so a
/// scope can restore it. The caller keeps the observer alive while it is installed.
KernelObserver* set_kernel_observer(KernelObserver* observer) noexcept;

namespace detail {

/// The KernelTensorArg of a tensor (footprint bytes: broadcast, stride-0 dims count once).
KernelTensorArg describe_kernel_tensor(const Tensor& t);

inline void describe_kernel_arg(std::vector<KernelTensorArg>& out, const Tensor& t) {
  if (t.defined()) out.push_back(describe_kernel_tensor(t));
}
inline void describe_kernel_arg(std::vector<KernelTensorArg>& out, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) describe_kernel_arg(out, t);
}
/// Arguments that are not tensors (scalars, options structs) are not described.
template <typename T>
void describe_kernel_arg(std::vector<KernelTensorArg>& /*out*/, const T& /*arg*/) {}

/// Tells `observer` about one call for the lifetime of this object (begin now, end when
/// destroyed: after the kernel returned, or while an exception leaves call_kernel).
class ObservedKernelCall {
 public:
  template <typename... Args>
  ObservedKernelCall(KernelObserver& observer, const std::string& op, Device device,
                     const Args&... args)
      : observer_(observer), call_{op, device, {}} {
    (describe_kernel_arg(call_.tensors, args), ...);
    token_ = observer_.on_kernel_begin(call_);
  }
  ~ObservedKernelCall() { observer_.on_kernel_end(call_, token_); }
  ObservedKernelCall(const ObservedKernelCall&) = delete;
  ObservedKernelCall& operator=(const ObservedKernelCall&) = delete;

 private:
  KernelObserver& observer_;
  KernelCall call_;
  std::uint64_t token_ = 0;
};

}  // namespace detail

/// Looks up `op` for `device.type` with signature `Sig` and calls it with `args`, telling the
/// installed KernelObserver (if any) before and after.
template <typename Sig, typename... Args>
decltype(auto) call_kernel(const std::string& op, Device device, Args&&... args) {
  Sig* fn = KernelRegistry::instance().find<Sig>(op, device.type);
  if (KernelObserver* observer = kernel_observer(); observer != nullptr) [[unlikely]] {
    const detail::ObservedKernelCall observed(*observer, op, device, args...);
    return fn(std::forward<Args>(args)...);
  }
  return fn(std::forward<Args>(args)...);
}

}  // namespace tt

/// Pastes two tokens after macro-expanding them (so __COUNTER__ becomes a number first).
#define TT_CONCAT_IMPL(a, b) a##b
/// See TT_CONCAT_IMPL: the extra level of indirection is what expands the arguments.
#define TT_CONCAT(a, b) TT_CONCAT_IMPL(a, b)

/// Registers a kernel at static-initialization time. Can be used any number of times in one
/// file: each use defines a uniquely named variable thanks to __COUNTER__.
#define TT_REGISTER_KERNEL(op, device_type, fn)                                        \
  [[maybe_unused]] static const bool TT_CONCAT(tt_kernel_registration_, __COUNTER__) = \
      ::tt::register_kernel(op, device_type, fn, __FILE__, __LINE__)
