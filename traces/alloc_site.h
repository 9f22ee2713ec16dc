// Allocation sites: where in the program an allocation was asked for.
//
// A recorded stack (PyTorch's `frames`) starts with the allocator and tensor plumbing:
// frames in the installed torch package and C++ frames (c10, aten). The site is the
// innermost frame past them: the model or library line that asked for memory. The GUI
// colours blocks by it; `fraglab diff` and `fraglab diagnose` attribute bytes to it.
#pragma once

#include <string>
#include <vector>

#include "traces/trace.h"

namespace fraglab {

// True for frames of PyTorch itself (its Python package, C++/CUDA sources, unknown files).
bool is_torch_internal(const StackFrame& frame);

// "name  file:line" of the innermost user frame, or of the innermost frame when every frame
// is PyTorch's own; "(no stack recorded)" for an empty stack.
std::string site_label(const std::vector<StackFrame>& frames);

// True for frames of libraries (anything installed: site-/dist-packages, the standard library) and
// PyTorch's own; false for the user's code.
bool is_library_frame(const StackFrame& frame);
// The innermost frame of the user's own code (a script, a notebook cell), or nullptr when every frame is
// a library's.
const StackFrame* user_frame(const std::vector<StackFrame>& frames);
// "name  file:line" of that frame: the line in the user's code that holds the memory (falls back to
// site_label when every frame is a library's).
std::string user_site_label(const std::vector<StackFrame>& frames);
// "name  file:line" of one frame.
std::string frame_text(const StackFrame& frame);

}  // namespace fraglab
