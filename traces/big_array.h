// BigArray<T>: a growable array for parsers whose input size bounds how many elements
// they can ever create (a pickle opcode is at least one byte, so a 160 MB snapshot makes
// at most 160M values). Growth never copies: the array is an anonymous mapping that grows
// with mremap (the kernel moves page tables, not bytes; std::vector's doubling copied ~300 MB
// on a 2.4M-entry snapshot), and new elements are the kernel's zero pages (T's all-zero bit
// pattern), so nothing is filled twice. Address space is taken as the array grows, doubling,
// up to the bound: reserving the bound at once cost ~58x the input in address space (the
// 2.4M-entry snapshot failed under an 8 GB address-space limit). Only pages actually
// written are backed by memory (MAP_NORESERVE).
// (MADV_HUGEPAGE was measured too: with THP defrag=madvise the direct compaction cost
// more than the saved page faults, so it is not requested.)
#pragma once

#include <sys/mman.h>

#include <algorithm>
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
    mapped_ = std::min(capacity_, kFirstMapping / sizeof(T) + 1);
    void* p =
        mmap(nullptr, mapped_ * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
  }
  ~BigArray() {
    if (data_) munmap(data_, mapped_ * sizeof(T));
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
  size_t capacity() const { return capacity_; }  // the bound; address space is taken as needed
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
  // Empties the array, keeping its pages for reuse (their content is stale: push_back and append
  // overwrite it; grow_zeroed must not be used after a clear).
  void clear() { size_ = 0; }
  // Grows to n elements; the new ones are all-zero (never written before: zero pages).
  void grow_zeroed(size_t n) {
    if (n <= size_) return;
    grow_check(n - size_);
    size_ = n;
  }

 private:
  static constexpr size_t kFirstMapping = size_t{1} << 20;  // bytes

  void grow_check(size_t n) {
    if (n > capacity_ - size_) throw std::length_error("BigArray: more elements than the input can hold");
    if (size_ + n > mapped_) remap(std::min(capacity_, std::max(size_ + n, 2 * mapped_)));
  }
  void remap(size_t elements) {
    void* p = mremap(data_, mapped_ * sizeof(T), elements * sizeof(T), MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
    mapped_ = elements;
  }
  void swap(BigArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
    std::swap(mapped_, o.mapped_);
  }
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0, mapped_ = 0;
};

}  // namespace fraglab
