#include "gui/model/active_memory.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "gui/model/palette.h"

namespace fraglab::gui {

namespace {

constexpr uint64_t kMinStride = 1 << 16;
constexpr uint64_t kMaxCheckpoints = 64;
constexpr uint32_t kBackground = rgba(24, 26, 30);

// Neighbouring bands of one color stay apart: each allocation gets one of three shades.
uint32_t shade(uint32_t color, uint64_t alloc_index) {
  static constexpr float kShades[] = {1.0f, 0.84f, 0.68f};
  float f = kShades[((alloc_index * 0x9E3779B97F4A7C15ull) >> 40) % 3];
  auto c = [&](int i) { return static_cast<uint32_t>(static_cast<float>(channel(color, i)) * f); };
  return rgba(c(0), c(1), c(2));
}

}  // namespace

uint32_t band_color(const TraceInfo& info, uint64_t alloc_index, BandColor mode) {
  const Event& alloc = info.trace.events[alloc_index];
  switch (mode) {
    case BandColor::Age:
      return age_color(1.0 -
                       static_cast<double>(alloc_index) / static_cast<double>(std::max<uint64_t>(1, info.events())));
    case BandColor::Size:
      return size_class_color(alloc.size);
    case BandColor::Site: {
      int slot = info.color_slot(info.site_of(alloc));
      return slot >= 0 && slot < static_cast<int>(kSiteColors.size()) ? kSiteColors[static_cast<size_t>(slot)]
                                                                      : kNoSiteColor;
    }
    case BandColor::Stream:
      return kSiteColors[alloc.stream % kSiteColors.size()];
    case BandColor::Pool:
      return pool_color(alloc.pool);
  }
  return kNoSiteColor;
}

// --- the live set ------------------------------------------------------------------------

ActiveMemory::Sweep::Sweep(const ActiveMemory& model, uint64_t event) : m_(model), at_(kBefore) {
  if (event == kBefore || model.stride_ == 0) return;
  uint64_t k = std::min<uint64_t>((event + 1) / model.stride_, model.checkpoints_.size() - 1);
  if (k > 0) {
    order_ = model.checkpoints_[k];
    at_ = k * model.stride_ - 1;
    const auto& events = model.trace_->trace.events;
    for (size_t p = 0; p < order_.size(); ++p) {
      const Event& e = events[order_[p]];
      if (e.id >= pos_of_id_.size()) pos_of_id_.resize(e.id + 1u, UINT32_MAX);
      pos_of_id_[e.id] = static_cast<uint32_t>(p);
      live_bytes_ += e.size;
    }
  }
  advance_to(event);
}

void ActiveMemory::Sweep::advance_to(uint64_t event) {
  uint64_t n = m_.trace_->trace.events.size();
  if (n == 0) return;
  event = std::min(event, n - 1);
  for (uint64_t i = at_ == kBefore ? 0 : at_ + 1; i <= event; ++i) apply(i);
  if (at_ == kBefore || event > at_) at_ = event;
}

void ActiveMemory::Sweep::apply(uint64_t index) {
  const auto& events = m_.trace_->trace.events;
  const Event& e = events[index];
  if (e.kind == EventKind::Alloc) {
    if (e.id >= pos_of_id_.size()) pos_of_id_.resize(e.id + 1u, UINT32_MAX);
    pos_of_id_[e.id] = static_cast<uint32_t>(order_.size());
    order_.push_back(index);
    live_bytes_ += e.size;
    return;
  }
  if (e.kind != EventKind::Free || e.id >= pos_of_id_.size()) return;
  uint32_t pos = pos_of_id_[e.id];
  if (pos == UINT32_MAX || order_[pos] == kDead) return;
  live_bytes_ -= std::min(live_bytes_, events[order_[pos]].size);
  order_[pos] = kDead;
  pos_of_id_[e.id] = UINT32_MAX;
  // Compact once most entries are dead: amortized O(1) a free, and walks stay short.
  if (++dead_ > 1024 && dead_ * 2 > order_.size()) {
    size_t out = 0;
    for (uint64_t a : order_) {
      if (a == kDead) continue;
      pos_of_id_[events[a].id] = static_cast<uint32_t>(out);
      order_[out++] = a;
    }
    order_.resize(out);
    dead_ = 0;
  }
}

ActiveMemory::ActiveMemory(std::shared_ptr<const TraceInfo> trace, const std::function<bool(uint64_t)>& progress)
    : trace_(std::move(trace)) {
  uint64_t n = trace_->trace.events.size();
  stride_ = std::max(kMinStride, (n + kMaxCheckpoints - 1) / kMaxCheckpoints);
  total_.reserve(n);
  checkpoints_.push_back({});
  Sweep sweep(*this, Sweep::kBefore);
  for (uint64_t i = 0; i < n; ++i) {
    if ((i & 0xffff) == 0 && progress && !progress(i)) return;
    sweep.advance_to(i);
    total_.set(i, sweep.live_bytes());
    if ((i + 1) % stride_ == 0) {
      std::vector<uint64_t> cp;
      sweep.for_each_live([&](uint64_t a) { cp.push_back(a); });
      checkpoints_.push_back(std::move(cp));
    }
  }
  total_.finish(n);
  pyramid_ = MinMaxPyramid(total_.kib());
}

std::vector<uint64_t> ActiveMemory::live_at(uint64_t event) const {
  Sweep s(*this, event);
  std::vector<uint64_t> out;
  s.for_each_live([&](uint64_t a) { out.push_back(a); });
  return out;
}

std::optional<uint64_t> ActiveMemory::band_at(uint64_t event, uint64_t bytes) const {
  uint64_t offset = 0;
  std::optional<uint64_t> hit;
  Sweep s(*this, event);
  const auto& events = trace_->trace.events;
  s.for_each_live([&](uint64_t a) {
    if (!hit && bytes >= offset && bytes < offset + events[a].size) hit = a;
    offset += events[a].size;
  });
  return hit;
}

// --- the raster --------------------------------------------------------------------------

double MemoryRaster::column_of(uint64_t e) const {
  return event_column_center([this](int c) { return column_first[static_cast<size_t>(c)]; },
                             static_cast<int>(column_first.size()), e);
}

MemoryRaster build_raster(const ActiveMemory& model, const RasterRequest& request,
                          const std::function<bool()>& cancelled) {
  auto started = std::chrono::steady_clock::now();
  MemoryRaster out;
  out.request = request;
  const int w = std::max(1, request.width), h = std::max(1, request.height);
  out.request.width = w;
  out.request.height = h;
  const auto& events = model.trace().trace.events;
  const auto& kib = model.total().kib();
  uint64_t n = kib.size();
  out.rgba.assign(static_cast<size_t>(w) * static_cast<size_t>(h), kBackground);
  if (n == 0) return out;
  auto first_of = [&](double c) {
    uint64_t e = request.column_event ? request.column_event(c)
                                      : static_cast<uint64_t>(request.begin + (request.end - request.begin) * c / w);
    return std::min(e, n - 1);
  };
  // Each column shows the event of its highest total.
  out.column_event.resize(static_cast<size_t>(w));
  out.column_first.resize(static_cast<size_t>(w));
  uint32_t top_kib = 1;
  uint64_t next = first_of(0);
  for (int c = 0; c < w; ++c) {
    uint64_t first = next;
    next = first_of(c + 1);
    uint64_t last = std::max(next, first + 1);
    uint64_t best = first;
    for (uint64_t i = first; i < last && i < n; ++i)
      if (kib[i] > kib[best]) best = i;
    out.column_event[static_cast<size_t>(c)] = best;
    out.column_first[static_cast<size_t>(c)] = first;
    top_kib = std::max(top_kib, kib[best]);
  }
  out.top_bytes = ByteSeries::to_bytes(top_kib) + ByteSeries::to_bytes(top_kib) / 20;
  const double rows_per_byte = static_cast<double>(h) / static_cast<double>(out.top_bytes);

  std::vector<float> acc(static_cast<size_t>(h) * 4);  // r, g, b, coverage per row (row 0 = bottom)
  ActiveMemory::Sweep sweep(model, out.column_event[0]);
  const TraceInfo& info = model.trace();
  for (int c = 0; c < w; ++c) {
    if ((c & 31) == 0 && cancelled()) return out;
    sweep.advance_to(out.column_event[static_cast<size_t>(c)]);
    std::fill(acc.begin(), acc.end(), 0.0f);
    double offset = 0;
    sweep.for_each_live([&](uint64_t a) {
      const Event& e = events[a];
      double y0 = offset * rows_per_byte;
      offset += static_cast<double>(e.size);
      double y1 = offset * rows_per_byte;
      if (y0 >= h || y1 <= y0) return;
      uint32_t color = shade(band_color(info, a, request.color), a);
      float cr = channel(color, 0), cg = channel(color, 1), cb = channel(color, 2);
      auto add = [&](int row, double cover) {
        float* p = &acc[static_cast<size_t>(row) * 4];
        auto f = static_cast<float>(cover);
        p[0] += cr * f;
        p[1] += cg * f;
        p[2] += cb * f;
        p[3] += f;
      };
      int r0 = static_cast<int>(y0), r1 = std::min(h - 1, static_cast<int>(y1));
      if (r0 == r1) {
        add(r0, y1 - y0);
        return;
      }
      add(r0, (r0 + 1) - y0);
      for (int r = r0 + 1; r < r1; ++r) add(r, 1.0);
      if (r1 < h && y1 > r1) add(r1, std::min(1.0, y1 - r1));
    });
    for (int r = 0; r < h; ++r) {
      const float* p = &acc[static_cast<size_t>(r) * 4];
      if (p[3] <= 0) continue;
      float cover = std::min(1.0f, p[3]);
      auto mix = [&](int i) {
        float band = p[i] / p[3];
        return static_cast<uint32_t>(band * cover + static_cast<float>(channel(kBackground, i)) * (1 - cover) + 0.5f);
      };
      out.rgba[static_cast<size_t>(h - 1 - r) * static_cast<size_t>(w) + static_cast<size_t>(c)] =
          rgba(mix(0), mix(1), mix(2));
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

// --- the worker --------------------------------------------------------------------------

ActiveMemoryRun::ActiveMemoryRun(std::shared_ptr<const TraceInfo> trace, std::function<void()> notify)
    : trace_(std::move(trace)), notify_(std::move(notify)) {
  worker_ = std::jthread([this](std::stop_token stop) { work(stop); });
}

ActiveMemoryRun::~ActiveMemoryRun() {
  worker_.request_stop();
  wake_.notify_all();
}

double ActiveMemoryRun::progress() const {
  if (ready_.load()) return 1.0;
  uint64_t n = trace_->events();
  return n ? static_cast<double>(done_.load()) / static_cast<double>(n) : 1.0;
}

void ActiveMemoryRun::request(RasterRequest r) {
  {
    std::lock_guard lock(mutex_);
    if (wanted_ && *wanted_ == r) return;
    wanted_ = std::move(r);
    wanted_now_ = ++wanted_serial_;
  }
  wake_.notify_all();
}

std::shared_ptr<const MemoryRaster> ActiveMemoryRun::raster() const {
  std::lock_guard lock(mutex_);
  return raster_;
}

bool ActiveMemoryRun::settled() const {
  std::lock_guard lock(mutex_);
  return wanted_serial_ > 0 && built_serial_ == wanted_serial_;
}

void ActiveMemoryRun::work(std::stop_token stop) {
  model_ = std::make_unique<ActiveMemory>(trace_, [&](uint64_t done) {
    done_ = done;
    if (notify_) notify_();
    return !stop.stop_requested();
  });
  if (stop.stop_requested()) return;
  ready_.store(true, std::memory_order_release);
  if (notify_) notify_();
  while (!stop.stop_requested()) {
    RasterRequest r;
    uint64_t serial;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, stop, [&] { return wanted_serial_ != built_serial_; });
      if (stop.stop_requested()) return;
      r = *wanted_;
      serial = wanted_serial_;
    }
    auto stale = [&] { return stop.stop_requested() || wanted_now_.load() != serial; };
    auto raster = std::make_shared<MemoryRaster>(build_raster(*model_, r, stale));
    if (stale()) continue;
    {
      std::lock_guard lock(mutex_);
      raster_ = std::move(raster);
      built_serial_ = serial;
    }
    if (notify_) notify_();
  }
}

}  // namespace fraglab::gui
