// The kernel registry: storage of registrations (the lookup itself is exercise ch02.1).
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

}  // namespace tt
