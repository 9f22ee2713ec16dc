// The data-only pickle reader: see pickle_reader.h for what it accepts and why it is
// hand-written. Opcode values and semantics follow CPython's Lib/pickle.py and
// Modules/_pickle.c (the reference unpickler); names in errors are pickletools' names.
#include "traces/formats/pytorch/pickle_reader.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "traces/io/format_error.h"

namespace fraglab::pickle {

// The fast path's lambdas: inlined, so that its input position stays in registers.
#define FLAT_INLINE __attribute__((always_inline))

namespace {

// An unused memo slot: all-zero bits (no Kind is 0), what fresh pages hold.
const Value kAbsent = Value::make(static_cast<Kind>(0), 0);

constexpr int64_t kInlineMin = -(int64_t{1} << 59);
constexpr int64_t kInlineMax = (int64_t{1} << 59) - 1;

// Python's pickletools names, by opcode (protocols 0-5), for error messages.
struct OpcodeName {
  uint8_t op;
  const char* name;
};
constexpr OpcodeName kOpcodeNames[] = {
    {'(', "MARK"},
    {'.', "STOP"},
    {'0', "POP"},
    {'1', "POP_MARK"},
    {'2', "DUP"},
    {'F', "FLOAT"},
    {'I', "INT"},
    {'J', "BININT"},
    {'K', "BININT1"},
    {'L', "LONG"},
    {'M', "BININT2"},
    {'N', "NONE"},
    {'P', "PERSID"},
    {'Q', "BINPERSID"},
    {'R', "REDUCE"},
    {'S', "STRING"},
    {'T', "BINSTRING"},
    {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"},
    {'X', "BINUNICODE"},
    {'a', "APPEND"},
    {'b', "BUILD"},
    {'c', "GLOBAL"},
    {'d', "DICT"},
    {'}', "EMPTY_DICT"},
    {'e', "APPENDS"},
    {'g', "GET"},
    {'h', "BINGET"},
    {'i', "INST"},
    {'j', "LONG_BINGET"},
    {'l', "LIST"},
    {']', "EMPTY_LIST"},
    {'o', "OBJ"},
    {'p', "PUT"},
    {'q', "BINPUT"},
    {'r', "LONG_BINPUT"},
    {'s', "SETITEM"},
    {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"},
    {'u', "SETITEMS"},
    {'G', "BINFLOAT"},
    {0x80, "PROTO"},
    {0x81, "NEWOBJ"},
    {0x82, "EXT1"},
    {0x83, "EXT2"},
    {0x84, "EXT4"},
    {0x85, "TUPLE1"},
    {0x86, "TUPLE2"},
    {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"},
    {0x89, "NEWFALSE"},
    {0x8a, "LONG1"},
    {0x8b, "LONG4"},
    {'B', "BINBYTES"},
    {'C', "SHORT_BINBYTES"},
    {0x8c, "SHORT_BINUNICODE"},
    {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},
    {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"},
    {0x94, "MEMOIZE"},
    {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
};

const char* opcode_name(uint8_t op) {
  for (const OpcodeName& o : kOpcodeNames)
    if (o.op == op) return o.name;
  return nullptr;
}

std::string describe(uint8_t op) {
  const char* n = opcode_name(op);
  return n ? fmt::format("opcode {} (0x{:02x})", n, op) : fmt::format("unknown opcode 0x{:02x}", op);
}

template <class T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the hosts fraglab supports are little-endian, as pickle is
  return v;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::False:
    case Kind::True:
      return "bool";
    case Kind::Int:
    case Kind::WideInt:
    case Kind::HugeInt:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Set:
      return "set";
    case Kind::Interned:
      return "list";
    case Kind::Gone:
      return "dict";
  }
  return "?";
}

// The parser's value stack: std::vector's interface where the parser uses it, with a push that
// is one compare and a store (std::vector<Value>::push_back stayed out of line: 5% of an import).
class ValueStack {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Value& back() { return data_[size_ - 1]; }
  const Value& back() const { return data_[size_ - 1]; }
  Value& operator[](size_t i) { return data_[i]; }
  const Value& operator[](size_t i) const { return data_[i]; }
  const Value* data() const { return data_.get(); }
  const Value* begin() const { return data_.get(); }
  const Value* end() const { return data_.get() + size_; }
  [[gnu::always_inline]] void push_back(Value v) {
    if (size_ == capacity_) [[unlikely]]
      grow();
    data_[size_++] = v;
  }
  void pop_back() { --size_; }
  void resize(size_t n) { size_ = std::min(size_, n); }  // the parser only ever shrinks it
  void reserve(size_t n) {
    while (capacity_ < n) grow();
  }

 private:
  [[gnu::noinline]] void grow() {
    size_t capacity = capacity_ ? capacity_ * 2 : 4096;
    auto bigger = std::make_unique<Value[]>(capacity);
    std::copy(data_.get(), data_.get() + size_, bigger.get());
    data_ = std::move(bigger);
    capacity_ = capacity;
  }
  std::unique_ptr<Value[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

// The stack machine. One pass over the input; every opcode checks its operands' bounds.
class Parser {
 public:
  Parser(Document& doc, StreamSpec spec, InputFeed* feed)
      : d_(doc), spec_(spec), streaming_(spec.sink != nullptr), feed_(feed) {}

  void run() {
    const auto* begin = reinterpret_cast<const uint8_t*>(d_.input_.data());
    p_ = begin;
    full_end_ = begin + d_.input_.size();
    end_ = feed_ ? begin + feed_->wait_beyond(0) : full_end_;
    begin_ = begin;
    // Bounds from the input: every arena item, container, chunk and memo slot is made by
    // an opcode of at least one byte, every string by one of at least two. Only address
    // space is reserved; pages are backed as they are written.
    size_t n = d_.input_.size() + 16;
    for (Document::Tables* t : {&d_.tables_, streaming_ ? &d_.transient_ : nullptr}) {
      if (!t) continue;
      t->arena = BigArray<Value>(n);
      t->containers = BigArray<Document::Container>(n);
      t->chunks = BigArray<Document::Chunk>(n);
    }
    if (streaming_) d_.tags_ = BigArray<uint32_t>(n);
    d_.spans_ = BigArray<Document::Span>(n / 2 + 16);
    memo_ = BigArray<Value>(n + 64);
    stack_.reserve(4096);
    for (;;) {
      if (p_ >= end_ && !ready(1)) fail(static_cast<uint64_t>(p_ - begin_), "pickle is truncated: it ends before STOP");
      op_at_ = static_cast<uint64_t>(p_ - begin_);
      uint8_t op = *p_++;
      if (step(op)) break;
    }
  }

 private:
  Document& d_;
  StreamSpec spec_;
  bool streaming_;
  // Streaming: the root dict, root['device_traces'] and the list streamed (None until seen).
  Value root_dict_, device_traces_, stream_list_;
  std::vector<uint64_t> transient_memo_keys_;  // memo keys stored with a transient container
  static constexpr uint32_t kConsumed = 1;     // the tag of a consumed entry
  // The fast path (pickle_reader.h): on once the streamed list is known and the sink reads flat items.
  bool flat_ = false;
  std::vector<FlatItem> flat_pending_;  // read, awaiting their batch's APPENDS (index + 1 on the stack)
  struct MemoWrite {
    uint64_t key;
    Value old;
  };
  std::array<MemoWrite, 64> flat_undo_;  // the entry being read: its memo writes, to undo
  std::vector<Value> flat_list_;         // the entry being read: its frames list's items (size: room)
  struct KeySlot {
    Value key;  // None: empty
    int slot = -1;
  };
  std::array<KeySlot, 256> key_slots_{};  // key Value -> sink slot, by identity (open addressing)
  size_t key_slots_used_ = 0;
  static constexpr size_t kKeyMemory = 16;
  std::array<KeySlot, kKeyMemory> last_keys_{};  // by position in the entry: the key seen last there
  // By position in the entry: the bytes of the memo reference (BINGET/LONG_BINGET) that gave the key seen
  // last there. The next entry's key at that position is recognised by those bytes (one 8-byte compare)
  // while its memo slot still holds that key, without decoding the opcode.
  struct KeyBytes {
    uint64_t bytes = 0, mask = 0;  // the reference's bytes (little-endian), and which of 8 they are
    uint64_t memo_key = 0;
    Value key;
    int slot = -1;
    uint8_t size = 0;  // 0: nothing remembered
  };
  std::array<KeyBytes, kKeyMemory> key_bytes_{};
  int frames_slot_ = -1;
  InputFeed* feed_;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;       // of the bytes ready
  const uint8_t* full_end_ = nullptr;  // of the input
  const uint8_t* begin_ = nullptr;
  uint64_t op_at_ = 0;
  uint8_t op_ = 0;
  ValueStack stack_;
  std::vector<size_t> marks_;
  BigArray<Value> memo_;                          // dense keys (what picklers write)
  std::unordered_map<uint64_t, Value> far_memo_;  // keys too large to index densely
  uint64_t memo_count_ = 0;

  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    throw FormatError::at_offset(d_.name_, offset, what);
  }
  [[noreturn]] void fail_op(const std::string& what) const { fail(op_at_, describe(op_) + ": " + what); }

  [[gnu::always_inline]] const uint8_t* take(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) [[unlikely]]
      wait_or_truncated(n);
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  // Whether `n` bytes past p_ are (or become) ready; false where the input ends first.
  [[gnu::noinline]] bool ready(uint64_t n) {
    while (static_cast<uint64_t>(end_ - p_) < n) {
      if (!feed_ || end_ == full_end_) return false;
      end_ = begin_ + feed_->wait_beyond(static_cast<size_t>(end_ - begin_));
    }
    return true;
  }
  [[gnu::cold, gnu::noinline]] void wait_or_truncated(uint64_t n) {
    if (!ready(n))
      fail(op_at_, fmt::format("pickle is truncated: {} needs {} bytes, {} left", describe(op_), n, end_ - p_));
  }
  // Text operand of a protocol-0 opcode: up to the newline.
  std::string_view line() {
    const void* nl = std::memchr(p_, '\n', static_cast<size_t>(end_ - p_));
    while (!nl && ready(static_cast<uint64_t>(end_ - p_) + 1))
      nl = std::memchr(p_, '\n', static_cast<size_t>(end_ - p_));
    if (!nl) fail(op_at_, "pickle is truncated: " + describe(op_) + " has no terminating newline");
    std::string_view s(reinterpret_cast<const char*>(p_), static_cast<size_t>(static_cast<const uint8_t*>(nl) - p_));
    p_ = static_cast<const uint8_t*>(nl) + 1;
    return s;
  }

  [[gnu::always_inline]] void push(Value v) { stack_.push_back(v); }
  Value pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail_op("stack underflow");
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail_op("stack underflow");
    return stack_.back();
  }
  size_t pop_mark() {
    if (marks_.empty()) fail_op("no MARK on the stack");
    size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  Value make_int(int64_t v) {
    if (v >= kInlineMin && v <= kInlineMax)
      return Value::make(Kind::Int, static_cast<uint64_t>(v) & Value::kPayloadMask);
    d_.wide_.push_back(v);
    return Value::make(Kind::WideInt, d_.wide_.size() - 1);
  }
  Value make_float(double v) {
    d_.floats_.push_back(v);
    return Value::make(Kind::Float, d_.floats_.size() - 1);
  }
  // Strings are (offset, length) inline; the side table holds only what does not fit.
  Value make_span(Kind kind, const uint8_t* at, uint64_t n) {
    auto offset = static_cast<uint64_t>(at - begin_);
    if (n < (uint64_t{1} << Document::kInlineLenBits) && offset < (uint64_t{1} << 40))
      return Value::make(kind, offset << Document::kInlineLenBits | n);
    d_.spans_.push_back({offset, n});
    return Value::make(kind, Document::kSideSpanBit | (d_.spans_.size() - 1));
  }
  Value make_container(Kind kind) {
    if (streaming_) [[unlikely]] {
      if (transient_role(kind)) {
        d_.transient_.containers.push_back({op_at_, Document::kNoChunk, Document::kNoChunk});
        d_.tags_.push_back(0);
        return Value::make(kind, Document::kTransientBit | (d_.transient_.containers.size() - 1));
      }
    }
    d_.tables_.containers.push_back({op_at_, Document::kNoChunk, Document::kNoChunk});
    Value v = Value::make(kind, d_.tables_.containers.size() - 1);
    if (streaming_) [[unlikely]]
      note_role(v);
    return v;
  }
  // Moves stack_[from, end) into the arena as a chunk appended to `container`.
  void append_items(Value container, size_t from) {
    size_t n = stack_.size() - from;
    if (n == 0) return;
    if (streaming_) [[unlikely]] {
      if (container.same_object(stream_list_)) return consume(from);
      if (!d_.transient(container))
        check_persistent_items(from);
      else
        check_no_flat_items(from);
    }
    Document::Tables& t = d_.transient(container) ? d_.transient_ : d_.tables_;
    if (n > UINT32_MAX || t.chunks.size() >= UINT32_MAX - 1) fail_op("too many items");
    uint64_t at = t.arena.size();
    t.arena.append(stack_.data() + from, n);
    stack_.resize(from);
    auto chunk = static_cast<uint32_t>(t.chunks.size());
    t.chunks.push_back({at, static_cast<uint32_t>(n), Document::kNoChunk});
    Document::Container& c = t.containers[Document::index(container)];
    if (c.last == Document::kNoChunk)
      c.first = chunk;
    else
      t.chunks[c.last].next = chunk;
    c.last = chunk;
  }

  // --- Streaming (see pickle_reader.h). Roles follow from where a new container is made, as
  // Python's pickler writes: right after its key (dict value), or as the next item of the list
  // on top (APPEND) or of the container below the last MARK (APPENDS/SETITEMS). A guess that
  // turns out wrong is caught (transient values reaching the tree, the streamed list not being
  // root['device_traces'][device]) and abandons the streaming parse.

  // Whether the value made now would be an item of `c` under MARK ... APPENDS/SETITEMS, and how
  // many items precede it above the MARK.
  bool after_mark_of(Value c, size_t& above) const {
    if (marks_.empty() || marks_.back() == 0 || !stack_[marks_.back() - 1].same_object(c)) return false;
    above = stack_.size() - marks_.back();
    return true;
  }
  bool top_is(Value c, size_t depth) const {
    return stack_.size() >= depth && stack_[stack_.size() - depth].same_object(c);
  }
  bool key_on_top(std::string_view key) const {
    if (stack_.empty() || stack_.back().kind() != Kind::Str) return false;
    Document::Span s = d_.span_of(stack_.back());
    return s.size == key.size() && std::memcmp(begin_ + s.offset, key.data(), key.size()) == 0;
  }
  // Whether a value made now would be the value under the key on top of dict `c`.
  bool value_of(Value c, std::string_view key) const {
    size_t above = 0;
    if (!key_on_top(key)) return false;
    if (after_mark_of(c, above)) return above % 2 == 1;
    return top_is(c, 2);  // SETITEM
  }
  // Entry dicts of the streamed list and the frames lists of those entries are transient.
  bool transient_role(Kind kind) const {
    if (kind == Kind::Dict) {
      size_t above = 0;
      return stream_list_.kind() == Kind::List && (after_mark_of(stream_list_, above) || top_is(stream_list_, 1));
    }
    if (kind != Kind::List || !key_on_top("frames") || stack_.size() < 2) return false;
    size_t above = 0;
    Value entry = !marks_.empty() && marks_.back() >= 1 ? stack_[marks_.back() - 1] : stack_[stack_.size() - 2];
    if (entry.kind() != Kind::Dict || !d_.transient(entry)) return false;
    return after_mark_of(entry, above) ? above % 2 == 1 : top_is(entry, 2);
  }
  void note_role(Value v) {
    if (root_dict_.kind() == Kind::None) {
      if (stack_.empty() && marks_.empty() && v.kind() == Kind::Dict) root_dict_ = v;
      return;
    }
    if (v.kind() != Kind::List) return;
    if (device_traces_.kind() == Kind::None) {
      if (value_of(root_dict_, "device_traces")) device_traces_ = v;
      return;
    }
    if (stream_list_.kind() != Kind::None || spec_.device < 0) return;
    size_t above = 0, index = 0;
    if (after_mark_of(device_traces_, above))
      index = d_.size(device_traces_) + above;
    else if (top_is(device_traces_, 1))
      index = d_.size(device_traces_);
    else
      return;
    if (index == static_cast<size_t>(spec_.device)) {
      stream_list_ = v;
      flat_ = spec_.sink->reads_flat_items();
      frames_slot_ = spec_.sink->slot_of("frames");
    }
  }
  // Items leaving for a container of the tree must not be (or name) transient ones.
  void check_persistent_items(size_t from) const {
    for (size_t i = from; i < stack_.size(); ++i) {
      Value v = stack_[i];
      if (v.kind() >= Kind::Interned || (v.is_container() && d_.transient(v))) throw StreamAbandoned{};
    }
  }
  void check_no_flat_items(size_t from) const {
    for (size_t i = from; i < stack_.size(); ++i)
      if (is_flat(stack_[i])) throw StreamAbandoned{};
  }
  // The streamed list's new items go to the sink; then the transient tables are emptied.
  void consume(size_t from) {
    for (size_t i = from; i < stack_.size(); ++i) {
      Value v = stack_[i];
      if (is_flat(v)) {
        FlatItem& item = flat_pending_[v.payload() - 1];
        if (item.consumed) throw StreamAbandoned{};
        spec_.sink->flat_item(d_, item);
        item.consumed = true;
        ++d_.flat_items_;
        continue;
      }
      if (v.kind() != Kind::Dict || !d_.transient(v) || d_.tag(v) == kConsumed) throw StreamAbandoned{};
      spec_.sink->item(d_, v);
      d_.set_tag(v, kConsumed);
    }
    stack_.resize(from);
    d_.streamed_list_ = stream_list_;
    for (Value v : stack_)
      if ((v.is_container() && d_.transient(v)) || is_flat(v)) throw StreamAbandoned{};
    flat_pending_.clear();
    for (uint64_t key : transient_memo_keys_) {
      Value* slot = memo_slot(key);
      if (!slot || !slot->is_container() || !d_.transient(*slot)) continue;
      uint32_t tag = d_.tag(*slot);
      if (slot->kind() == Kind::Dict && tag == kConsumed)
        *slot = Value::make(Kind::Gone, 0);
      else if (slot->kind() == Kind::List && tag != 0)
        *slot = Value::make(Kind::Interned, tag);
      else
        throw StreamAbandoned{};
    }
    transient_memo_keys_.clear();
    d_.transient_.clear();
    d_.tags_.clear();
  }
  // --- The fast path for streamed entries (pickle_reader.h). It keeps its input position in locals
  // (the generic machine's members are reloaded after every byte read through a uint8_t pointer,
  // which may alias them), and gives up at anything unexpected, undoing its memo writes: the generic
  // machine then reads the entry, with its own checks and errors.
  static bool is_flat(Value v) { return v.kind() == Kind::Gone && v.payload() != 0; }

  // Whether the EMPTY_DICT just read opens an item of the streamed list under its batch's MARK with
  // only flat entries before it in the batch (a generic one pending keeps the rest of it generic,
  // so that items are read, and their stacks interned, in order).
  bool flat_entry_here() const {
    if (marks_.empty()) return false;
    size_t m = marks_.back();
    if (m == 0 || !stack_[m - 1].same_object(stream_list_)) return false;
    return stack_.size() == m || is_flat(stack_.back());
  }

  // The end of the ready input once `n` bytes past `p` are ready, or nullptr where the input ends first.
  [[gnu::noinline]] const uint8_t* flat_more(const uint8_t* p, uint64_t n) {
    while (static_cast<uint64_t>(end_ - p) < n) {
      if (!feed_ || end_ == full_end_) return nullptr;
      end_ = begin_ + feed_->wait_beyond(static_cast<size_t>(end_ - begin_));
    }
    return end_;
  }

  // The sink's slot for a key, remembered by the key's identity (keys are memo references).
  int flat_slot(Value key) {
    size_t i = (key.payload() * 0x9e3779b97f4a7c15ull) >> 56;
    for (;; i = (i + 1) % key_slots_.size()) {
      KeySlot& k = key_slots_[i];
      if (k.key.same_object(key)) return k.slot;
      if (k.key.kind() == Kind::None) break;  // empty: keys are str
    }
    int slot = spec_.sink->slot_of(d_.as_str(key, "key"));
    if (slot >= FlatItem::kSlots) slot = -1;
    if (key_slots_used_ < key_slots_.size() / 2) key_slots_[i] = {key, slot}, ++key_slots_used_;
    return slot;
  }

  // Reads the entry whose EMPTY_DICT was just read: EMPTY_DICT [memo] MARK (key value)* SETITEMS, a key
  // a str, a value a scalar or a memo reference [memo], the value of 'frames' also EMPTY_LIST [memo]
  // then MARK refs APPENDS, or ref APPEND, or nothing. False (input position and memo as they were)
  // where the entry is not laid out so.
  bool read_flat_entry() {
    FlatEntry entry(*this);
    if (!entry.read()) {
      entry.undo();
      return false;
    }
    entry.commit();
    return true;
  }

  // One entry's reading by read_flat_entry: the input position, the memo and the entry's frames list are
  // copied into this object, which lives in that one call and whose functions are all inlined into it, so
  // that they stay in registers (the generic machine's members would be reloaded after every store).
  // Each function reads one part of the layout; each returns false where the entry is not laid out so.
  class FlatEntry {
   public:
    explicit FlatEntry(Parser& parser)
        : ps_(parser),
          p_(parser.p_),
          end_(parser.end_),
          memo_count_(parser.memo_count_),
          memo_(parser.memo_.data()),
          memo_size_(parser.memo_.size()),
          memo_capacity_(parser.memo_.capacity()),
          list_(parser.flat_list_.data()) {
      item_.offset = parser.op_at_;
    }

    // EMPTY_DICT [memo] MARK, then the pairs up to SETITEMS.
    FLAT_INLINE bool read() {
      uint8_t op;
      uint64_t key = 0;
      if (!next(op)) return false;
      if (op == 0x94 || op == 'q' || op == 'r') {
        if (!put(op, Value::make(Kind::Gone, 0), key) || !next(op)) return false;  // named again: abandoned
      }
      if (op != '(') return false;
      for (size_t pair = 0;; ++pair) {
        if (pair < kKeyMemory) {
          const Remembered r = remembered_key(pair);
          if (r == Remembered::Read) [[likely]]
            continue;
          if (r == Remembered::NotFlat) return false;
        }
        if (!next(op)) return false;
        if (op == 'u') return finish();
        if (!pair_at(pair, op)) return false;
      }
    }
    // The memo as it was (the generic machine reads the entry again).
    void undo() {
      while (writes_) {
        --writes_;
        ps_.memo_[ps_.flat_undo_[writes_].key] = ps_.flat_undo_[writes_].old;
      }
    }
    // The entry read: the machine goes on after it, the item pending for the sink.
    void commit() {
      ps_.p_ = p_;
      ps_.memo_count_ = memo_count_;
      ps_.flat_pending_.push_back(item_);
      ps_.push(Value::make(Kind::Gone, ps_.flat_pending_.size()));
    }

   private:
    static constexpr size_t kMaxWrites = std::tuple_size_v<decltype(Parser::flat_undo_)>;

    // A pair whose key's bytes are those the key at this position had last time (the same memo
    // reference to the same str): its slot known without reading the key. No: the key is read as usual.
    enum class Remembered { No, Read, NotFlat };
    FLAT_INLINE Remembered remembered_key(size_t pair) {
      const KeyBytes& kb = ps_.key_bytes_[pair];
      if (!kb.size || end_ - p_ < 8) return Remembered::No;
      if (((load_le<uint64_t>(p_) ^ kb.bytes) & kb.mask) != 0 || kb.memo_key >= memo_size_ ||
          !memo_[kb.memo_key].same_object(kb.key))
        return Remembered::No;
      p_ += kb.size;
      Value v;
      uint8_t op;
      return value(op, kb.slot, v) && store(kb.slot, v) ? Remembered::Read : Remembered::NotFlat;
    }
    // A pair read from its key (`op`, its first opcode, just read); its key remembered for next time.
    FLAT_INLINE bool pair_at(size_t pair, uint8_t op) {
      const uint8_t* key_at = p_ - 1;
      Value k, v;
      if (!scalar(op, k) || k.kind() != Kind::Str) return false;
      // Entries repeat their keys in order: the slot the key at this position had last time.
      int slot;
      if (pair < kKeyMemory && ps_.last_keys_[pair].key.same_object(k)) [[likely]] {
        slot = ps_.last_keys_[pair].slot;
      } else {
        slot = ps_.flat_slot(k);
        if (pair < kKeyMemory) ps_.last_keys_[pair] = {k, slot};
      }
      if (pair < kKeyMemory && (op == 'h' || op == 'j')) {
        const auto size = static_cast<uint8_t>(p_ - key_at);  // 2 or 5
        uint64_t bytes = 0;
        std::memcpy(&bytes, key_at, size);
        const uint64_t memo_key = op == 'h' ? key_at[1] : load_le<uint32_t>(key_at + 1);
        ps_.key_bytes_[pair] = {bytes, (uint64_t{1} << (8 * size)) - 1, memo_key, k, slot, size};
      }
      return value(op, slot, v) && store(slot, v);
    }
    // SETITEMS: the frames list interned only now, once the entry is known to be flat (a bail-out leaves
    // no stack behind).
    FLAT_INLINE bool finish() {
      if (have_frames_list_) {
        Value interned = Value::make(Kind::Interned, ps_.spec_.sink->intern_list(ps_.d_, list_, list_size_));
        item_.slots[ps_.frames_slot_] = interned;
        if (frames_memoized_) memo_[frames_key_] = interned;
      }
      return true;
    }

    // A pair's value (its key's slot given): a scalar, or the entry's frames list.
    FLAT_INLINE bool value(uint8_t& op, int slot, Value& v) {
      if (!next(op)) return false;
      if (op == ']') {
        if (slot != ps_.frames_slot_ || slot < 0 || have_frames_list_ || !frames()) return false;
        have_frames_list_ = true;
        return true;
      }
      return scalar(op, v);
    }
    FLAT_INLINE bool store(int slot, Value v) {
      if (slot < 0) return true;
      if (item_.has(slot)) return false;  // a repeated key: generic (there the last one counts)
      item_.present |= 1u << slot;
      item_.slots[slot] = v;
      return true;
    }

    // Picklers memoize a str as they write it, never an int, a constant or a memo reference: a
    // memo write after one of those is left to the generic machine (the next key fails to read).
    FLAT_INLINE bool scalar(uint8_t op, Value& v) {
      switch (op) {
        case 'h':
        case 'j':
          return get(op, v);
        case 'K':
          if (!need(1)) return false;
          v = ps_.make_int(*p_);
          p_ += 1;
          return true;
        case 'M':
          if (!need(2)) return false;
          v = ps_.make_int(load_le<uint16_t>(p_));
          p_ += 2;
          return true;
        case 'J':
          if (!need(4)) return false;
          v = ps_.make_int(load_le<int32_t>(p_));
          p_ += 4;
          return true;
        case 0x8a:
          return long1(v);
        case 0x8c:  // SHORT_BINUNICODE
        case 'X':   // BINUNICODE
          return str(op, v);
        case 'N':
          v = Value::make(Kind::None, 0);
          return true;
        case 0x88:
          v = Value::make(Kind::True, 0);
          return true;
        case 0x89:
          v = Value::make(Kind::False, 0);
          return true;
        default:
          return false;
      }
    }
    // LONG1 of at most 8 bytes: fits in int64.
    FLAT_INLINE bool long1(Value& v) {
      if (!need(1) || *p_ > 8 || !need(1 + *p_)) return false;
      uint8_t n = *p_;
      if (n == 0) {
        v = ps_.make_int(0);
      } else if (end_ - p_ >= 9) {  // a whole word readable: sign-extend its low n bytes
        int shift = 64 - 8 * n;
        v = ps_.make_int(static_cast<int64_t>(load_le<uint64_t>(p_ + 1) << shift) >> shift);
      } else {
        v = ps_.long_bytes(p_ + 1, n);
      }
      p_ += 1 + n;
      return true;
    }
    // SHORT_BINUNICODE (1-byte length) or BINUNICODE (4-byte), and its memo write.
    FLAT_INLINE bool str(uint8_t op, Value& v) {
      const uint64_t width = op == 0x8c ? 1 : 4;
      if (!need(width)) return false;
      const uint64_t n = width == 1 ? *p_ : load_le<uint32_t>(p_);
      if (!need(width + n)) return false;
      v = ps_.make_span(Kind::Str, p_ + width, n);
      p_ += width + n;
      return memo_after(v);
    }

    // The frames list after its EMPTY_LIST; its items go to flat_list_.
    FLAT_INLINE bool frames() {
      if (!need(1)) return true;  // the generic machine reports the end
      if (*p_ == 0x94 || *p_ == 'q' || *p_ == 'r') {
        uint8_t op = *p_++;
        if (!put(op, Value::make(Kind::Gone, 0), frames_key_)) return false;  // named before it is interned
        frames_memoized_ = true;
        if (!need(1)) return true;
      }
      Value v;
      if (*p_ == '(') {
        ++p_;
        for (uint8_t op; next(op);) {
          if (op == 'e') return true;
          if ((op != 'h' && op != 'j') || !get(op, v)) return false;
          add_item(v);
        }
        return false;
      }
      if (*p_ == 'h' || *p_ == 'j') {  // ref APPEND: one item; else the ref is the next key
        const uint8_t* at = p_;
        uint8_t op = *p_++, append = 0;
        if (get(op, v) && next(append) && append == 'a') {
          add_item(v);
          return true;
        }
        p_ = at;
      }
      return true;  // empty
    }
    FLAT_INLINE void add_item(Value v) {
      if (list_size_ == ps_.flat_list_.size()) [[unlikely]] {
        ps_.flat_list_.resize(std::max<size_t>(64, 2 * list_size_));
        list_ = ps_.flat_list_.data();
      }
      list_[list_size_++] = v;
    }

    // Input: `n` more bytes ready, and the next opcode (FRAMEs passed over: the input is all here).
    FLAT_INLINE bool need(uint64_t n) {
      if (static_cast<uint64_t>(end_ - p_) >= n) return true;
      const uint8_t* more = ps_.flat_more(p_, n);
      if (more) end_ = more;
      return more != nullptr;
    }
    FLAT_INLINE bool next(uint8_t& op) {
      for (;;) {
        if (!need(1)) return false;
        op = *p_++;
        if (op != 0x95) [[likely]]
          return true;
        if (!need(8)) return false;
        uint64_t n = load_le<uint64_t>(p_);
        p_ += 8;
        if (!need(n)) return false;
      }
    }

    // The memo: BIN*'s 1-byte key or LONG_BIN*'s 4; a write (MEMOIZE, BINPUT, LONG_BINPUT), undone if the
    // entry is not flat; a value's write, if one follows; a read of a value that is there.
    FLAT_INLINE bool memo_key(bool one_byte, uint64_t& key) {
      if (one_byte) {
        if (!need(1)) return false;
        key = *p_++;
      } else {
        if (!need(4)) return false;
        key = load_le<uint32_t>(p_);
        p_ += 4;
      }
      return true;
    }
    FLAT_INLINE bool put(uint8_t op, Value v, uint64_t& key) {
      if (op == 0x94) {
        key = memo_count_;
      } else if (!memo_key(op == 'q', key)) {
        return false;
      }
      if (key >= memo_capacity_ || writes_ == kMaxWrites) return false;
      // A slot past the memo's end is known empty: not read, for a read of a page never written maps the
      // kernel's zero page and the write after it faults again (a copy and a TLB flush on every CPU).
      Value old = kAbsent;
      if (key >= memo_size_) {
        ps_.memo_.grow_zeroed(key + 1);
        memo_ = ps_.memo_.data();
        memo_size_ = ps_.memo_.size();
      } else {
        old = memo_[key];
      }
      ps_.flat_undo_[writes_++] = {key, old};
      if (old.same_object(kAbsent)) ++memo_count_;
      memo_[key] = v;
      return true;
    }
    FLAT_INLINE bool memo_after(Value v) {
      if (p_ == end_ && !need(1)) return true;
      uint8_t op = *p_;
      if (op != 0x94 && op != 'q' && op != 'r') return true;
      ++p_;
      uint64_t key = 0;
      return put(op, v, key);
    }
    FLAT_INLINE bool get(uint8_t op, Value& v) {
      uint64_t key;
      if (!memo_key(op == 'h', key) || key >= memo_size_) return false;
      v = memo_[key];
      return !v.same_object(kAbsent) && v.kind() != Kind::Gone;
    }

    Parser& ps_;
    const uint8_t* p_;
    const uint8_t* end_;
    uint64_t memo_count_;
    Value* memo_;
    uint64_t memo_size_;
    const uint64_t memo_capacity_;
    Value* list_;  // flat_list_'s size is the room: items are written in place
    size_t list_size_ = 0;
    size_t writes_ = 0;  // memo writes, in flat_undo_
    FlatItem item_;
    bool have_frames_list_ = false;
    bool frames_memoized_ = false;
    uint64_t frames_key_ = 0;
  };

  Value container_from_mark(Kind kind) {
    size_t m = pop_mark();
    Value c = make_container(kind);
    if (kind == Kind::Dict && (stack_.size() - m) % 2) fail_op("odd number of items for a dict");
    append_items(c, m);
    return c;
  }
  Value tuple_of(size_t n) {
    if (stack_.size() < n + (marks_.empty() ? 0 : marks_.back())) fail_op("stack underflow");
    Value t = make_container(Kind::Tuple);
    append_items(t, stack_.size() - n);
    return t;
  }
  Value expect_target(Value v, Kind kind) {
    if (v.kind() != kind)
      fail_op(fmt::format("expects a {} below its items, found a {}", kind_name(kind), kind_name(v.kind())));
    return v;
  }

  Value* memo_slot(uint64_t key) {
    if (key < memo_.size()) return &memo_[key];
    auto it = far_memo_.find(key);
    return it == far_memo_.end() ? nullptr : &it->second;
  }
  void memo_put(uint64_t key) {
    Value v = top();
    if (streaming_ && v.is_container() && d_.transient(v)) transient_memo_keys_.push_back(key);
    if (key < memo_.capacity()) {
      bool fresh = key >= memo_.size();  // known empty: not read (see FlatEntry::put)
      memo_.grow_zeroed(key + 1);
      if (fresh || memo_[key].same_object(kAbsent)) ++memo_count_;
      memo_[key] = v;
      return;
    }
    if (far_memo_.insert_or_assign(key, v).second) ++memo_count_;
  }
  // The common case inline: a dense key naming a stored value.
  [[gnu::always_inline]] void memo_get(uint64_t key) {
    if (key < memo_.size()) [[likely]] {
      Value v = memo_[key];
      if (!v.same_object(kAbsent) && v.kind() != Kind::Gone) [[likely]]
        return push(v);
    }
    memo_get_slow(key);
  }
  [[gnu::noinline]] void memo_get_slow(uint64_t key) {
    Value v;
    if (key < memo_.size() && !memo_[key].same_object(kAbsent)) {
      v = memo_[key];
    } else {
      auto it = far_memo_.find(key);
      if (it == far_memo_.end()) fail_op(fmt::format("memo key {} was never stored", key));
      v = it->second;
    }
    if (v.kind() == Kind::Gone) [[unlikely]]
      throw StreamAbandoned{};  // a consumed entry named again: the complete parse judges it
    push(v);
  }
  uint64_t text_uint(std::string_view s) {
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size()) fail_op("bad decimal operand '" + std::string(s) + "'");
    return v;
  }
  Value text_int(std::string_view s) {
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);  // LONG's old suffix
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc::result_out_of_range) return huge_int();
    if (ec != std::errc() || ptr != s.data() + s.size()) fail_op("bad integer '" + std::string(s) + "'");
    return make_int(v);
  }
  Value huge_int() {
    d_.huge_.push_back(op_at_);
    return Value::make(Kind::HugeInt, d_.huge_.size() - 1);
  }
  // LONG1/LONG4: little-endian two's complement of n bytes.
  [[gnu::always_inline]] Value long_bytes(const uint8_t* b, uint64_t n) {
    if (n == 0) return make_int(0);
    bool negative = b[n - 1] & 0x80;
    uint8_t fill = negative ? 0xff : 0x00;
    uint64_t used = n;
    // Bytes beyond the 8th must be pure sign extension for the value to fit in int64.
    while (used > 8 && b[used - 1] == fill) --used;
    if (used > 8 || (used == 8 && n > 8 && ((b[7] & 0x80) != 0) != negative)) return huge_int();
    uint64_t v = negative ? ~uint64_t{0} : 0;
    std::memcpy(&v, b, std::min<uint64_t>(used, 8));
    if (used < 8 && negative) v |= ~uint64_t{0} << (8 * used);
    return make_int(static_cast<int64_t>(v));
  }
  Value string_op(Kind kind, uint64_t n) { return make_span(kind, take(n), n); }

  // Executes one opcode; true at STOP. The opcodes PyTorch's snapshots are made of are here, inlined
  // into the loop; the others go to step_rare.
  [[gnu::always_inline]] bool step(uint8_t op) {
    op_ = op;
    switch (op) {
      case '(':
        marks_.push_back(stack_.size());
        return false;
      case 'N':
        push(Value::make(Kind::None, 0));
        return false;
      case 0x88:
        push(Value::make(Kind::True, 0));
        return false;
      case 0x89:
        push(Value::make(Kind::False, 0));
        return false;
      case 'J':
        push(make_int(load_le<int32_t>(take(4))));
        return false;
      case 'K':
        push(make_int(*take(1)));
        return false;
      case 'M':
        push(make_int(load_le<uint16_t>(take(2))));
        return false;
      case 0x8a: {  // LONG1
        uint8_t n = *take(1);
        push(long_bytes(take(n), n));
        return false;
      }
      case 0x8c:
        push(string_op(Kind::Str, *take(1)));
        return false;  // SHORT_BINUNICODE
      case 'X':
        push(string_op(Kind::Str, load_le<uint32_t>(take(4))));
        return false;  // BINUNICODE
      case ']':
        push(make_container(Kind::List));
        return false;
      case '}':
        if (flat_ && flat_entry_here() && read_flat_entry()) return false;
        push(make_container(Kind::Dict));
        return false;
      case ')':
        push(make_container(Kind::Tuple));
        return false;
      case 'l':
        push(container_from_mark(Kind::List));
        return false;
      case 'd':
        push(container_from_mark(Kind::Dict));
        return false;
      case 't':
        push(container_from_mark(Kind::Tuple));
        return false;
      case 0x91:
        push(container_from_mark(Kind::Set));
        return false;  // FROZENSET
      case 0x85:
        push(tuple_of(1));
        return false;
      case 0x86:
        push(tuple_of(2));
        return false;
      case 0x87:
        push(tuple_of(3));
        return false;
      case 'a': {  // APPEND
        if (stack_.size() < 2 + (marks_.empty() ? 0 : marks_.back())) fail_op("stack underflow");
        append_items(expect_target(stack_[stack_.size() - 2], Kind::List), stack_.size() - 1);
        return false;
      }
      case 's': {  // SETITEM
        if (stack_.size() < 3 + (marks_.empty() ? 0 : marks_.back())) fail_op("stack underflow");
        append_items(expect_target(stack_[stack_.size() - 3], Kind::Dict), stack_.size() - 2);
        return false;
      }
      case 'e':     // APPENDS
      case 'u':     // SETITEMS
      case 0x90: {  // ADDITEMS
        size_t m = pop_mark();
        if (m == 0 || (!marks_.empty() && m <= marks_.back())) fail_op("no container below the MARK");
        Kind kind = op == 'e' ? Kind::List : op == 'u' ? Kind::Dict : Kind::Set;
        if (kind == Kind::Dict && (stack_.size() - m) % 2) fail_op("odd number of items for a dict");
        append_items(expect_target(stack_[m - 1], kind), m);
        return false;
      }
      case 0x94:
        memo_put(memo_count_);
        return false;  // MEMOIZE
      case 'q':
        memo_put(*take(1));
        return false;  // BINPUT
      case 'r':
        memo_put(load_le<uint32_t>(take(4)));
        return false;  // LONG_BINPUT
      case 'h':
        memo_get(*take(1));
        return false;  // BINGET
      case 'j':
        memo_get(load_le<uint32_t>(take(4)));
        return false;  // LONG_BINGET
      default:
        return step_rare(op);
    }
  }

  // Opcodes a snapshot holds once (PROTO, STOP) or that its pickler does not write: protocol 0's text
  // forms, floats, bytes, 8-byte lengths, sets, the stack's own operations.
  [[gnu::noinline]] bool step_rare(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        uint8_t proto = *take(1);
        if (proto > 5) fail_op(fmt::format("unsupported pickle protocol {}", proto));
        return false;
      }
      case 0x95: {  // FRAME: framing is a hint for buffered readers; the whole input is here
        uint64_t n = load_le<uint64_t>(take(8));
        if (n > static_cast<uint64_t>(end_ - p_) && !ready(n))
          fail_op(fmt::format("pickle is truncated: frame of {} bytes, {} left", n, end_ - p_));
        return false;
      }
      case '.': {  // STOP
        if (stack_.empty()) fail_op("empty stack at STOP");
        d_.root_ = stack_.back();
        if (streaming_ && (d_.root_.kind() >= Kind::Interned || (d_.root_.is_container() && d_.transient(d_.root_))))
          throw StreamAbandoned{};
        return true;
      }
      case '0':  // POP
        if (!marks_.empty() && stack_.size() == marks_.back())
          marks_.pop_back();
        else
          pop();
        return false;
      case '1':
        stack_.resize(pop_mark());
        return false;  // POP_MARK
      case '2':
        push(top());
        return false;  // DUP
      case 0x8b: {     // LONG4
        int32_t n = load_le<int32_t>(take(4));
        if (n < 0) fail_op("negative length");
        push(long_bytes(take(static_cast<uint64_t>(n)), static_cast<uint64_t>(n)));
        return false;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const uint8_t* b = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | b[i];
        double v;
        std::memcpy(&v, &bits, sizeof v);
        push(make_float(v));
        return false;
      }
      case 'I': {  // INT (protocol 0): also spells bools as 00 / 01
        std::string_view s = line();
        if (s == "00")
          push(Value::make(Kind::False, 0));
        else if (s == "01")
          push(Value::make(Kind::True, 0));
        else
          push(text_int(s));
        return false;
      }
      case 'L':
        push(text_int(line()));
        return false;
      case 'F': {
        std::string_view s = line();
        double v = 0;
        auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || ptr != s.data() + s.size()) fail_op("bad float '" + std::string(s) + "'");
        push(make_float(v));
        return false;
      }
      case 0x8d:
        push(string_op(Kind::Str, load_le<uint64_t>(take(8))));
        return false;  // BINUNICODE8
      case 'U':
        push(string_op(Kind::Bytes, *take(1)));
        return false;  // SHORT_BINSTRING
      case 'T': {      // BINSTRING
        int32_t n = load_le<int32_t>(take(4));
        if (n < 0) fail_op("negative length");
        push(string_op(Kind::Bytes, static_cast<uint64_t>(n)));
        return false;
      }
      case 'C':
        push(string_op(Kind::Bytes, *take(1)));
        return false;  // SHORT_BINBYTES
      case 'B':
        push(string_op(Kind::Bytes, load_le<uint32_t>(take(4))));
        return false;  // BINBYTES
      case 0x8e:       // BINBYTES8
      case 0x96:
        push(string_op(Kind::Bytes, load_le<uint64_t>(take(8))));
        return false;  // BYTEARRAY8
      case 0x8f:
        push(make_container(Kind::Set));
        return false;
      case 'p':
        memo_put(text_uint(line()));
        return false;  // PUT
      case 'g':
        memo_get(text_uint(line()));
        return false;  // GET
      default:
        refuse(op);
    }
  }

  // What fraglab does not read: anything that names or calls Python code, and what no data pickle holds.
  [[noreturn]] void refuse(uint8_t op) {
    switch (op) {
      case 'c':
      case 0x93:
        fail_op("references a Python global; fraglab reads pickled data only and never imports or calls anything");
      case 'R':
      case 'b':
      case 'i':
      case 'o':
      case 0x81:
      case 0x92:
        fail_op("would construct or call a Python object; fraglab reads pickled data only and never executes anything");
      case 0x82:
      case 0x83:
      case 0x84:
        fail_op("refers to the copyreg extension registry (a Python global); not data");
      case 'P':
      case 'Q':
      case 0x97:
      case 0x98:
        fail_op("needs the writer's persistent-id or out-of-band buffer machinery; not plain data");
      case 'S':
      case 'V':
        fail_op("protocol-0 quoted strings are not supported (PyTorch writes protocol 2 or later)");
      default:
        fail_op("not a pickle opcode fraglab reads");
    }
  }
};

Document Document::parse(std::string_view bytes, const std::string& name) { return parse(bytes, name, StreamSpec{}); }

Document Document::parse(std::string_view bytes, const std::string& name, StreamSpec spec) {
  return parse(bytes, name, spec, nullptr);
}

Document Document::parse(std::string_view bytes, const std::string& name, StreamSpec spec, InputFeed* feed) {
  Document d;
  d.input_ = bytes;
  d.name_ = name;
  try {
    Parser(d, spec, feed).run();
  } catch (...) {
    if (spec.sink) spec.sink->stream_ended(false);
    throw;
  }
  if (spec.sink) spec.sink->stream_ended(true);
  return d;
}

Document::Span Document::span_of(Value str) const {
  uint64_t p = str.payload();
  if (p & kSideSpanBit) return spans_[p & ~kSideSpanBit];
  return {p >> kInlineLenBits, p & ((uint64_t{1} << kInlineLenBits) - 1)};
}

int64_t Document::as_int_slow(Value v, const char* what) const {
  switch (v.kind()) {
    case Kind::Int:
      return static_cast<int64_t>(v.payload() << 4) >> 4;  // sign-extend 60 bits
    case Kind::WideInt:
      return wide_[v.payload()];
    case Kind::False:
      return 0;
    case Kind::True:
      return 1;
    case Kind::HugeInt:
      fail_at(huge_[v.payload()], fmt::format("{}: integer does not fit in 64 bits", what));
    default:
      throw FormatError::in_file(name_, fmt::format("{} must be an int, not {}", what, kind_name(v.kind())));
  }
}

double Document::as_float(Value v, const char* what) const {
  if (v.kind() == Kind::Float) return floats_[v.payload()];
  return static_cast<double>(as_int(v, what));
}

std::string_view Document::as_str(Value v, const char* what) const {
  if (v.kind() != Kind::Str && v.kind() != Kind::Bytes)
    throw FormatError::in_file(name_, fmt::format("{} must be a str, not {}", what, kind_name(v.kind())));
  Span s = span_of(v);
  return input_.substr(s.offset, s.size);
}

bool Document::as_bool(Value v, const char* what) const { return as_int(v, what) != 0; }

std::string Document::to_text(Value v) const {
  switch (v.kind()) {
    case Kind::None:
      return "None";
    case Kind::False:
      return "False";
    case Kind::True:
      return "True";
    case Kind::Int:
    case Kind::WideInt:
      return std::to_string(as_int(v, "value"));
    case Kind::HugeInt:
      return "<int wider than 64 bits>";
    case Kind::Float: {
      double f = floats_[v.payload()];
      std::string s = fmt::format("{}", f);
      if (std::isfinite(f) && s.find_first_of(".e") == std::string::npos) s += ".0";  // Python's repr
      return s;
    }
    case Kind::Str:
    case Kind::Bytes:
      return std::string(as_str(v, "value"));
    default:
      return std::string("<") + kind_name(v.kind()) + ">";
  }
}

size_t Document::size(Value container) const {
  uint64_t n = 0;
  const Tables& t = tables(container);
  for (uint32_t c = t.containers[index(container)].first; c != kNoChunk; c = t.chunks[c].next) n += t.chunks[c].count;
  return container.kind() == Kind::Dict ? n / 2 : n;
}

uint64_t Document::offset(Value container) const { return tables(container).containers[index(container)].offset; }

const Value* Document::find(Value dict, std::string_view key) const {
  const Value* found = nullptr;
  const Tables& t = tables(dict);
  for (uint32_t c = t.containers[index(dict)].first; c != kNoChunk; c = t.chunks[c].next) {
    const Value* it = t.arena.data() + t.chunks[c].begin;
    for (uint32_t i = 0; i + 1 < t.chunks[c].count; i += 2) {
      if (it[i].kind() != Kind::Str) continue;
      Span s = span_of(it[i]);
      if (s.size == key.size() && std::memcmp(input_.data() + s.offset, key.data(), key.size()) == 0)
        found = &it[i + 1];
    }
  }
  return found;
}

void Document::expect(Value v, Kind kind, const char* what) const {
  if (v.kind() == kind) return;
  std::string msg = fmt::format("{} must be a {}, not {}", what, kind_name(kind), kind_name(v.kind()));
  if (v.is_container()) fail(v, msg);
  throw FormatError::in_file(name_, msg);
}

void Document::fail(Value container, const std::string& what) const { fail_at(offset(container), what); }

void Document::fail_at(uint64_t offset, const std::string& what) const {
  throw FormatError::at_offset(name_, offset, what);
}

}  // namespace fraglab::pickle
