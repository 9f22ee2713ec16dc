// Line splitting for the text trace formats (JSON Lines, RMM CSV logs): both report errors
// by line number, so the count lives with the split.
#pragma once

#include <cstdint>
#include <string_view>

namespace fraglab {

// Calls fn(line) for each '\n'-terminated line of `text` (the last may lack its '\n'), the
// line without its '\n'; `line_no` is the 1-based number of the line being handed over.
template <class Fn>
void for_each_line(std::string_view text, uint64_t& line_no, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++line_no;
    fn(text.substr(pos, end - pos));
    pos = end + 1;
  }
}

}  // namespace fraglab
