// ============================================================================================
// YOUR EXERCISE FILE for chapter 02_dispatcher. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch02
// Generated from solutions/02_dispatcher/registry.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 02 exercises ch02.1 and ch02.2: finding a kernel and checking its signature.
#include <sstream>

#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/todo.h"

namespace tt {

void check_kernel_signature(const KernelEntry& entry, std::type_index signature,
                            const std::string& signature_name) {
  TT_TODO(
      "ch02.2",
      "check_kernel_signature: returns when entry was registered with `signature`, else throws naming the op, the device and both signature names");
}

const KernelEntry& KernelRegistry::find(const std::string& op, DeviceType device,
                                        std::type_index signature,
                                        const std::string& signature_name) const {
  TT_TODO(
      "ch02.1",
      "KernelRegistry::find: the one entry registered for (op, device), its signature checked (ch02.2); throws when there is none (listing the devices that op has, or else the registered ops) or more than one (naming where each was registered)");
}

}  // namespace tt
