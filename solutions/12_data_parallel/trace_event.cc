// One Chrome trace event as JSON (tt/trace.h): exercise ch12.5.
#include <cmath>
#include <nlohmann/json.hpp>

#include "tt/error.h"
#include "tt/todo.h"
#include "tt/trace.h"

namespace tt::trace {

std::string trace_event_json(const TraceEvent& event) {
#if TT_SOLUTION
  TT_CHECK(event.phase == 'X' || event.phase == 'i', "trace_event_json: event '", event.name,
           "' has phase '", std::string(1, event.phase), "' (only 'X' and 'i' are written)");
  TT_CHECK(event.ts_us >= 0 && event.dur_us >= 0 && std::isfinite(event.ts_us) &&
               std::isfinite(event.dur_us),
           "trace_event_json: event '", event.name, "' has ts ", event.ts_us, " us and dur ",
           event.dur_us, " us (both must be finite and >= 0)");
  nlohmann::json j = {
      {"name", event.name}, {"cat", event.category}, {"ph", std::string(1, event.phase)},
      {"ts", event.ts_us},  {"pid", event.pid},      {"tid", event.tid}};
  if (event.phase == 'X') j["dur"] = event.dur_us;
  if (event.phase == 'i') j["s"] = "t";
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [key, value] : event.args) args[key] = value;
  j["args"] = std::move(args);
  return j.dump();
#else
  TT_TODO("ch12.5",
          "trace_event_json: one Chrome trace event as a JSON object: name, cat, ph, ts and dur "
          "in microseconds, pid, tid, args (an object of strings); dur only for a complete "
          "event 'X', thread scope \"s\":\"t\" only for an instant 'i'; throws tt::Error naming "
          "the event for another phase or a negative or non-finite time");
#endif
}

}  // namespace tt::trace
