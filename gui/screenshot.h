// Writing the window's pixels as PNG (stb_image_write, Debian's libstb), atomically: the
// file appears complete or not at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fraglab::gui {

// `rgba` holds width*height pixels, top row first. Throws std::runtime_error.
void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgba);

}  // namespace fraglab::gui
