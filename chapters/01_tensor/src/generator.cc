#include "tt/generator.h"

#include <cmath>
#include <numbers>

namespace tt {

double Generator::next_normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u keeps the logarithm's argument in (0, 1].
  const double u1 = 1.0 - next_uniform();
  const double u2 = next_uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

Generator& default_generator() {
  static Generator gen(1337);
  return gen;
}

void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

}  // namespace tt
