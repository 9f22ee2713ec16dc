#include "gui/window.h"

#define GLFW_INCLUDE_NONE
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <atomic>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "allocators/registry.h"
#include "gui/app_state.h"
#include "gui/frame.h"
#include "gui/model/recorded_run.h"
#include "gui/screenshot.h"
#include "gui/view_table.h"

namespace fraglab::gui {

namespace {

constexpr int kSettleFrames = 4;  // frames drawn after everything is ready, before a screenshot

void on_drop(GLFWwindow* window, int count, const char** paths) {
  auto* app = static_cast<AppState*>(glfwGetWindowUserPointer(window));
  if (count > 0 && app) {
    app->path_field = paths[0];
    app->open(paths[0]);
  }
}

// Every key press and character also goes to the app's queue (gui/model/key_queue.h): ImGui 1.86 sees
// only which keys are down at each frame, which loses a press released before the next frame.
GLFWkeyfun imgui_key_callback = nullptr;
GLFWcharfun imgui_char_callback = nullptr;

void on_key(GLFWwindow* window, int key, int scancode, int action, int mods) {
  if (imgui_key_callback) imgui_key_callback(window, key, scancode, action, mods);
  auto* app = static_cast<AppState*>(glfwGetWindowUserPointer(window));
  if (app && action != GLFW_RELEASE)
    app->keys.press({key, (mods & GLFW_MOD_CONTROL) != 0, (mods & GLFW_MOD_SHIFT) != 0});
}

void on_char(GLFWwindow* window, unsigned int c) {
  if (imgui_char_callback) imgui_char_callback(window, c);
  if (auto* app = static_cast<AppState*>(glfwGetWindowUserPointer(window))) app->keys.character(c);
}

// The back buffer as RGBA rows, top row first.
std::vector<uint8_t> read_framebuffer(int width, int height) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * static_cast<size_t>(height) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<uint8_t> flipped(pixels.size());
  size_t row = static_cast<size_t>(width) * 4;
  for (int y = 0; y < height; ++y)
    std::copy_n(pixels.begin() + static_cast<ptrdiff_t>(row * static_cast<size_t>(height - 1 - y)), row,
                flipped.begin() + static_cast<ptrdiff_t>(row * static_cast<size_t>(y)));
  return flipped;
}

// Why a screenshot cannot be taken (a bad file or policy), or "" while all is well.
std::string screenshot_blocker(const AppState& app) {
  if (!app.load_error.empty()) return app.load_error;
  if (!app.other_error.empty()) return app.other_error;
  for (const auto& run : app.runs)
    if (run->state() == PolicyRun::State::Failed) return run->spec() + ": " + run->error();
  return "";
}

// The active memory view's raster as an OpenGL texture (replacing `old`).
uint64_t upload_texture(const MemoryRaster& raster, uint64_t old) {
  auto texture = static_cast<GLuint>(old);
  if (texture == 0) glGenTextures(1, &texture);
  glBindTexture(GL_TEXTURE_2D, texture);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, raster.request.width, raster.request.height, 0, GL_RGBA, GL_UNSIGNED_BYTE,
               raster.rgba.data());
  return texture;
}

void configure(AppState& app, const LaunchOptions& o) {
  if (!o.policies.empty()) {
    app.policies = o.policies;
    app.auto_recorded = false;
  }
  if (!o.capacity.empty()) app.device.capacity = parse_size(o.capacity);
  for (const auto& p : o.probes) parse_probe_arg(p);  // a usage error before any loading
  app.probes = o.probes;
  app.trace_device = o.device;
  for (const auto& p : app.policies)
    if (!is_recorded_spec(p)) PolicySpec::parse(p);  // fail early on malformed option strings
  for (const ViewEntry& v : kViews)
    if (o.view == v.flag) app.show(v.id);
  for (int c = 0; c < kColorModes; ++c)
    if (o.color == kColorNames[c]) app.color = static_cast<ColorMode>(c);
  for (int a = 0; a < 3; ++a)
    if (o.align == kAlignNames[a]) app.align = static_cast<Align>(a);
  app.events.query = o.search;  // searched once the trace is there
  app.events.only_matches = !o.search.empty();
  app.pending_at = o.at;
  if (!o.second_trace.empty()) app.open_second(o.second_trace);
  if (!o.rank_set.empty()) {
    app.ranks = std::make_unique<RanksRun>(o.rank_set);
    app.rank_shown = o.rank_set.front().first;
  }
  if (!o.trace.empty()) {
    app.path_field = o.trace;
    app.open(o.trace);
  }
}

}  // namespace

int run_window(const LaunchOptions& o) {
  const bool headless = !o.screenshot.empty();
  // The trace starts loading before the window exists: making the window and its OpenGL context
  // takes 0.3-0.9 s under Xvfb (GLFW walks the X server's framebuffer configs, Mesa starts its
  // software renderer), time the loader thread uses on the other core. Workers wake the event
  // loop only once there is one (a notification before that is picked up by the first frames).
  std::atomic<bool> window_up{false};
  auto owner = std::make_unique<AppState>([&window_up] {
    if (window_up.load()) glfwPostEmptyEvent();
  });
  owner->upload_texture = upload_texture;
  try {
    configure(*owner, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fraglab-gui: %s\n", e.what());
    return 2;
  }
  auto started = std::chrono::steady_clock::now();
  if (!glfwInit()) {
    std::fprintf(stderr, "fraglab-gui: cannot open a display (GLFW init failed); under no X server use xvfb-run\n");
    return 2;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(o.width, o.height, "fraglab", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "fraglab-gui: cannot create an OpenGL 3.3 window\n");
    owner.reset();  // its workers post to GLFW: they finish first
    glfwTerminate();
    return 2;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(headless ? 0 : 1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // layout is fixed; nothing to remember in the working directory
  apply_style();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330");
  window_up = true;

  int status = 0;
  {
    AppState& app = *owner;
    glfwSetWindowUserPointer(window, &app);
    glfwSetDropCallback(window, on_drop);
    imgui_key_callback = glfwSetKeyCallback(window, on_key);
    imgui_char_callback = glfwSetCharCallback(window, on_char);
    int settled_frames = 0;
    while (!glfwWindowShouldClose(window)) {
      bool busy = app.loading() || !app.settled();
      if (headless) {
        // Workers post an empty event when something changes; once settled, the last few
        // frames run back to back.
        glfwWaitEventsTimeout(settled_frames > 0 ? 0.0 : 0.05);
      } else if (busy) {
        glfwWaitEventsTimeout(0.05);
      } else {
        glfwWaitEvents();
      }
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      // No pointer in screenshots: where Xvfb leaves it would pop up a tooltip at random.
      if (headless) ImGui::GetIO().MousePos = {-FLT_MAX, -FLT_MAX};
      ImGui::NewFrame();
      build_frame(app);
      ImGui::Render();
      if (headless) {
        // Screenshots draw once, when everything is ready: frames before that only lay out
        // (and ask the workers for what the views need), leaving the cores to the workers.
        if (std::string why = screenshot_blocker(app); !why.empty()) {
          std::fprintf(stderr, "fraglab-gui: %s\n", why.c_str());
          status = 2;
          break;
        }
        settled_frames = app.settled() ? settled_frames + 1 : 0;
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (settled_frames <= kSettleFrames) {
          if (waited > o.screenshot_timeout_s) {
            std::fprintf(stderr, "fraglab-gui: replay did not finish within %.0f s; no screenshot\n", waited);
            status = 2;
            break;
          }
          continue;
        }
      }
      int fw = 0, fh = 0;
      glfwGetFramebufferSize(window, &fw, &fh);
      glViewport(0, 0, fw, fh);
      glClearColor(0.08f, 0.08f, 0.09f, 1);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (headless) {
        try {
          write_png(o.screenshot, fw, fh, read_framebuffer(fw, fh));
          if (!o.screenshot_numbers.empty()) app.shown.write(o.screenshot_numbers);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "fraglab-gui: %s\n", e.what());
          status = 2;
        }
        break;
      }
      glfwSwapBuffers(window);
    }
    for (uint64_t id : {app.memory_texture.id, app.segments.texture})
      if (id != 0) {
        auto texture = static_cast<GLuint>(id);
        glDeleteTextures(1, &texture);
      }
    glfwSetWindowUserPointer(window, nullptr);
  }
  owner.reset();  // workers join before GLFW goes
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return status;
}

}  // namespace fraglab::gui
