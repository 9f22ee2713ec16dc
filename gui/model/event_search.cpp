#include "gui/model/event_search.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <stdexcept>

#include "allocators/policy_options.h"

namespace fraglab::gui {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

uint64_t size_term(const std::string& text, const std::string& term) {
  try {
    return parse_size(text);
  } catch (const std::exception&) {
    throw std::invalid_argument("bad size '" + text + "' in '" + term + "' (e.g. size:1MiB..4MiB)");
  }
}

// Does the stack have a frame whose name or file holds every word?
bool stack_matches(const std::vector<StackFrame>& frames, const std::vector<std::string>& words) {
  for (const auto& w : words) {
    bool found = std::any_of(frames.begin(), frames.end(), [&](const StackFrame& f) {
      return lower(f.name).find(w) != std::string::npos || lower(f.filename).find(w) != std::string::npos;
    });
    if (!found) return false;
  }
  return true;
}

}  // namespace

EventQuery parse_event_query(const std::string& text) {
  EventQuery q;
  std::istringstream in(text);
  std::string term;
  while (in >> term) {
    std::string t = lower(term);
    if (t.rfind("0x", 0) == 0) {
      Addr a = 0;
      auto [end, ec] = std::from_chars(t.data() + 2, t.data() + t.size(), a, 16);
      if (ec != std::errc() || end != t.data() + t.size()) throw std::invalid_argument("bad address '" + term + "'");
      q.addr = a;
    } else if (t.rfind("size:", 0) == 0) {
      std::string range = term.substr(5);
      auto dots = range.find("..");
      if (dots == std::string::npos) {
        q.min_size = q.max_size = size_term(range, term);
      } else {
        std::string lo = range.substr(0, dots), hi = range.substr(dots + 2);
        if (!lo.empty()) q.min_size = size_term(lo, term);
        if (!hi.empty()) q.max_size = size_term(hi, term);
      }
    } else if (t.rfind("action:", 0) == 0) {
      EventKind k;
      if (!parse_event_kind(t.substr(7), k)) throw std::invalid_argument("unknown action '" + term.substr(7) + "'");
      q.kind = k;
    } else {
      q.words.push_back(t);
    }
  }
  return q;
}

bool matches(const TraceInfo& info, const EventQuery& q, const Event& e, const std::vector<bool>& stack_ok) {
  if (q.kind && e.kind != *q.kind) return false;
  if (e.size < q.min_size || e.size > q.max_size) return false;
  if (q.addr) {
    bool has_addr = e.kind != EventKind::Oom && e.kind != EventKind::EmptyCache && e.kind != EventKind::PoolRelease;
    if (!has_addr || *q.addr < e.addr || *q.addr - e.addr >= std::max<uint64_t>(e.size, 1)) return false;
  }
  if (!q.words.empty() && (e.stack >= stack_ok.size() || !stack_ok[e.stack])) return false;
  (void)info;
  return true;
}

std::vector<uint64_t> find_events(const TraceInfo& info, const EventQuery& q) {
  const auto& stacks = info.trace.meta.stacks;
  std::vector<bool> stack_ok(stacks.size(), false);
  if (!q.words.empty())
    for (size_t s = 0; s < stacks.size(); ++s) stack_ok[s] = stack_matches(stacks[s], q.words);
  std::vector<uint64_t> out;
  const auto& events = info.trace.events;
  for (uint64_t i = 0; i < events.size(); ++i)
    if (matches(info, q, events[i], stack_ok)) out.push_back(i);
  return out;
}

}  // namespace fraglab::gui
