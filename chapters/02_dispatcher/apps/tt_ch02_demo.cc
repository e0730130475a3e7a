// Chapter 01/02 demo: tensors, views and the first dispatched kernels.
#include <iostream>

#include "tt/ops.h"

int main() {
  using namespace tt;
  try {
    Tensor a = arange(0, 6).view({2, 3});
    std::cout << "a = arange(0, 6).view({2, 3})\n" << a << "\n\n";
    Tensor t = a.transpose(0, 1);
    std::cout << "a.transpose(0, 1): shape " << t.shape() << ", strides " << t.strides()
              << ", shares storage: " << (t.data_ptr() == a.data_ptr() ? "yes" : "no") << "\n"
              << t << "\n\n";
    Tensor row = tensor({10, 20, 30}).unsqueeze(0).expand({2, 3});
    std::cout << "row expanded to [2, 3] with strides " << row.strides() << ":\n" << row << "\n\n";
    std::cout << "binary_op(\"add\", a, row) via the kernel registry:\n"
              << binary_op("add", a, row) << "\n\n";
    std::cout << "registered kernels:\n";
    for (const auto& line : KernelRegistry::instance().list()) std::cout << "  " << line << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
