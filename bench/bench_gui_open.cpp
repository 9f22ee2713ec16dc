// fraglab-gui's open time, phase by phase, on one trace (the real 2.4M-entry gpt2 generation
// snapshot in docs/gui.md): reading the file as the app does (the pools' check deferred), that
// check, what the app derives from it, the recorded lane's series, the snapshot at its peak, the
// active memory model and its first raster; then the app's own open (loader thread and workers,
// as fraglab-gui runs them) until it has settled at the peak; then the frame time of the memory
// view (CPU side, no window) while the cursor scrubs.
//
//   fraglab_bench_gui_open TRACE [--width 1400 --height 860] [--frames 200] [--no-pool-checker]
//
// Wall and CPU time per phase (the machine may be shared: CPU time is the work done).
#include <imgui.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "gui/app_state.h"
#include "gui/frame.h"
#include "gui/model/active_memory.h"
#include "gui/model/recorded_run.h"
#include "import/trace_import.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/snapshot_model.h"
#include "traces/trace_io.h"

using namespace fraglab;
using namespace fraglab::gui;

namespace {

double cpu_now(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Wall, process CPU (all threads) and this thread's CPU: on a shared machine the thread's CPU is
// what the phase takes on an idle one where other threads (the inflater) keep up beside it.
struct Phase {
  const char* name;
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  double cpu = cpu_now();
  double thread_cpu = cpu_now(CLOCK_THREAD_CPUTIME_ID);
  ~Phase() {
    double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    std::printf("%-34s wall %8.1f ms   cpu %8.1f ms   this thread %8.1f ms\n", name, w * 1e3, (cpu_now() - cpu) * 1e3,
                (cpu_now(CLOCK_THREAD_CPUTIME_ID) - thread_cpu) * 1e3);
  }
};

void frame(AppState& app) {
  ImGui::NewFrame();
  build_frame(app);
  ImGui::Render();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE [--width W] [--height H] [--frames N]\n", argv[0]);
    return 2;
  }
  std::string path = argv[1];
  bool checker = true;
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "--no-pool-checker") checker = false;  // no pool check at all
  const SnapshotModel rules_alone;
  int width = 1400, height = 860, frames = 200;
  for (int i = 2; i + 1 < argc; ++i) {
    std::string k = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (k == "--width") width = v;
    if (k == "--height") height = v;
    if (k == "--frames") frames = v;
  }
  Trace trace;
  {
    Phase p{"read the file, pool check deferred"};
    ReadOptions options;
    options.defer_pool_check = true;
    if (!checker) options.model = &rules_alone;
    trace = load_trace(path, options);
  }
  if (checker && pool_check_pending(trace)) {
    Phase p{"pool check (after the first frame)"};
    std::printf("  the model %s the inferred pools\n", pools_confirmed(trace) ? "agrees with" : "revises");
  }
  std::shared_ptr<const TraceInfo> info;
  {
    Phase p{"derive (stats, frees, sites)"};
    info = make_trace_info(std::move(trace), path);
  }
  std::printf("%llu events\n", static_cast<unsigned long long>(info->events()));
  std::unique_ptr<RunResult> recorded;
  {
    Phase p{"recorded lane: series and peaks"};
    recorded = recorded_result(*info, {});
  }
  {
    Phase p{"recorded lane: snapshot at the peak"};
    CursorSnapshot snap = recorded_snapshot(*info, recorded->replay.reserved.event_index);
    std::printf("  %zu live blocks, %zu regions\n", snap.blocks.size(), snap.regions.size());
  }
  std::unique_ptr<ActiveMemory> model;
  {
    Phase p{"active memory model"};
    model = std::make_unique<ActiveMemory>(info);
  }
  RasterRequest whole;
  whole.begin = 0;
  whole.end = static_cast<double>(info->events());
  whole.width = width - 120;
  whole.height = height / 2;
  {
    Phase p{"raster, whole trace"};
    build_raster(*model, whole);
  }
  RasterRequest zoomed = whole;
  zoomed.begin = whole.end / 2;
  zoomed.end = whole.end / 2 + 20000;
  {
    Phase p{"raster, 20k events at the middle"};
    build_raster(*model, zoomed);
  }

  // Frames of the memory view while the cursor scrubs, the app settled at the recorded peak: the app
  // opens the file itself (loader thread, pool check, workers), as fraglab-gui --view memory --at peak.
  AppState app(std::function<void()>{}, RecentFiles(""));
  app.policies = {kRecordedSpec};
  app.auto_recorded = false;
  app.show(ViewId::Memory);
  app.pending_at = "peak";
  auto opened = std::chrono::steady_clock::now();
  double opened_cpu = cpu_now();
  app.open(path);
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = {static_cast<float>(width), static_cast<float>(height)};
  io.DeltaTime = 1.0f / 60;
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
  unsigned char* pixels = nullptr;
  int tw = 0, th = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &tw, &th);
  apply_style();
  app.upload_texture = [](const MemoryRaster&, uint64_t old) { return old ? old : 1; };
  bool shown = false;
  while (!app.settled()) {
    frame(app);  // polls the loader
    if (app.trace && !shown) {
      shown = true;
      std::printf("%-34s wall %8.1f ms   cpu %8.1f ms\n", "app: open -> trace shown",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count() * 1e3,
                  (cpu_now() - opened_cpu) * 1e3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::printf("%-34s wall %8.1f ms   cpu %8.1f ms\n", "app: open -> settled at the peak",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count() * 1e3,
              (cpu_now() - opened_cpu) * 1e3);
  // Frame times: wall, and the UI thread's CPU time (what the frame costs on a shared machine).
  struct Stats {
    double worst = 0, total = 0, cpu_worst = 0, cpu_total = 0;
    void add(double ms, double cpu_ms) {
      worst = std::max(worst, ms);
      total += ms;
      cpu_worst = std::max(cpu_worst, cpu_ms);
      cpu_total += cpu_ms;
    }
    void print(const char* what, int n) const {
      std::printf("%-34s wall mean %6.2f ms worst %6.2f ms   cpu mean %6.2f ms worst %6.2f ms  (%d frames)\n", what,
                  total / n, worst, cpu_total / n, cpu_worst, n);
    }
  };
  auto timed = [&](Stats& st) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_now(CLOCK_THREAD_CPUTIME_ID);
    frame(app);
    st.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3,
           (cpu_now(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3);
  };
  uint64_t n = info->events();
  Stats scrub;
  for (int f = 0; f < frames; ++f) {
    app.set_cursor(n / 4 + static_cast<uint64_t>(f) * (n / 2) / static_cast<uint64_t>(frames));
    timed(scrub);
  }
  scrub.print("memory view, scrubbing the cursor", frames);
  // Zooming: each frame a new range (the view draws the previous raster while the worker builds).
  Stats zoom;
  for (int f = 0; f < frames; ++f) {
    double span = static_cast<double>(n) * std::pow(0.97, f);
    app.timeline.begin = (static_cast<double>(n) - span) / 2;
    app.timeline.end = app.timeline.begin + span;
    timed(zoom);
  }
  zoom.print("memory view, zooming", frames);
  ImGui::DestroyContext();
  return 0;
}
