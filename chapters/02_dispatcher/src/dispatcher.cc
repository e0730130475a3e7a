// The kernel registry: storage of registrations (the lookup itself is exercise ch02.1) and the
// kernel observer hook of call_kernel.
#include "tt/dispatcher.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace tt {

std::string demangled_type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

KernelRegistry& KernelRegistry::instance() {
  // Constructed on first use, so registrations from any translation unit's static
  // initializers find it ready (no static initialization order problem).
  static KernelRegistry registry;
  return registry;
}

bool KernelRegistry::add(KernelEntry entry) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    auto key = std::make_pair(entry.op, entry.device);
    table_[key].push_back(std::move(entry));
    return true;
  } catch (...) {
    return false;  // out of memory during static init: nothing sensible to do
  }
}

bool KernelRegistry::has(const std::string& op, DeviceType device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.count({op, device}) > 0;
}

std::vector<std::string> KernelRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [key, entries] : table_) {
    for (const auto& e : entries) {
      std::string file = e.file;
      const auto slash = file.rfind('/');
      if (slash != std::string::npos) file = file.substr(slash + 1);
      out.push_back(e.op + " [" + device_type_name(e.device) + "] " + e.signature_name + " (" +
                    file + ":" + std::to_string(e.line) + ")");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::atomic<KernelObserver*> detail::g_kernel_observer{nullptr};

KernelObserver* set_kernel_observer(KernelObserver* observer) noexcept {
  return detail::g_kernel_observer.exchange(observer, std::memory_order_acq_rel);
}

KernelTensorArg detail::describe_kernel_tensor(const Tensor& t) {
  // Elements at distinct addresses: a dim of stride 0 (a broadcast) reads the same memory again.
  std::size_t distinct = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.strides()[static_cast<std::size_t>(d)] != 0 || t.size(d) == 0) {
      distinct *= static_cast<std::size_t>(t.size(d));
    }
  }
  return KernelTensorArg{t.shape(), t.dtype(), distinct * dtype_size(t.dtype())};
}

}  // namespace tt
