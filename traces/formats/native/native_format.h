// fraglab's native trace format (.fltrace): compact, streaming, fast.
//
// Layout (all integers little-endian, whatever the host):
//
//   header   32 bytes   "FLTRACE\0", u32 version (1), u32 header size (32), u64 flags (0), u64 0
//   blocks   ...        each: u32 "FLBK", u32 event count, u32 raw size, u32 compressed size,
//                       u64 index of its first event, then one zstd frame (with checksum)
//   meta     ...        u32 "FLMT", u32 0, u64 raw size, u64 compressed size, one zstd frame
//                       holding TraceMeta as JSON (streams, settings, stacks, ...)
//   footer   32 bytes   u64 offset of meta, u64 event count, u64 block count, "FLTREND\0"
//
// A block's raw bytes are column-wise (a column of one field compresses and decodes better
// than rows of mixed fields):
//
//   u32 byte length of each value column (id, time, size, addr, stream, stack)
//   flags    1 byte per event: kind in bits 0-3; bit 4 stream, bit 5 stack present; 6-7 zero
//   lengths  1 byte per event: bits 0-3 byte count of size (0-8, 0 = size 0); bits 4-7 0 for
//            no addr, else 1 + byte count of the addr delta (0-8)
//   id       LEB128 varint per event
//   time     zigzag varint of the difference to the previous event's time (0 before a block)
//   size     that many little-endian bytes per event
//   addr     zigzag of the difference to the previous present addr in the block, as many
//            little-endian bytes as the lengths byte says (a load and a mask to decode)
//   stream   varint (stream index) per event whose stream bit is set
//   stack    varint (stack id) per event whose stack bit is set
//
// Blocks decode independently, so the writer holds one block and the reader one block at a
// time: traces of any length stream in bounded memory. The meta sits in a trailer so a writer
// can learn streams and stacks as it goes (the recorder does); the reader seeks to it first.
//
// Code: native_codec.cpp (a block's columns, the meta's JSON), native_writer.cpp and
// native_reader.cpp (framing, zstd, checks); internals shared with tests in native_format_detail.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "traces/trace_io.h"

namespace fraglab {

constexpr uint32_t kNativeVersion = 1;

struct NativeWriterOptions {
  uint32_t block_events = 1u << 16;  // events per compressed block
  int zstd_level = 1;                // 1: fastest; higher levels gained under 1% on traces tried
};

// The native writer also takes a meta that grew while writing (streams or stacks interned
// after the first events); it is what the trailer will hold.
class NativeWriter : public TraceWriter {
 public:
  virtual void set_meta(const TraceMeta& meta) = 0;
};

// The format table's recogniser (native_recognise.cpp): the file starts with the magic.
bool looks_like_native(std::string_view head);
std::unique_ptr<EventSource> open_native(const std::string& path);
std::unique_ptr<NativeWriter> create_native_writer(const std::string& path, const TraceMeta& meta,
                                                   const NativeWriterOptions& options = {});

}  // namespace fraglab
