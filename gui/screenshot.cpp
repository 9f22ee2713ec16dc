#include "gui/screenshot.h"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

#include "traces/io/atomic_file.h"

namespace fraglab::gui {

namespace {

void put_u32(std::string& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.append(b, 4);
}

// A PNG chunk: length, type, data, CRC of type and data.
void put_chunk(std::string& out, const char type[4], std::string_view data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  size_t crc_from = out.size();
  out.append(type, 4);
  out.append(data);
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(out.data() + crc_from), static_cast<uInt>(4 + data.size()));
  put_u32(out, static_cast<uint32_t>(crc));
}

// The image data: each row behind filter byte 0 (none), deflated at zlib's fastest level. A UI
// screenshot is mostly flat colour, which level 1 already shrinks ~30x; stb_image_write's
// encoder (every filter tried per row, its own deflate) took 0.7 s on a 1600x1000 window, a
// third of the open-time budget, against 0.05-0.09 s here for a file of about the same size.
std::string deflate_rows(int width, int height, const std::vector<uint8_t>& rgba) {
  const size_t row = static_cast<size_t>(width) * 4;
  z_stream zs{};
  if (deflateInit(&zs, 1) != Z_OK) throw std::runtime_error("screenshot: zlib initialisation failed");
  std::string out(deflateBound(&zs, static_cast<uLong>((row + 1) * static_cast<size_t>(height))), '\0');
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const Bytef filter = 0;
  int rc = Z_OK;
  for (int y = 0; y < height; ++y) {
    zs.next_in = const_cast<Bytef*>(&filter);
    zs.avail_in = 1;
    deflate(&zs, Z_NO_FLUSH);
    zs.next_in = const_cast<Bytef*>(rgba.data() + row * static_cast<size_t>(y));
    zs.avail_in = static_cast<uInt>(row);
    rc = deflate(&zs, y + 1 == height ? Z_FINISH : Z_NO_FLUSH);
  }
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("screenshot: PNG encoding failed");
  return out;
}

}  // namespace

void write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgba) {
  if (width <= 0 || height <= 0 || rgba.size() != static_cast<size_t>(width) * static_cast<size_t>(height) * 4)
    throw std::runtime_error("screenshot: pixel buffer does not match " + std::to_string(width) + "x" +
                             std::to_string(height));
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  put_u32(header, static_cast<uint32_t>(width));
  put_u32(header, static_cast<uint32_t>(height));
  header += std::string("\x08\x06\x00\x00\x00", 5);  // 8 bits, RGBA, deflate, no filter set, no interlace
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", deflate_rows(width, height, rgba));
  put_chunk(png, "IEND", {});
  AtomicFile out(path);
  out.write(png);
  out.commit();
}

}  // namespace fraglab::gui
