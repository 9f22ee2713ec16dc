// A streaming pickle writer (protocol 4 data opcodes only: the subset pickle_reader.h
// reads), for exporting PyTorch memory snapshots. Containers are opened and closed like
// a SAX writer; items go out as they come in batches of 1000 (APPENDS/SETITEMS), as
// CPython's pickler batches them, so a snapshot of millions of entries is never held
// in memory. Repeated strings (dict keys, action names) and shared objects (a stack's
// frames list) are written once and referenced through the memo afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fraglab {

class AtomicFile;

class PickleWriter {
 public:
  // Writes into `out` (gzip-compressed when `gzip`); call finish() then out.commit().
  PickleWriter(AtomicFile& out, bool gzip);
  ~PickleWriter();

  void none();
  void boolean(bool v);
  void integer(int64_t v);
  void floating(double v);
  void str(std::string_view s);       // written in full every time
  void interned(std::string_view s);  // written once, then a memo reference

  // Opens a container. With `remember` it is memoized and the returned handle lets
  // recall() write further references to this same object (a shared frames list).
  uint32_t begin_list(bool remember = false);
  uint32_t begin_dict(bool remember = false);
  void begin_tuple();
  void end();  // closes the innermost open container
  void recall(uint32_t handle);

  void finish();  // STOP and flush

 private:
  struct Level {
    char kind;  // 'l', 'd', 't'
    uint32_t batch = 0;
  };
  void put(const void* p, size_t n);
  void op(uint8_t c) { put(&c, 1); }
  void item_done();
  uint32_t begin(uint8_t empty_op, char kind, bool remember);
  void flush(bool final);

  AtomicFile& out_;
  bool gzip_;
  std::string buf_;
  std::vector<Level> levels_;
  std::unordered_map<std::string, uint32_t> strings_;
  uint32_t memo_next_ = 0;
  struct Deflate;
  std::unique_ptr<Deflate> deflate_;
};

}  // namespace fraglab
