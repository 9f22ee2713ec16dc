// Hand-written CSV splitting: the log is six plain fields per line, no quoting (RMM writes
// none), so a full CSV library would add nothing but a dependency.
#include "traces/rmm_log_format.h"

#include <charconv>
#include <string_view>
#include <unordered_map>

#include "traces/format_error.h"
#include "traces/gzip.h"
#include "traces/read_limits.h"
#include "traces/stream_interner.h"
#include "traces/text_lines.h"

namespace fraglab {

namespace {

constexpr uint64_t kAbsurdSize = kMaxEventBytes;  // as for every reader (read_limits.h)
constexpr int64_t kDayUs = 24ll * 3600 * 1000000;

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

  // Thread ids and sizes are decimal; pointers and streams are hexadecimal, written with a
  // 0x prefix by RMM up to 24.08 and without one by 24.10-25.02 builds (fmt's {:x} of the
  // integer value); the spdlog/rapids_logger versions print a null pointer as "(nil)".
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

  // HH:MM:SS.ffffff -> microseconds, continuing across midnight.
  int64_t time(std::string_view t) {
    unsigned h = 0, m = 0, s = 0, us = 0;
    auto digits = [&](size_t at, size_t n, unsigned& out) {
      if (t.size() < at + n) return false;
      auto [end, ec] = std::from_chars(t.data() + at, t.data() + at + n, out);
      return ec == std::errc() && end == t.data() + at + n;
    };
    if (t.size() != 15 || t[2] != ':' || t[5] != ':' || t[8] != '.' || !digits(0, 2, h) || !digits(3, 2, m) ||
        !digits(6, 2, s) || !digits(9, 6, us) || h > 23 || m > 59 || s > 60)
      fail("bad time '" + std::string(t) + "' (expected HH:MM:SS.ffffff)");
    int64_t v = ((static_cast<int64_t>(h) * 60 + m) * 60 + s) * 1000000 + us;
    if (last_time >= 0 && v + day_offset < last_time - kDayUs / 2) day_offset += kDayUs;
    last_time = v + day_offset;
    return last_time;
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
    uint64_t ptr = number(f[3], "pointer", true);
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
    } else if (f[2] == "free") {
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
    } else if (f[2] == "allocate failure") {
      e.kind = EventKind::Oom;
      e.size = size;
    } else {
      fail("unknown action '" + std::string(f[2]) + "' (allocate, free, allocate failure)");
    }
    trace.events.push_back(e);
  }
};

}  // namespace

Trace parse_rmm_log(const std::string& text, const std::string& name) {
  RmmParser p{name, {}, {}, {}, {}, 0, 0, -1};
  p.trace.meta.format = "rmm-log";
  p.trace.meta.source = name;
  bool header = false;
  for_each_line(text, p.line, [&](std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return;
    if (!header) {
      if (line != "Thread,Time,Action,Pointer,Size,Stream")
        p.fail("not an RMM log: the first line must be Thread,Time,Action,Pointer,Size,Stream");
      header = true;
      return;
    }
    p.row(line);
  });
  if (!header) throw FormatError::at_line(name, 1, "empty file: not an RMM log");
  return std::move(p.trace);
}

Trace read_rmm_log(const std::string& path) {
  return parse_rmm_log(read_maybe_gzipped(path), path);
}

}  // namespace fraglab
