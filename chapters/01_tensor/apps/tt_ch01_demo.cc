// Chapter 01 demo: a tensor, its views, and what they share.
#include <iostream>

#include "tt/tensor.h"

int main() {
  using namespace tt;
  try {
    Tensor x = arange(0, 24).view({2, 3, 4});
    std::cout << "x = arange(0, 24).view({2, 3, 4})  shape " << x.shape() << " strides "
              << x.strides() << "\n"
              << x << "\n\n";
    Tensor p = x.permute({2, 0, 1});
    std::cout << "x.permute({2, 0, 1}): shape " << p.shape() << " strides " << p.strides()
              << " contiguous: " << (p.is_contiguous() ? "yes" : "no") << "\n\n";
    Tensor s = x.slice(2, 1, 4, 2);
    std::cout << "x.slice(2, 1, 4, 2): offset " << s.offset() << " strides " << s.strides() << "\n"
              << s << "\n\n";
    Generator gen(0);
    std::cout << "randn({2, 3}) with seed 0:\n" << randn({2, 3}, gen) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
