// One frame of fraglab-gui: the layout of every view over the whole window and the
// keyboard shortcuts. Between ImGui::NewFrame() and ImGui::Render(); no window or GL
// here, so benchmarks build frames without a display.
#pragma once

#include "gui/app_state.h"

namespace fraglab::gui {

void build_frame(AppState& app);

// Applies the dark style fraglab-gui uses.
void apply_style();

}  // namespace fraglab::gui
