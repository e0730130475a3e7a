// Chapter 02 exercises ch02.1 and ch02.2: finding a kernel and checking its signature.
#include <sstream>

#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/todo.h"

namespace tt {

void check_kernel_signature(const KernelEntry& entry, std::type_index signature,
                            const std::string& signature_name) {
#if TT_SOLUTION
  TT_CHECK(entry.signature == signature, "kernel '", entry.op, "' for ",
           device_type_name(entry.device), " was registered with signature ", entry.signature_name,
           " but is called as ", signature_name);
#else
  TT_TODO(
      "ch02.2",
      "check_kernel_signature: returns when entry was registered with `signature`, else throws naming the op, the device and both signature names");
#endif
}

const KernelEntry& KernelRegistry::find(const std::string& op, DeviceType device,
                                        std::type_index signature,
                                        const std::string& signature_name) const {
#if TT_SOLUTION
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = table_.find({op, device});
  if (it == table_.end()) {
    // Say what exists: the devices this op has, or else the known ops.
    std::ostringstream have;
    for (const auto& [key, entries] : table_) {
      if (key.first == op) have << (have.tellp() > 0 ? ", " : "") << device_type_name(key.second);
    }
    if (have.tellp() > 0) {
      TT_THROW("no kernel for op '", op, "' on device type ", device_type_name(device),
               "; registered for: ", have.str());
    }
    std::ostringstream ops;
    std::string last;
    for (const auto& [key, entries] : table_) {
      if (key.first != last) ops << (last.empty() ? "" : ", ") << key.first;
      last = key.first;
    }
    TT_THROW("no kernel for op '", op, "' on device type ", device_type_name(device),
             ": unknown op; registered ops: ", ops.str());
  }
  const auto& entries = it->second;
  if (entries.size() > 1) {
    TT_THROW("op '", op, "' has ", entries.size(), " kernels registered for ",
             device_type_name(device), ": at ", entries[0].file, ":", entries[0].line, " and ",
             entries[1].file, ":", entries[1].line, " (register each (op, device) once)");
  }
  check_kernel_signature(entries.front(), signature, signature_name);
  return entries.front();
#else
  TT_TODO(
      "ch02.1",
      "KernelRegistry::find: the one entry registered for (op, device), its signature checked (ch02.2); throws when there is none (listing the devices that op has, or else the registered ops) or more than one (naming where each was registered)");
#endif
}

}  // namespace tt
