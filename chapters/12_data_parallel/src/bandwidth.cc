// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/bandwidth.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  TT_TODO("ch12.6",
          "bus_bandwidth: the bus bandwidth of an all-reduce of `bytes` in `seconds` on "
          "`world_size` ranks as nccl-tests defines it, in bytes per second (0 for one rank); "
          "throws tt::Error for bytes < 0, a time that is not positive and finite, or "
          "world_size < 1");
}

}  // namespace tt::dist
