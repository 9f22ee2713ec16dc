// Writing the window's pixels as PNG (zlib's deflate at its fastest level), atomically: the
// file appears complete or not at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fraglab::gui {

// `rgba` holds width*height pixels, top row first. Throws std::runtime_error.
void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgba);

}  // namespace fraglab::gui
