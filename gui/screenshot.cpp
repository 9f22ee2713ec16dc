#include "gui/screenshot.h"

#include <stb_image_write.h>

#include <stdexcept>

#include "traces/atomic_file.h"

namespace fraglab::gui {

void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgba) {
  if (width <= 0 || height <= 0 || rgba.size() != static_cast<size_t>(width) * static_cast<size_t>(height) * 4)
    throw std::runtime_error("screenshot: pixel buffer does not match " + std::to_string(width) + "x" +
                             std::to_string(height));
  std::string png;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, width, height, 4, rgba.data(), width * 4))
    throw std::runtime_error("screenshot: PNG encoding failed");
  AtomicFile out(path);
  out.write(png);
  out.commit();
}

}  // namespace fraglab::gui
