// The event list's search: which trace events match a query of space-separated terms, all
// of which must hold:
//   0x7f3a00000000      an address: events whose block, segment or mapped range holds it
//   size:1MiB..4MiB     a size range (either end may be left out: size:..4KiB, size:1GiB..)
//   size:2MiB           one size exactly
//   action:alloc        an event kind (alloc, free, free_requested, segment_alloc, oom, ...)
//   any other word      a substring of a frame's function or file name (case-insensitive)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gui/model/trace_info.h"

namespace fraglab::gui {

struct EventQuery {
  std::optional<Addr> addr;
  uint64_t min_size = 0, max_size = UINT64_MAX;
  std::optional<EventKind> kind;
  std::vector<std::string> words;  // lower case
};

// Throws std::invalid_argument naming the bad term.
EventQuery parse_event_query(const std::string& text);

bool matches(const TraceInfo& info, const EventQuery& q, const Event& e, const std::vector<bool>& stack_matches);
// Event indices that match, ascending.
std::vector<uint64_t> find_events(const TraceInfo& info, const EventQuery& q);

}  // namespace fraglab::gui
