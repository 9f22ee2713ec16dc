#include "gui/model/shown_numbers.h"

#include "traces/io/atomic_file.h"

namespace fraglab::gui {

void ShownNumbers::write(const std::string& path) const {
  AtomicFile out(path);
  out.write(values_.dump(1) + "\n");
  out.commit();
}

}  // namespace fraglab::gui
