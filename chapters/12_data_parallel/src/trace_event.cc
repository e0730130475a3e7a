// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/trace_event.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// One Chrome trace event as JSON (tt/trace.h): exercise ch12.5.
#include <cmath>
#include <nlohmann/json.hpp>

#include "tt/error.h"
#include "tt/todo.h"
#include "tt/trace.h"

namespace tt::trace {

std::string trace_event_json(const TraceEvent& event) {
  TT_TODO("ch12.5",
          "trace_event_json: one Chrome trace event as a JSON object: name, cat, ph, ts and dur "
          "in microseconds, pid, tid, args (an object of strings); dur only for a complete "
          "event 'X', thread scope \"s\":\"t\" only for an instant 'i'; throws tt::Error naming "
          "the event for another phase or a negative or non-finite time");
}

}  // namespace tt::trace
