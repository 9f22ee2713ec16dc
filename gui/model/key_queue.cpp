#include "gui/model/key_queue.h"

namespace fraglab::gui {

QueuedInput KeyQueue::take(bool text_active) {
  QueuedInput out;
  if (!text_active)
    for (const Item& item : items_) {
      if (out.focus_path) {
        if (item.is_char) out.typed += item.c;
        continue;
      }
      if (item.is_char) continue;  // a shortcut's own character
      if (item.key.ctrl && item.key.key == kFocusPathKey)
        out.focus_path = true;
      else
        out.shortcuts.push_back(item.key);
    }
  items_.clear();
  return out;
}

}  // namespace fraglab::gui
