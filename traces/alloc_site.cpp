#include "traces/alloc_site.h"

#include <algorithm>
#include <string_view>

namespace fraglab {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string frame_label(const StackFrame& f) {
  auto slash = f.filename.find_last_of('/');
  std::string file = slash == std::string::npos ? f.filename : f.filename.substr(slash + 1);
  return f.name + "  " + file + ":" + std::to_string(f.line);
}

}  // namespace

// PyTorch's own Python package (installed under site-/dist-packages, or a source tree's
// torch/) and C++ frames (c10, aten, the caching allocator) are plumbing, not the site.
bool is_torch_internal(const StackFrame& f) {
  const std::string& file = f.filename;
  if (file.find("packages/torch/") != std::string::npos || file.rfind("torch/", 0) == 0) return true;
  return file.empty() || file == "??" || ends_with(file, ".cpp") || ends_with(file, ".h") || ends_with(file, ".cu") ||
         ends_with(file, ".cuh") || ends_with(file, ".cc");
}

std::string site_label(const std::vector<StackFrame>& frames) {
  if (frames.empty()) return "(no stack recorded)";
  auto it = std::find_if(frames.begin(), frames.end(), [](const StackFrame& f) { return !is_torch_internal(f); });
  return frame_label(it == frames.end() ? frames.front() : *it);
}

// Installed packages and the interpreter's own library: torch, transformers, accelerate, timm, the
// standard library. What is left is the user's code: their scripts, their package checked out beside
// them, a notebook cell (IPython names cells "<ipython-input-N-...>" or ".../ipykernel_P/N.py").
bool is_library_frame(const StackFrame& f) {
  const std::string& file = f.filename;
  if (is_torch_internal(f)) return true;
  return file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos ||
         file.find("/lib/python3") != std::string::npos || file.rfind("<frozen", 0) == 0 ||
         file.find("/lib/python2") != std::string::npos;
}

const StackFrame* user_frame(const std::vector<StackFrame>& frames) {
  auto it = std::find_if(frames.begin(), frames.end(), [](const StackFrame& f) { return !is_library_frame(f); });
  return it == frames.end() ? nullptr : &*it;
}

std::string user_site_label(const std::vector<StackFrame>& frames) {
  if (frames.empty()) return "(no stack recorded)";
  if (const StackFrame* f = user_frame(frames)) return frame_label(*f);
  return site_label(frames);
}

std::string frame_text(const StackFrame& frame) { return frame_label(frame); }

}  // namespace fraglab
