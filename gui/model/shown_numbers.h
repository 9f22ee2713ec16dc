// The numbers the views drew in the last frame, by name ("fragmentation.allocated" -> bytes), kept
// beside a headless screenshot (fraglab-gui --screenshot-numbers): pixels cannot be checked for the
// numbers they show, this file can (scripts/check_gui_numbers.py holds it against `fraglab info
// --json` and PyTorch's own counters). The views record exactly the values they format, nothing else.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fraglab::gui {

class ShownNumbers {
 public:
  void clear() { values_ = nlohmann::json::object(); }
  // `key` is "view.quantity"; a later value for the same key in one frame replaces the earlier.
  void set(const std::string& key, nlohmann::json value) { values_[key] = std::move(value); }
  const nlohmann::json& values() const { return values_; }
  // The values as a JSON object, written atomically; throws std::runtime_error naming the path.
  void write(const std::string& path) const;

 private:
  nlohmann::json values_ = nlohmann::json::object();
};

}  // namespace fraglab::gui
