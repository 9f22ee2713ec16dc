// The block map's layout: device memory drawn to scale as one strip wrapped into rows,
// with every segment and reserved range in address order and a small gap between them.
//
// Level of detail: a block that covers whole pixels becomes one rectangle; the parts of
// blocks that cover a fraction of a pixel are accumulated per pixel and drawn as one
// pixel whose color is their coverage-weighted mix over the free color, so 100k blocks
// cost at most one rectangle a block plus one a pixel, and free gaps stay visible as
// darker pixels. Runs of equal pixels merge into one rectangle.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gui/model/policy_run.h"

namespace fraglab::gui {

struct StripRect {
  float x0, x1;  // pixels within the row
  int row;
  uint32_t color;
};

struct BlockStrip {
  int width = 0, rows = 0;
  double bytes_per_px = 1;
  std::vector<double> region_start;   // linear pixel where each region starts
  std::vector<StripRect> background;  // regions: free physical memory and unmapped ranges
  std::vector<StripRect> blocks;      // live blocks, after level of detail
};

using BlockColor = std::function<uint32_t(const SnapshotBlock&)>;

constexpr int kRegionGapPx = 2;

BlockStrip build_block_strip(const CursorSnapshot& snap, int width, int rows, const BlockColor& color);

struct StripHit {
  int region = -1;                       // -1: not on device memory
  Addr addr = 0;                         // the byte under the pixel's left edge
  bool physical = false;                 // backed by physical memory
  const SnapshotBlock* block = nullptr;  // the largest live block in the pixel
};

StripHit hit_test(const BlockStrip& strip, const CursorSnapshot& snap, int row, float x);

}  // namespace fraglab::gui
