// PopulatePages: the pages of a buffer about to be written from start to end (a vector just reserved
// for millions of events) faulted in on another core while this one writes, so the writer never stops
// for the kernel. A fresh 96 MB buffer is ~23k page faults (each a trap, a page taken and zeroed), ~30 ms
// of a 2.4M-entry snapshot's import on the core that builds the events, while the other core sits idle
// once inflating has ended. madvise(MADV_POPULATE_WRITE) (Linux 5.14) faults the range in within the
// kernel, without touching its bytes from C++: the writer and the populating thread share no data. Where
// the kernel lacks it, nothing happens and the writer faults as before; where no thread can start, the
// pages are faulted in right away (traces/background_task.h).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "traces/background_task.h"

namespace fraglab {

class PopulatePages {
 public:
  // Buffers smaller than this fault in faster than a thread starts.
  static constexpr size_t kWorthIt = size_t{16} << 20;

  PopulatePages(void* begin, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    if (bytes < kWorthIt) return;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    // Whole pages inside the buffer: the page holding its start may hold other live data, which
    // populating would not change (present pages are left as they are), but madvise needs an aligned start.
    const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(begin) + bytes) & ~(page - 1);
    if (end <= first) return;
    populating_.start([first, end] {
      madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE);  // best effort
    });
#else
    (void)begin;
    (void)bytes;
#endif
  }

 private:
  BackgroundTask populating_;  // joined when this object goes
};

// PopulateAhead: for a thread that writes a fresh mapping from its start to its end a step at a time (the
// inflater, the file reader): the pages ahead of it faulted in by the kernel 8 MiB per call
// (MADV_POPULATE_WRITE) rather than by a trap per 4 KiB page as each is first written. Same pages, same
// zeroing, less overhead: 172 MB read(2) into a fresh mapping took ~110 ms, ~87 ms so; igzip's inflate of the
// same ~115 ms, ~100 ms (AMD EPYC). Where the kernel lacks it, the writes fault as before.
class PopulateAhead {
 public:
  static constexpr size_t kStep = size_t{8} << 20;
  // `base`: the mapping's start (page-aligned, as mmap gives it); `size`: its bytes.
  PopulateAhead(void* base, size_t size) : base_(static_cast<char*>(base)), size_(size) {}
  // Bytes [0, upto) are about to be written.
  void before_writing(size_t upto) {
#ifdef MADV_POPULATE_WRITE
    if (upto <= done_ || done_ >= size_) return;
    static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t next = upto > done_ + kStep ? upto : done_ + kStep;
    next = (next < size_ ? next : size_) + page - 1;
    next -= next % page;                                        // within the mapping: it spans whole pages
    madvise(base_ + done_, next - done_, MADV_POPULATE_WRITE);  // best effort: else the writes fault
    done_ = next;
#else
    (void)upto;
#endif
  }

 private:
  char* base_;
  size_t size_;
  size_t done_ = 0;  // a whole number of pages
};

}  // namespace fraglab
