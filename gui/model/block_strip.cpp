#include "gui/model/block_strip.h"

#include <algorithm>
#include <cmath>

#include "gui/model/palette.h"

namespace fraglab::gui {

namespace {

// Emits rectangles for linear pixel ranges, wrapping rows and merging equal neighbours.
class Emitter {
 public:
  Emitter(std::vector<StripRect>& out, int width) : out_(out), width_(width) {}

  void span(double p0, double p1, uint32_t color) {
    while (p0 < p1) {
      double row_start = std::floor(p0 / width_) * width_;
      double end = std::min(p1, row_start + width_);
      int row = static_cast<int>(row_start / width_);
      auto x0 = static_cast<float>(p0 - row_start), x1 = static_cast<float>(end - row_start);
      if (!out_.empty() && out_.back().row == row && out_.back().color == color && out_.back().x1 == x0) {
        out_.back().x1 = x1;
      } else {
        out_.push_back({x0, x1, row, color});
      }
      p0 = end;
    }
  }

 private:
  std::vector<StripRect>& out_;
  int width_;
};

// Sums the sub-pixel parts of blocks that fall into one pixel.
class PixelMixer {
 public:
  explicit PixelMixer(Emitter& emit) : emit_(emit) {}

  void add(int64_t pixel, uint32_t color, double coverage) {
    if (pixel != pixel_) flush();
    pixel_ = pixel;
    for (int i = 0; i < 3; ++i) sum_[i] += channel(color, i) * coverage;
    coverage_ += coverage;
  }
  void flush() {
    if (pixel_ >= 0 && coverage_ > 0) {
      uint32_t mixed =
          rgba(static_cast<uint32_t>(sum_[0] / coverage_ + 0.5), static_cast<uint32_t>(sum_[1] / coverage_ + 0.5),
               static_cast<uint32_t>(sum_[2] / coverage_ + 0.5));
      auto p = static_cast<double>(pixel_);
      emit_.span(p, p + 1, blend(mixed, kFreeColor, std::min(1.0, coverage_)));
    }
    pixel_ = -1;
    coverage_ = 0;
    sum_[0] = sum_[1] = sum_[2] = 0;
  }

 private:
  Emitter& emit_;
  int64_t pixel_ = -1;
  double sum_[3] = {0, 0, 0};
  double coverage_ = 0;
};

}  // namespace

BlockStrip build_block_strip(const CursorSnapshot& snap, int width, int rows, const BlockColor& color) {
  BlockStrip strip;
  strip.width = std::max(width, 1);
  strip.rows = std::max(rows, 1);
  const auto& regions = snap.regions;
  if (regions.empty()) return strip;
  uint64_t total = 0;
  for (const auto& r : regions) total += r.size;
  double gaps = static_cast<double>(kRegionGapPx) * static_cast<double>(regions.size() - 1);
  double avail = std::max(1.0, static_cast<double>(strip.width) * strip.rows - gaps);
  strip.bytes_per_px = std::max(1.0, static_cast<double>(total) / avail);
  double pos = 0;
  for (const auto& r : regions) {
    strip.region_start.push_back(pos);
    pos += static_cast<double>(r.size) / strip.bytes_per_px + kRegionGapPx;
  }
  auto px = [&](size_t region, Addr addr) {
    return strip.region_start[region] + static_cast<double>(addr - regions[region].addr) / strip.bytes_per_px;
  };

  Emitter background(strip.background, strip.width);
  size_t phys = 0;
  for (size_t r = 0; r < regions.size(); ++r) {
    const auto& reg = regions[r];
    background.span(px(r, reg.addr), px(r, reg.addr + reg.size), reg.is_vmm ? kUnmappedColor : kFreeColor);
    if (!reg.is_vmm) continue;
    while (phys < snap.physical.size() && snap.physical[phys].first < reg.addr) ++phys;
    for (size_t p = phys; p < snap.physical.size() && snap.physical[p].first < reg.addr + reg.size; ++p) {
      Addr end = std::min(snap.physical[p].first + snap.physical[p].second, reg.addr + reg.size);
      background.span(px(r, snap.physical[p].first), px(r, end), kFreeColor);
    }
  }

  Emitter blocks(strip.blocks, strip.width);
  PixelMixer mixer(blocks);
  size_t r = 0;
  for (const auto& b : snap.blocks) {
    while (r < regions.size() && regions[r].addr + regions[r].size <= b.addr) ++r;
    if (r == regions.size()) break;
    if (b.addr < regions[r].addr) continue;  // not inside device memory (cannot happen in a checked replay)
    uint32_t c = color(b);
    double p0 = px(r, b.addr), p1 = px(r, std::min(b.addr + b.size, regions[r].addr + regions[r].size));
    double k0 = std::floor(p0), k1 = std::floor(p1);
    if (k0 == k1) {
      mixer.add(static_cast<int64_t>(k0), c, p1 - p0);
      continue;
    }
    double start = p0;
    if (p0 > k0) {
      mixer.add(static_cast<int64_t>(k0), c, k0 + 1 - p0);
      start = k0 + 1;
    }
    mixer.flush();
    if (k1 > start) blocks.span(start, k1, c);
    if (p1 > k1) mixer.add(static_cast<int64_t>(k1), c, p1 - k1);
  }
  mixer.flush();
  return strip;
}

StripHit hit_test(const BlockStrip& strip, const CursorSnapshot& snap, int row, float x) {
  StripHit hit;
  if (strip.region_start.empty() || row < 0 || row >= strip.rows || x < 0 || x >= static_cast<float>(strip.width))
    return hit;
  double p = static_cast<double>(row) * strip.width + x;
  auto it = std::upper_bound(strip.region_start.begin(), strip.region_start.end(), p);
  if (it == strip.region_start.begin()) return hit;
  auto r = static_cast<size_t>(it - strip.region_start.begin() - 1);
  const auto& reg = snap.regions[r];
  double offset = (p - strip.region_start[r]) * strip.bytes_per_px;
  if (offset >= static_cast<double>(reg.size)) return hit;  // in the gap after the region
  hit.region = static_cast<int>(r);
  hit.addr = reg.addr + static_cast<uint64_t>(offset);
  Addr pixel_end = hit.addr + static_cast<uint64_t>(std::ceil(strip.bytes_per_px));
  auto ph = std::upper_bound(snap.physical.begin(), snap.physical.end(), std::make_pair(hit.addr, UINT64_MAX));
  hit.physical = ph != snap.physical.begin() && std::prev(ph)->first + std::prev(ph)->second > hit.addr;
  // The blocks overlapping [addr, pixel_end): the one before addr may reach into it.
  auto b = std::upper_bound(snap.blocks.begin(), snap.blocks.end(), hit.addr,
                            [](Addr a, const SnapshotBlock& blk) { return a < blk.addr; });
  if (b != snap.blocks.begin()) --b;
  for (; b != snap.blocks.end() && b->addr < pixel_end; ++b) {
    if (b->addr + b->size <= hit.addr) continue;
    if (!hit.block || b->size > hit.block->size) hit.block = &*b;
  }
  return hit;
}

}  // namespace fraglab::gui
