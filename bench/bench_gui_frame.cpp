// fraglab-gui's frame-build time (CPU side): ImGui::NewFrame .. build_frame .. Render on
// the largest bundled trace with the cursor at its reserved peak, no window or GL (the
// draw lists are built; nothing is rasterized). Target (docs/performance.md): < 8 ms.
//
//   gui_frame/steady         every view's draw lists, block-map layout cached (a frame
//                            while nothing moves: hovering, replays progressing)
//   gui_frame/cursor_moved   the block-map layout rebuilt every frame (the frame after
//                            the cursor's snapshot arrives: all blocks placed again)
//   gui_frame/compare        the compare view with two policies side by side
//   gui_frame/100k_blocks    a generated trace with 100k live blocks and holes among
//                            them at the cursor, layout rebuilt every frame (level of detail)
//
// Trace: FRAGLAB_BENCH_GUI_TRACE, else traces/corpus/bert_varlen_train.default.pickle.gz.
// Policy: FRAGLAB_BENCH_GUI_POLICY, else pytorch (bestfit where pytorch is not registered).
#include <benchmark/benchmark.h>
#include <imgui.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "allocators/registry.h"
#include "gui/app_state.h"
#include "gui/frame.h"

namespace fraglab::gui {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string bench_policy() {
  return env_or("FRAGLAB_BENCH_GUI_POLICY", find_policy("pytorch") ? "pytorch" : "bestfit");
}

std::string second_policy(const std::string& first) {
  if (first.rfind("pytorch", 0) == 0) return "pytorch:expandable_segments:True";
  return "passthrough";
}

const std::shared_ptr<const TraceInfo>& bench_trace() {
  static auto info =
      load_trace_info(env_or("FRAGLAB_BENCH_GUI_TRACE",
                             std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/bert_varlen_train.default.pickle.gz"));
  return info;
}

// An app with the trace replayed and the cursor's snapshots built, as a user sees it
// once the progress bars are gone.
// 200k allocations of 512 B .. 64 KiB, every other one freed: 100k live blocks with a
// hole after almost each, the worst case for a block map.
const std::shared_ptr<const TraceInfo>& many_blocks_trace() {
  static auto info = [] {
    Trace t;
    t.meta.format = "generated";
    std::mt19937_64 rng(3);
    IdSlots slots;
    std::vector<AllocId> ids;
    // One 8 GiB block first, freed at once: best fit keeps the segment and serves the rest
    // from it (one region, 100k blocks: the densest map there is).
    AllocId big = slots.acquire();
    t.events.push_back({EventKind::Alloc, 0, big, 8ull << 30, 0, 0, 0});
    t.events.push_back({EventKind::Free, 0, big, 0, 0, 0, 0});
    slots.release(big);
    for (int i = 0; i < 200000; ++i) {
      ids.push_back(slots.acquire());
      t.events.push_back({EventKind::Alloc, 0, ids.back(), uint64_t{512} << (rng() % 8), 0, i, 0});
    }
    for (size_t i = 0; i < ids.size(); i += 2) t.events.push_back({EventKind::Free, 0, ids[i], 0, 0, 0, 0});
    return make_trace_info(std::move(t), "generated: 100k live blocks");
  }();
  return info;
}

std::unique_ptr<AppState> settled_app(std::vector<std::string> policies, ViewId view,
                                      const std::shared_ptr<const TraceInfo>& trace = bench_trace()) {
  auto app = std::make_unique<AppState>(std::function<void()>{}, RecentFiles(""));
  app->policies = std::move(policies);
  app->auto_recorded = false;  // the policies given, as on a command line with --policy
  app->adopt(trace);
  app->pending_at = "peak";
  app->show(view);
  while (!app->settled()) {
    app->poll();  // applies --at peak once the replay is done
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return app;
}

struct ImGuiHeadless {
  ImGuiHeadless() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = {1600, 1000};
    io.DeltaTime = 1.0f / 60;
    // As the OpenGL 3 backend declares: draw lists past 64k vertices split into commands.
    io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas NewFrame needs
    apply_style();
  }
  ~ImGuiHeadless() { ImGui::DestroyContext(); }
};

void frame(AppState& app) {
  ImGui::NewFrame();
  build_frame(app);
  ImGui::Render();
}

void run_frames(benchmark::State& state, AppState& app, bool relayout) {
  ImGuiHeadless imgui;
  for (int i = 0; i < 3; ++i) frame(app);  // tab selection and window sizes settle
  for (auto _ : state) {
    if (relayout) app.strips.clear();
    frame(app);
  }
  const ImDrawData* dd = ImGui::GetDrawData();
  state.counters["vertices"] = dd ? dd->TotalVtxCount : 0;
  state.counters["events"] = static_cast<double>(app.trace->events());
  if (auto snap = app.primary_run()->snapshot())
    state.counters["live_blocks"] = static_cast<double>(snap->blocks.size());
}

void BM_steady(benchmark::State& state) {
  auto app = settled_app({bench_policy()}, ViewId::BlockMap);
  run_frames(state, *app, false);
}

void BM_cursor_moved(benchmark::State& state) {
  auto app = settled_app({bench_policy()}, ViewId::BlockMap);
  run_frames(state, *app, true);
}

void BM_compare(benchmark::State& state) {
  auto app = settled_app({bench_policy(), second_policy(bench_policy())}, ViewId::Compare);
  run_frames(state, *app, true);
}

void BM_many_blocks(benchmark::State& state) {
  auto app = settled_app({"bestfit"}, ViewId::BlockMap, many_blocks_trace());
  app->set_cursor(app->trace->events() - 1);
  while (!app->settled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  run_frames(state, *app, true);
}

BENCHMARK(BM_steady)->Name("gui_frame/steady")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cursor_moved)->Name("gui_frame/cursor_moved")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_compare)->Name("gui_frame/compare")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_many_blocks)->Name("gui_frame/100k_blocks")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fraglab::gui
