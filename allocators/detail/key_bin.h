// KeyBin<T>: one bin of the binned free-block indexes (OrderedKeys, SizeBins): its keys in a heap
// array that only grows. A std::vector's three pointers cost a subtraction and a division by the
// element size for each size() and make a bin table half as large again; the bins a trace uses grow
// once and keep their room.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace fraglab::detail {

template <class T>
struct KeyBin {
  static_assert(std::is_trivially_copyable_v<T>, "bins move keys as bytes");

  T* keys = nullptr;
  uint32_t size = 0;
  uint32_t cap = 0;

  // Room for one more key. Out of line: rare once the bins a trace uses have grown.
  [[gnu::noinline]] void grow() {
    const uint32_t more = cap ? 2 * cap : 2;
    T* bigger = std::allocator<T>().allocate(more);
    if (size) std::memcpy(static_cast<void*>(bigger), keys, size * sizeof(T));
    release();
    keys = bigger;
    cap = more;
  }
  // Gives the array back (the owner's destructor calls it: a bin is a plain record in a table).
  void release() {
    if (keys) std::allocator<T>().deallocate(keys, cap);
    keys = nullptr;
  }
};

}  // namespace fraglab::detail
