// Keys pressed between two frames, in order. Dear ImGui 1.86 (Debian 12) keeps only whether a key is
// down at each frame: a press and its release between two frames (fast typing, a busy frame) are lost,
// so 10 Right presses 12 ms apart moved the cursor twice, and a lost Ctrl+L let the path typed after it
// run as shortcuts. The window's GLFW callbacks queue every press and character here; each frame takes
// them all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fraglab::gui {

struct KeyPress {
  int key = 0;  // GLFW's key code (printable keys are their upper-case ASCII codes)
  bool ctrl = false, shift = false;
};

struct QueuedInput {
  std::vector<KeyPress> shortcuts;  // to run as shortcuts, in order
  bool focus_path = false;          // Ctrl+L: the path field takes the keyboard
  std::u32string typed;             // characters typed after the Ctrl+L: the path field's
};

class KeyQueue {
 public:
  static constexpr int kFocusPathKey = 'L';  // with Ctrl
  void press(KeyPress k) { items_.push_back({false, k, 0}); }
  void character(char32_t c) { items_.push_back({true, {}, c}); }
  bool empty() const { return items_.empty(); }
  // Takes what was queued. Every press runs as a shortcut, in order, up to a Ctrl+L; what follows it
  // was typed into the path field (its characters, in `typed`), not shortcuts. While a text field has
  // the keyboard (`text_active`) nothing is a shortcut (the field gets the characters itself).
  QueuedInput take(bool text_active);

 private:
  struct Item {
    bool is_char = false;
    KeyPress key;
    char32_t c = 0;
  };
  std::vector<Item> items_;
};

}  // namespace fraglab::gui
