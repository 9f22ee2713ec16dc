// BigArray<T>: a growable array for parsers whose input size bounds how many elements
// they can ever create (a pickle opcode is at least one byte, so a 160 MB snapshot makes
// at most 160M values). It reserves address space for that bound once, so growth never
// reallocates or copies (std::vector's doubling copied ~300 MB on a 2.4M-entry snapshot),
// and new elements are the kernel's zero pages (T's all-zero bit pattern), so nothing is
// filled twice. Only the pages actually written are backed by memory (MAP_NORESERVE).
// (MADV_HUGEPAGE was measured too: with THP defrag=madvise the direct compaction cost
// more than the saved page faults, so it is not requested.)
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace fraglab {

template <class T>
class BigArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  BigArray() = default;
  explicit BigArray(size_t max_elements) : capacity_(max_elements ? max_elements : 1) {
    size_t bytes = capacity_ * sizeof(T);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
  }
  ~BigArray() {
    if (data_) munmap(data_, capacity_ * sizeof(T));
  }
  BigArray(BigArray&& o) noexcept { swap(o); }
  BigArray& operator=(BigArray&& o) noexcept {
    BigArray tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  BigArray(const BigArray&) = delete;
  BigArray& operator=(const BigArray&) = delete;

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }

  void push_back(const T& v) {
    grow_check(1);
    data_[size_++] = v;
  }
  void append(const T* items, size_t n) {
    grow_check(n);
    std::memcpy(static_cast<void*>(data_ + size_), items, n * sizeof(T));
    size_ += n;
  }
  // Grows to n elements; the new ones are all-zero (never written before: zero pages).
  void grow_zeroed(size_t n) {
    if (n <= size_) return;
    grow_check(n - size_);
    size_ = n;
  }

 private:
  void grow_check(size_t n) const {
    if (n > capacity_ - size_) throw std::length_error("BigArray: more elements than the input can hold");
  }
  void swap(BigArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace fraglab
