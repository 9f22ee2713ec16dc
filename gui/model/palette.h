// Colors of the block map, as packed RGBA in Dear ImGui's layout (R in the low byte), so
// the model can lay out and blend without ImGui and tests can find them in screenshots.
#pragma once

#include <array>
#include <cstdint>

namespace fraglab::gui {

constexpr uint32_t rgba(uint32_t r, uint32_t g, uint32_t b, uint32_t a = 255) {
  return r | (g << 8) | (b << 16) | (a << 24);
}
constexpr uint8_t channel(uint32_t c, int i) { return static_cast<uint8_t>(c >> (8 * i)); }

constexpr uint32_t kFreeColor = rgba(58, 62, 70);       // physical memory no block uses
constexpr uint32_t kUnmappedColor = rgba(28, 30, 34);   // reserved virtual range without pages
constexpr uint32_t kNoSiteColor = rgba(120, 120, 120);  // stacks not recorded, or a minor site

// Size classes of live blocks (block bytes, upper bounds exclusive).
struct SizeClass {
  uint64_t below;
  const char* label;
  uint32_t color;
};
constexpr std::array<SizeClass, 7> kSizeClasses{{
    {4ull << 10, "< 4 KiB", rgba(102, 194, 165)},
    {64ull << 10, "< 64 KiB", rgba(171, 221, 164)},
    {1ull << 20, "< 1 MiB", rgba(230, 245, 152)},
    {8ull << 20, "< 8 MiB", rgba(254, 224, 139)},
    {64ull << 20, "< 64 MiB", rgba(253, 174, 97)},
    {512ull << 20, "< 512 MiB", rgba(244, 109, 67)},
    {UINT64_MAX, ">= 512 MiB", rgba(213, 62, 79)},
}};

inline uint32_t size_class_color(uint64_t bytes) {
  for (const auto& c : kSizeClasses)
    if (bytes < c.below) return c.color;
  return kSizeClasses.back().color;
}

// Sites by rank (0 = the most bytes); rank >= kSiteColors.size() shares kNoSiteColor.
constexpr std::array<uint32_t, 12> kSiteColors{{
    rgba(31, 119, 180),
    rgba(255, 127, 14),
    rgba(44, 160, 44),
    rgba(214, 39, 40),
    rgba(148, 103, 189),
    rgba(140, 86, 75),
    rgba(227, 119, 194),
    rgba(188, 189, 34),
    rgba(23, 190, 207),
    rgba(174, 199, 232),
    rgba(255, 187, 120),
    rgba(152, 223, 138),
}};

// `fraction` 0 = allocated just now, 1 = allocated at the start of the trace. Viridis' stops, young
// yellow through green and blue to old purple: saturated all the way, so no age reads as the grey of
// free memory (a straight yellow-to-blue mix passes through grey half way).
inline uint32_t age_color(double fraction) {
  if (fraction < 0) fraction = 0;
  if (fraction > 1) fraction = 1;
  constexpr uint32_t kStops[][3] = {{253, 231, 37}, {94, 201, 98}, {33, 145, 140}, {59, 82, 139}, {68, 1, 84}};
  constexpr int kLast = 4;
  double at = fraction * kLast;
  int i = at >= kLast ? kLast - 1 : static_cast<int>(at);
  double f = at - i;
  auto mix = [&](int c) {
    return static_cast<uint32_t>(kStops[i][c] + (static_cast<double>(kStops[i + 1][c]) - kStops[i][c]) * f + 0.5);
  };
  return rgba(mix(0), mix(1), mix(2));
}

// Pools: the default pools in a color of their own (not the grey of sites without one), each private pool
// (CUDA graph, MemPool) in a site color.
constexpr uint32_t kDefaultPoolColor = rgba(110, 180, 150);
inline uint32_t pool_color(uint32_t pool) {
  return pool == 0 ? kDefaultPoolColor : kSiteColors[static_cast<size_t>(pool - 1) % kSiteColors.size()];
}

// a over b with coverage t in [0, 1].
inline uint32_t blend(uint32_t a, uint32_t b, double t) {
  uint32_t out = 255u << 24;
  for (int i = 0; i < 3; ++i) {
    double v = channel(a, i) * t + channel(b, i) * (1 - t);
    out |= static_cast<uint32_t>(v + 0.5) << (8 * i);
  }
  return out;
}

}  // namespace fraglab::gui
