// A reader of Python pickles (protocols 0-5) restricted to pickle's *data* opcodes:
// None, bools, ints, floats, str, bytes, lists, tuples, dicts, sets, and the memo.
//
// Why hand-written: Debian 12 packages no C++ pickle reader, and the general ones
// (Python's own unpickler, PyTorch's torch::jit unpickler) execute code by design:
// GLOBAL/REDUCE/BUILD import and call arbitrary Python objects. fraglab reads files
// from anywhere, so this reader accepts only the opcodes that build plain data and
// rejects every other one (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
// NEWOBJ_EX, EXT*, PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER, and any unknown
// byte) with a FormatError naming the opcode, the file and the byte offset. PyTorch's
// own memory viewer (MemoryViz.js) carries a small unpickler for the same reason.
//
// Design, for speed (a 160 MB snapshot parses in a fraction of a second):
//  - A Value is 8 bytes: a 4-bit kind and a 60-bit payload. Small ints live inline;
//    strings and bytes are views into the input buffer (no copy): offset and length inline
//    (a side table only for a string of 512 KiB or more); containers are indices into a
//    container table.
//  - Every table is a BigArray (traces/big_array.h): reserved once from the input's size,
//    never reallocated, zero-filled by the kernel.
//  - Container items live in one shared arena. Pickle builds containers from runs of
//    stack items (MARK ... APPENDS/SETITEMS, TUPLEn); each run is copied into the arena
//    once as a chunk, and a container is a short linked list of chunks (usually one).
//    No value is heap-allocated on its own.
//  - The memo stores Values, so a memo GET of a string or a list yields the *same*
//    Value: repeated strings and shared frame lists come out interned for free, and a
//    consumer can recognise them by identity (same_object()).
//  - Streaming (parse with a ListSink): the items of one list (PyTorch's device_traces[d], millions
//    of entry dicts) go to the consumer as they are appended instead of into the tree. Entry dicts,
//    and the frames lists under their 'frames' key, live in transient tables emptied after each
//    append; a memo slot that still names one afterwards is rewritten (a consumed entry: Gone; a
//    frames list: Interned with the consumer's id for it). The memory of the document is then the
//    rest of the snapshot (segments, settings, frame dicts) plus the memo, not the history.
//    Anything that does not fit that layout throws StreamAbandoned and the caller parses again
//    without a sink, so the result never depends on the layout (see pytorch_snapshot.cpp).
//  - Flat entries (a sink that reads FlatItems): an entry laid out as PyTorch's pickler writes it
//    (EMPTY_DICT [memo] MARK, key/value pairs of scalars and memo references, its 'frames' list of
//    memo references, SETITEMS) is read straight from the opcodes into a FlatItem, without stack
//    pushes or tables; its frames list is interned on the spot (memo: Interned). Anything else in
//    an entry (a new frame dict, a nested container, an unusual opcode) rewinds to the entry's
//    start, undoes its memo writes, and lets the generic machine read it and the rest of its batch,
//    so the items reach the sink in order and as the generic reading gives them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "traces/big_array.h"

namespace fraglab::pickle {

// Kinds start at 1: an all-zero Value is "no value" (an unused memo slot, fresh zero pages).
// Interned and Gone occur only while streaming: a frames list the consumer has interned (payload: its
// id) and a consumed entry (payload 0: any use of it abandons the streaming parse) or, on the value
// stack only, a flat entry awaiting its batch's end (payload: its index + 1).
enum class Kind : uint8_t {
  None = 1,
  False,
  True,
  Int,
  WideInt,
  HugeInt,
  Float,
  Str,
  Bytes,
  List,
  Tuple,
  Dict,
  Set,
  Interned,
  Gone
};

const char* kind_name(Kind kind);

class Value {
 public:
  Value() = default;
  Kind kind() const { return static_cast<Kind>(bits_ >> 60); }
  uint64_t payload() const { return bits_ & kPayloadMask; }
  bool same_object(Value other) const { return bits_ == other.bits_; }
  bool is_container() const { return kind() >= Kind::List && kind() <= Kind::Set; }
  bool is_int() const { return kind() == Kind::Int || kind() == Kind::WideInt; }
  bool is_str() const { return kind() == Kind::Str; }

  static Value make(Kind kind, uint64_t payload) { return Value((static_cast<uint64_t>(kind) << 60) | payload); }
  static constexpr uint64_t kPayloadMask = (uint64_t{1} << 60) - 1;

 private:
  explicit Value(uint64_t bits) : bits_(bits) {}
  uint64_t bits_ = uint64_t{1} << 60;  // Kind::None
};

class Document;

// Thrown by a streaming parse (or its consumer) when the input is not laid out as the streaming
// path expects; the caller parses again without a sink. Never escapes pytorch_snapshot.cpp.
struct StreamAbandoned {};

// A streamed entry read by the fast path: its values by the sink's slot for each key.
struct FlatItem {
  static constexpr int kSlots = 9;
  uint64_t offset = 0;   // input offset of the entry's EMPTY_DICT (what Document::offset gives a dict)
  uint32_t present = 0;  // bit s: slots[s] was given (each at most once)
  bool consumed = false;
  Value slots[kSlots];
  bool has(int slot) const { return present >> slot & 1; }
  Value get(int slot) const { return has(slot) ? slots[slot] : Value(); }
};

// The consumer of a streamed list's items.
class ListSink {
 public:
  virtual ~ListSink() = default;
  // Called for each item appended to the streamed list, in order, while the rest of the document
  // is still being parsed. The item (a transient dict) is readable until the call returns.
  virtual void item(Document& doc, Value item) = 0;

  // The fast path (see above), for a sink that reads FlatItems: items come through flat_item()
  // (in order with those through item()), their 'frames' lists through intern_list().
  virtual bool reads_flat_items() const { return false; }
  // The slot (0 .. FlatItem::kSlots - 1) for a key's value, or -1 where the value is not read.
  virtual int slot_of(std::string_view /*key*/) { return -1; }
  // A frames list's items (memo references); returns the tag that local ids of it carry (id + 1).
  virtual uint32_t intern_list(Document& /*doc*/, const Value* /*items*/, size_t /*n*/) { return 0; }
  virtual void flat_item(Document& /*doc*/, const FlatItem& /*item*/) {}
  // The parse has ended (`completed`: without an error), the document still there: a sink that reads items
  // on another thread finishes with them here. On completion it may throw what that reading found (the
  // parse then fails with it); otherwise it must not throw.
  virtual void stream_ended(bool /*completed*/) {}
};

// Input still being written (a gzip file inflating on another thread, traces/io/gzip.h): the parser
// waits for more where it reaches the end of what is ready.
class InputFeed {
 public:
  virtual ~InputFeed() = default;
  // Waits until more than `ready` bytes are written or all are; returns how many are. May throw
  // (the producer gave up), which the parse passes on.
  virtual size_t wait_beyond(size_t ready) = 0;
};

// Which list to stream: root['device_traces'][device], as PyTorch lays snapshots out.
struct StreamSpec {
  int device = 0;
  ListSink* sink = nullptr;
};

// The parsed object graph. It refers into the input bytes, which must outlive it.
class Document {
 public:
  // Parses `bytes` (a complete pickle). `name` names the input in errors. Throws FormatError.
  static Document parse(std::string_view bytes, const std::string& name);
  // The same, streaming the list `spec` names to its sink (see above); the root's value for it
  // then holds no items. Throws FormatError or StreamAbandoned.
  static Document parse(std::string_view bytes, const std::string& name, StreamSpec spec);
  // The same over `bytes` still being written (its final extent): `feed` says how much is ready.
  static Document parse(std::string_view bytes, const std::string& name, StreamSpec spec, InputFeed* feed);
  // Whether a streaming parse found and streamed its list (else the document is complete), and
  // that list's Value.
  bool streamed() const { return streamed_list_.kind() == Kind::List; }
  // Entries the fast path read (the rest of a streamed list went through ListSink::item).
  uint64_t flat_items() const { return flat_items_; }
  Value streamed_list() const { return streamed_list_; }

  Value root() const { return root_; }
  const std::string& name() const { return name_; }
  size_t input_size() const { return input_.size(); }

  // Scalars. as_int throws FormatError (naming `what`) unless the value is an int that fits.
  int64_t as_int(Value v, const char* what) const {
    if (v.kind() == Kind::Int) return static_cast<int64_t>(v.payload() << 4) >> 4;  // sign-extend 60 bits
    return as_int_slow(v, what);
  }
  double as_float(Value v, const char* what) const;          // int or float
  std::string_view as_str(Value v, const char* what) const;  // str or bytes
  // A str's bytes asked for ahead of as_str() (a reader on another core than the parser's, whose input it is).
  // Inline spans only: the side table may be growing on the parser's thread (self_contained() values have none).
  void prefetch_str(Value v) const {
    if (v.kind() == Kind::Str && self_contained(v))
      __builtin_prefetch(input_.data() + std::min<uint64_t>(span_of(v).offset, input_.size()));
  }
  bool as_bool(Value v, const char* what) const;  // bool or int
  // Text for any scalar, Python-like (ints in decimal, True/False/None, floats shortest).
  std::string to_text(Value v) const;
  // Whether reading `v` (its kind, as_int, as_str, an Interned id) needs only the value and the input
  // bytes, not the document's side tables, which move as the parse grows them: such a value may be read
  // on another thread while the parse goes on. A FlatItem's absent slots (Value()) are.
  static bool self_contained(Value v) {
    switch (v.kind()) {
      case Kind::Str:
      case Kind::Bytes:
        return (v.payload() & kSideSpanBit) == 0;
      case Kind::WideInt:
      case Kind::HugeInt:
      case Kind::Float:
      case Kind::List:
      case Kind::Tuple:
      case Kind::Dict:
      case Kind::Set:
      case Kind::Gone:
        return false;
      default:
        return true;
    }
  }

  // Containers. size() counts items (dict: pairs; it walks the chunks). offset() is where the container's
  // opening opcode sits in the input: the position to name in errors about its content.
  size_t size(Value container) const;
  bool empty(Value container) const { return tables(container).containers[index(container)].first == kNoChunk; }
  uint64_t offset(Value container) const;
  // Identity of a container of the complete document (not of a transient one).
  uint32_t container_index(Value container) const { return static_cast<uint32_t>(container.payload()); }
  size_t container_count() const { return tables_.containers.size(); }  // of the complete document
  bool transient(Value container) const { return container.payload() & kTransientBit; }
  // A transient container's tag, for the consumer (0 until set): what it made of the container.
  uint32_t tag(Value transient_container) const { return tags_[index(transient_container)]; }
  void set_tag(Value transient_container, uint32_t tag) { tags_[index(transient_container)] = tag; }

  // Calls f(item) for each list/tuple/set item, in order.
  template <class F>
  void for_each(Value seq, F&& f) const {
    const Tables& t = tables(seq);
    for (uint32_t c = t.containers[index(seq)].first; c != kNoChunk; c = t.chunks[c].next) {
      const Value* it = t.arena.data() + t.chunks[c].begin;
      for (uint32_t i = 0; i < t.chunks[c].count; ++i) f(it[i]);
    }
  }
  // Calls f(key, value) for each dict pair, in insertion order (a repeated key appears twice;
  // find() returns the last, as Python's dict keeps it).
  template <class F>
  void for_each_pair(Value dict, F&& f) const {
    const Tables& t = tables(dict);
    for (uint32_t c = t.containers[index(dict)].first; c != kNoChunk; c = t.chunks[c].next) {
      const Value* it = t.arena.data() + t.chunks[c].begin;
      for (uint32_t i = 0; i + 1 < t.chunks[c].count; i += 2) f(it[i], it[i + 1]);
    }
  }
  // The value under a str key, or nullptr.
  const Value* find(Value dict, std::string_view key) const;

  // Throws FormatError at the container's offset unless v has one of the given kinds.
  void expect(Value v, Kind kind, const char* what) const;
  [[noreturn]] void fail(Value container, const std::string& what) const;
  [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const;

 private:
  friend class Parser;
  int64_t as_int_slow(Value v, const char* what) const;
  static constexpr uint32_t kNoChunk = UINT32_MAX;
  // Payload bit 59: a container in the transient tables; a Str/Bytes in the span side table.
  static constexpr uint64_t kTransientBit = uint64_t{1} << 59;
  static constexpr uint64_t kSideSpanBit = uint64_t{1} << 59;
  static constexpr int kInlineLenBits = 19;  // inline strings: offset << 19 | length
  struct Span {
    uint64_t offset, size;
  };
  struct Chunk {
    uint64_t begin;  // into arena_
    uint32_t count;
    uint32_t next;
  };
  struct Container {
    uint64_t offset;       // input byte offset of the opcode that created it
    uint32_t first, last;  // chunks, kNoChunk while empty
  };

  // Container items live in one shared arena, as chunks, one Container per container.
  struct Tables {
    BigArray<Value> arena;
    BigArray<Chunk> chunks;
    BigArray<Container> containers;
    void clear() {
      arena.clear();
      chunks.clear();
      containers.clear();
    }
  };
  const Tables& tables(Value c) const { return (c.payload() & kTransientBit) ? transient_ : tables_; }
  static uint64_t index(Value c) { return c.payload() & ~kTransientBit; }
  Span span_of(Value str) const;

  std::string_view input_;
  std::string name_;
  Value root_;
  Value streamed_list_;  // None unless a list was streamed
  uint64_t flat_items_ = 0;
  Tables tables_;
  Tables transient_;           // entries being streamed and their frames lists
  BigArray<uint32_t> tags_;    // by transient container
  BigArray<Span> spans_;       // long Str and Bytes payloads: views into input_
  std::vector<int64_t> wide_;  // ints outside the inline 60-bit range
  std::vector<double> floats_;
  std::vector<uint64_t> huge_;  // HugeInt: input offset of an int wider than 64 bits
};

}  // namespace fraglab::pickle
