// Algorithm and bus bandwidth of an all-reduce (tt/bandwidth.h); bus_bandwidth is exercise
// ch12.6.
#include "tt/bandwidth.h"

#include <cmath>

#include "tt/error.h"
#include "tt/todo.h"

namespace tt::dist {

double algorithm_bandwidth(int64_t bytes, double seconds) {
  TT_CHECK(bytes >= 0 && seconds > 0 && std::isfinite(seconds),
           "algorithm_bandwidth: needs bytes >= 0 and a positive finite time, got bytes=", bytes,
           " seconds=", seconds);
  return static_cast<double>(bytes) / seconds;
}

double bus_bandwidth(int64_t bytes, double seconds, int world_size) {
#if TT_SOLUTION
  TT_CHECK(bytes >= 0 && seconds > 0 && std::isfinite(seconds) && world_size >= 1,
           "bus_bandwidth: needs bytes >= 0, a positive finite time and world_size >= 1, got "
           "bytes=",
           bytes, " seconds=", seconds, " world_size=", world_size);
  const double n = world_size;
  return static_cast<double>(bytes) / seconds * 2.0 * (n - 1) / n;
#else
  TT_TODO("ch12.6",
          "bus_bandwidth: the bus bandwidth of an all-reduce of `bytes` in `seconds` on "
          "`world_size` ranks as nccl-tests defines it, in bytes per second (0 for one rank); "
          "throws tt::Error for bytes < 0, a time that is not positive and finite, or "
          "world_size < 1");
#endif
}

}  // namespace tt::dist
