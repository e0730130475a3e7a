/// @file generator.h
/// @brief Seeded random numbers: the same seed gives the same tensors on every machine.
#pragma once

#include <cstdint>
#include <random>

namespace tt {

/// A seeded source of random numbers (mt19937_64, whose output the C++ standard fixes).
/// Normal samples use the Box-Muller transform implemented here, not std::normal_distribution
/// (whose algorithm differs between standard libraries).
class Generator {
 public:
  /// Creates a generator with the given seed.
  explicit Generator(uint64_t seed = 1337) { manual_seed(seed); }
  /// Restarts the sequence from `seed`.
  void manual_seed(uint64_t seed) {
    engine_.seed(seed);
    has_spare_ = false;
  }
  /// Next raw 64-bit value.
  uint64_t next_u64() { return engine_(); }
  /// Uniform double in [0, 1) with 53 random bits.
  double next_uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Standard normal sample N(0, 1): z = sqrt(-2 ln u1) cos(2 pi u2), the sine half cached.
  double next_normal();

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

/// The process-wide default generator (used when no generator is passed).
Generator& default_generator();

/// Re-seeds the default generator.
void manual_seed(uint64_t seed);

}  // namespace tt
