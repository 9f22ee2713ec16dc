// Hand-written CSV splitting: the log is six plain fields per line, no quoting (RMM writes
// none), so a full CSV library would add nothing but a dependency.
#include "traces/formats/rmm_log/rmm_log_format.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <unordered_map>

#include "traces/io/format_error.h"
#include "traces/io/gzip.h"
#include "traces/io/read_limits.h"
#include "traces/io/text_lines.h"
#include "traces/stream_interner.h"

namespace fraglab {

namespace {

constexpr uint64_t kAbsurdSize = kMaxEventBytes;  // as for every reader (read_limits.h)
constexpr int64_t kDayUs = 24ll * 3600 * 1000000;
constexpr const char* kHeader = "Thread,Time,Action,Pointer,Size,Stream";

struct RmmParser {
  const std::string& name;
  Trace trace;
  IdSlots slots;
  std::unordered_map<uint64_t, std::pair<AllocId, uint64_t>> live;  // pointer -> (id, size)
  std::unordered_map<uint64_t, StackId> threads;
  uint64_t line = 0;
  int64_t day_offset = 0, last_time = -1;
  StreamInterner streams{trace.meta};

  [[noreturn]] void fail(const std::string& what) const { throw FormatError::at_line(name, line, what); }

  // Thread ids and sizes are decimal; pointers and streams hexadecimal, with or without 0x,
  // and a null pointer "(nil)" (rmm_log_format.h says which version writes what).
  uint64_t number(std::string_view field, const char* what, bool hex = false) const {
    int base = hex ? 16 : 10;
    if (hex && field == "(nil)") return 0;
    if (field.size() > 2 && field[0] == '0' && (field[1] == 'x' || field[1] == 'X')) {
      field.remove_prefix(2);
      base = 16;
    }
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v, base);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size())
      fail(std::string("bad ") + what + " '" + std::string(field) + "'");
    return v;
  }

  // The Time column, in microseconds. Clock times (HH:MM:SS.ffffff, or HH:MM:SS:ffffff from
  // RMM before April 2021) carry no date: they continue across midnight. Epoch seconds
  // (1763800000.000238, as RMM's user guide shows) are absolute.
  int64_t time(std::string_view t) {
    if (t.size() == 15 && t[2] == ':' && t[5] == ':') return clock_time(t);
    return epoch_time(t);
  }

  int64_t clock_time(std::string_view t) {
    unsigned h = 0, m = 0, s = 0, us = 0;
    auto digits = [&](size_t at, size_t n, unsigned& out) {
      auto [end, ec] = std::from_chars(t.data() + at, t.data() + at + n, out);
      return ec == std::errc() && end == t.data() + at + n;
    };
    if ((t[8] != '.' && t[8] != ':') || !digits(0, 2, h) || !digits(3, 2, m) || !digits(6, 2, s) || !digits(9, 6, us) ||
        h > 23 || m > 59 || s > 60)
      bad_time(t);
    int64_t v = ((static_cast<int64_t>(h) * 60 + m) * 60 + s) * 1000000 + us;
    if (last_time >= 0 && v + day_offset < last_time - kDayUs / 2) day_offset += kDayUs;
    last_time = v + day_offset;
    return last_time;
  }

  // Seconds since the epoch with up to 9 decimals, kept to the microsecond; no floating
  // point, so 1763800000.000238 stays exact.
  int64_t epoch_time(std::string_view t) const {
    size_t dot = t.find('.');
    std::string_view whole = t.substr(0, dot), frac = dot == std::string_view::npos ? "" : t.substr(dot + 1);
    int64_t seconds = 0;
    auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), seconds);
    if (whole.empty() || ec != std::errc() || end != whole.data() + whole.size() || seconds < 0 ||
        seconds > INT64_MAX / 1000000 - 1 || frac.size() > 9 ||
        frac.find_first_not_of("0123456789") != std::string_view::npos ||
        (dot != std::string_view::npos && frac.empty()))
      bad_time(t);
    int64_t us = 0;
    for (size_t i = 0; i < 6; ++i) us = us * 10 + (i < frac.size() ? frac[i] - '0' : 0);
    return seconds * 1000000 + us;
  }

  [[noreturn]] void bad_time(std::string_view t) const {
    fail("bad time '" + std::string(t) + "' (expected HH:MM:SS.ffffff or seconds since the epoch)");
  }

  StackId thread_context(uint64_t tid) {
    auto [it, fresh] = threads.try_emplace(tid, static_cast<StackId>(trace.meta.stacks.size()));
    if (fresh) trace.meta.stacks.push_back({{"thread " + std::to_string(tid), "rmm-log", 0}});
    return it->second;
  }

  void row(std::string_view text) {
    std::string_view f[6];
    size_t n = 0, pos = 0;
    for (;;) {
      size_t comma = text.find(',', pos);
      if (n == 6) fail("more than 6 fields");
      f[n++] = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    if (n != 6) fail("expected 6 fields (Thread,Time,Action,Pointer,Size,Stream), got " + std::to_string(n));
    Event e;
    StackId thread = thread_context(number(f[0], "thread id"));
    e.time_us = time(f[1]);
    // A failed allocation has no pointer: "0x0" (fmt), "(nil)" (printf's %p) or nothing.
    bool failure = f[2] == "allocate failure";
    uint64_t ptr = failure && f[3].empty() ? 0 : number(f[3], "pointer", true);
    uint64_t size = number(f[4], "size");
    if (size > kAbsurdSize) fail("size " + std::to_string(size) + " is absurdly large");
    try {
      e.stream = streams.intern(number(f[5], "stream", true));
    } catch (const TooManyStreams& ex) {
      fail(ex.what());
    }
    if (f[2] == "allocate") {
      if (live.count(ptr)) fail("allocate of pointer " + std::string(f[3]) + " which is already live");
      e.kind = EventKind::Alloc;
      e.id = slots.acquire();
      e.size = size;
      e.addr = ptr;
      e.stack = thread;
      live.emplace(ptr, std::make_pair(e.id, size));
    } else if (f[2] == "free" || f[2] == "deallocate") {
      auto it = live.find(ptr);
      if (it == live.end()) {
        ++trace.meta.dropped_unknown_frees;  // allocated before logging began
        return;
      }
      if (it->second.second != size)
        fail("free of " + std::string(f[3]) + " with size " + std::to_string(size) + ", allocated with " +
             std::to_string(it->second.second));
      e.kind = EventKind::Free;
      e.id = it->second.first;
      slots.release(e.id);
      live.erase(it);
    } else if (failure) {
      e.kind = EventKind::Oom;
      e.size = size;
    } else {
      fail("unknown action '" + std::string(f[2]) + "' (allocate, free, allocate failure, deallocate)");
    }
    trace.events.push_back(e);
  }
};

}  // namespace

Trace parse_rmm_log(const std::string& text, const std::string& name) {
  RmmParser p{name, {}, {}, {}, {}, 0, 0, -1};
  p.trace.meta.format = "rmm-log";
  p.trace.meta.source = name;
  bool header = false, rows = false;
  for_each_line(text, p.line, [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return;
    if (line == kHeader) {  // at the top, or again where logs were concatenated
      header = true;
      return;
    }
    // Without the header (some tools print the rows alone), the columns are in its order.
    if (!header && !rows && std::count(line.begin(), line.end(), ',') != 5)
      p.fail(std::string("not an RMM log: the first line must be ") + kHeader + " or a row of those six fields");
    rows = true;
    p.row(line);
  });
  if (!header && !rows) throw FormatError::at_line(name, 1, "empty file: not an RMM log");
  return std::move(p.trace);
}

Trace read_rmm_log(const std::string& path) { return parse_rmm_log(read_maybe_gzipped(path), path); }

}  // namespace fraglab
