// The native trace format: round trips, streaming over many blocks, and every structural
// defect reported through the CLI with file and byte offset (exit code 2).
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "import/trace_import.h"
#include "traces/formats/native/native_format.h"
#include "traces/formats/native/native_format_detail.h"
#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/trace_io.h"

namespace fs = std::filesystem;
using namespace fraglab;
namespace nd = fraglab::native_detail;

namespace {

// One scratch folder per test process, removed when the process ends.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("fraglab_native_test_" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

fs::path temp_dir() {
  static ScratchDir dir;
  return dir.path;
}

std::string temp(const std::string& name) { return (temp_dir() / name).string(); }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct CliResult {
  int code;
  std::string out, err;
};

CliResult cli(const std::string& args) {
  std::string out = temp("cli.out"), err = temp("cli.err");
  std::string cmd = std::string(FRAGLAB_CLI) + " " + args + " >" + out + " 2>" + err;
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// A trace that uses every field: several streams, stacks, reference events, addresses that
// go down as well as up, times that step back (deltas are signed).
Trace varied_trace(size_t allocs, uint32_t seed) {
  Trace t;
  t.meta.source = "test";
  t.meta.streams = {0, 0x7f00deadbeefull, 42};
  t.meta.allocator_settings = {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}, {"max_split_size", "-1"}};
  t.meta.stacks = {{}, {{"forward", "model.py", 10}}, {{"backward", "model.py", 20}, {"step", "train.py", 3}}};
  t.meta.dropped_unknown_frees = 5;
  std::mt19937_64 rng(seed);
  IdSlots slots;
  std::vector<AllocId> live;
  int64_t time = 1'000'000;
  for (size_t i = 0; i < allocs; ++i) {
    time += static_cast<int64_t>(rng() % 100) - 10;
    Event a;
    a.kind = EventKind::Alloc;
    a.id = slots.acquire();
    a.size = (rng() % 4 == 0) ? (1ull << (rng() % 40)) : rng() % 100000 + 1;
    a.addr = 0x7f0000000000ull + (rng() % (1ull << 36));
    a.stream = static_cast<StreamIndex>(rng() % 3);
    a.stack = static_cast<StackId>(rng() % 3);
    a.time_us = time;
    t.events.push_back(a);
    live.push_back(a.id);
    if (rng() % 50 == 0) t.events.push_back({EventKind::SegmentAlloc, 0, 0, 2u << 20, a.addr & ~0xfffffull, time, 0});
    while (!live.empty() && rng() % 3 != 0) {
      size_t k = rng() % live.size();
      Event f;
      f.kind = EventKind::FreeRequested;
      f.id = live[k];
      f.time_us = time;
      if (rng() % 2) t.events.push_back(f);
      f.kind = EventKind::Free;
      f.time_us = ++time;
      t.events.push_back(f);
      slots.release(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
    if (rng() % 1000 == 0) t.events.push_back({EventKind::EmptyCache, 0, 0, 0, 0, time, 0});
  }
  t.events.push_back({EventKind::Oom, 1, 0, 1ull << 45, 0, -5, 0});
  return t;
}

void save_native(const Trace& t, const std::string& path, uint32_t block_events) {
  auto w = create_native_writer(path, t.meta, {block_events, 1});
  w->write(t.events.data(), t.events.size());
  w->finish();
}

// Layout facts of a written file, read by this test's own parsing of the documented layout.
struct Layout {
  std::string bytes;
  std::vector<uint64_t> block_offsets;
  uint64_t meta_offset = 0;
};

Layout layout_of(const std::string& path) {
  Layout l{read_file(path), {}, 0};
  auto* p = reinterpret_cast<const uint8_t*>(l.bytes.data());
  l.meta_offset = nd::get_u64(p + l.bytes.size() - 32);
  for (uint64_t at = 32; at < l.meta_offset; at += 24 + nd::get_u32(p + at + 12)) l.block_offsets.push_back(at);
  return l;
}

// Replaces block 0 of a written file by `raw` (compressed here), fixing the meta offset.
std::string with_block0(const std::string& path, const std::vector<uint8_t>& raw, uint32_t count) {
  Layout l = layout_of(path);
  auto* p = reinterpret_cast<const uint8_t*>(l.bytes.data());
  uint64_t old_end = 32 + 24 + nd::get_u32(p + 32 + 12);
  std::string z(ZSTD_compressBound(raw.size()), '\0');
  z.resize(ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 3));
  uint8_t h[24];
  std::memcpy(h, "FLBK", 4);
  nd::put_u32(h + 4, count);
  nd::put_u32(h + 8, static_cast<uint32_t>(raw.size()));
  nd::put_u32(h + 12, static_cast<uint32_t>(z.size()));
  nd::put_u64(h + 16, 0);
  std::string out = l.bytes.substr(0, 32) + std::string(reinterpret_cast<char*>(h), 24) + z + l.bytes.substr(old_end);
  uint8_t m[8];
  nd::put_u64(m, l.meta_offset + (24 + z.size()) - (old_end - 32));
  out.replace(out.size() - 32, 8, reinterpret_cast<char*>(m), 8);
  return out;
}

std::vector<uint8_t> raw_block(const std::vector<Event>& events) {
  std::vector<uint8_t> raw;
  nd::BlockScratch scratch;
  nd::encode_block(events.data(), events.size(), raw, scratch);
  return raw;
}

// A small valid file with one block of `n` allocs (1-byte ids) on stream 0.
std::string small_valid(const std::string& name, size_t n = 20) {
  Trace t;
  for (size_t i = 0; i < n; ++i) t.events.push_back({EventKind::Alloc, 0, static_cast<AllocId>(i), 512, 0, 0, 0});
  std::string path = temp(name);
  save_native(t, path, 1 << 16);
  return path;
}

// Runs `fraglab info` on a broken file: exit 2, and the message names the file, the byte
// offset and what is wrong.
void expect_rejected(const std::string& path, uint64_t offset, const std::string& what) {
  CliResult r = cli("info " + path);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find(path + ": byte offset " + std::to_string(offset) + ":") != std::string::npos);
  CHECK(r.err.find(what) != std::string::npos);
}

}  // namespace

TEST_CASE("native: round trip keeps every field and the meta", "[native]") {
  Trace t = varied_trace(5000, 1);
  std::string path = temp("varied.fltrace");
  save_native(t, path, 1000);
  Trace back = load_trace(path);
  CHECK(back.events == t.events);
  CHECK(back.meta.streams == t.meta.streams);
  CHECK(back.meta.stacks == t.meta.stacks);
  CHECK(back.meta.allocator_settings == t.meta.allocator_settings);
  CHECK(back.meta.dropped_unknown_frees == 5);
  CHECK(back.meta.source == "test");
  CHECK(back.meta.format == "native");
}

TEST_CASE("native: streaming over many blocks, any read size, rewind", "[native]") {
  Trace t = varied_trace(200000, 2);
  std::string path = temp("many.fltrace");
  save_native(t, path, 4096);
  Layout l = layout_of(path);
  REQUIRE(l.block_offsets.size() == (t.events.size() + 4095) / 4096);
  auto src = open_native(path);
  for (size_t chunk : {size_t{1}, size_t{1000}, size_t{4096}, size_t{100000}}) {
    std::vector<Event> got, buf(chunk);
    while (size_t n = src->read(buf.data(), buf.size())) got.insert(got.end(), buf.begin(), buf.begin() + n);
    CHECK(got == t.events);
    REQUIRE(src->rewind());
  }
}

TEST_CASE("native: empty trace", "[native]") {
  Trace t;
  save_native(t, temp("empty.fltrace"), 16);
  CHECK(load_trace(temp("empty.fltrace")).events.empty());
}

TEST_CASE("native: JSON Lines -> native -> JSON Lines is identical (CLI convert)", "[native]") {
  Trace t = varied_trace(3000, 3);
  save_trace(t, temp("orig.jsonl"));
  REQUIRE(cli("convert " + temp("orig.jsonl") + " " + temp("direct.jsonl")).code == 0);
  REQUIRE(cli("convert " + temp("orig.jsonl") + " " + temp("mid.fltrace")).code == 0);
  CliResult r = cli("convert " + temp("mid.fltrace") + " " + temp("back.out") + " --to jsonl");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("jsonl") != std::string::npos);
  CHECK(read_file(temp("back.out")) == read_file(temp("direct.jsonl")));
  CHECK(load_trace(temp("mid.fltrace")).events == load_trace(temp("orig.jsonl")).events);
}

TEST_CASE("native: writer refuses events the reader would reject, leaving no file", "[native]") {
  Trace t;
  t.events.push_back({EventKind::Free, 0, 3, 0, 0, 0, 0});
  std::string path = temp("refused.fltrace");
  CHECK_THROWS_AS(save_native(t, path, 16), std::invalid_argument);
  CHECK_FALSE(fs::exists(path));
  Trace s;
  s.events.push_back({EventKind::Alloc, 2, 0, 1, 0, 0, 0});  // stream 2, one stream in the meta
  CHECK_THROWS_AS(save_native(s, path, 16), std::invalid_argument);
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("native: wrong magic", "[native]") {
  std::string path = small_valid("magic.fltrace");
  std::string b = read_file(path);
  b[0] = 'X';
  write_bytes(path, b);
  expect_rejected(path, 0, "wrong magic");
}

TEST_CASE("native: unsupported version", "[native]") {
  std::string path = small_valid("version.fltrace");
  std::string b = read_file(path);
  b[8] = 9;
  write_bytes(path, b);
  expect_rejected(path, 8, "unsupported native format version 9");
}

TEST_CASE("native: truncated block", "[native]") {
  Trace t = varied_trace(20000, 4);
  std::string path = temp("truncated.fltrace");
  save_native(t, path, 4096);
  Layout l = layout_of(path);
  REQUIRE(l.block_offsets.size() > 3);
  write_bytes(path, l.bytes.substr(0, l.block_offsets[2] + 100));
  expect_rejected(path, l.block_offsets[2], "truncated block 2");
}

TEST_CASE("native: file cut after a whole block", "[native]") {
  Trace t = varied_trace(20000, 4);
  std::string path = temp("cut.fltrace");
  save_native(t, path, 4096);
  Layout l = layout_of(path);
  write_bytes(path, l.bytes.substr(0, l.block_offsets[2]));
  expect_rejected(path, l.block_offsets[2], "without the footer");
}

TEST_CASE("native: a block length past the end of the file", "[native]") {
  std::string path = small_valid("length.fltrace");
  std::string b = read_file(path);
  uint8_t big[4];
  nd::put_u32(big, 0x7fffffff);
  b.replace(32 + 12, 4, reinterpret_cast<char*>(big), 4);
  write_bytes(path, b);
  expect_rejected(path, 32 + 12, "runs past the end");
}

TEST_CASE("native: meta offset past the end of the file", "[native]") {
  std::string path = small_valid("metaoff.fltrace");
  std::string b = read_file(path);
  uint8_t big[8];
  nd::put_u64(big, 1ull << 40);
  b.replace(b.size() - 32, 8, reinterpret_cast<char*>(big), 8);
  write_bytes(path, b);
  expect_rejected(path, b.size() - 32, "past the end of the file");
}

TEST_CASE("native: corrupt compressed bytes are a zstd error", "[native]") {
  std::string path = small_valid("zstd.fltrace", 200);
  std::string b = read_file(path);
  uint32_t csize = nd::get_u32(reinterpret_cast<const uint8_t*>(b.data()) + 32 + 12);
  for (uint32_t i = 4; i < csize; i += 3) b[32 + 24 + i] = static_cast<char>(b[32 + 24 + i] ^ 0x5a);
  write_bytes(path, b);
  expect_rejected(path, 32 + 24, "zstd");
}

TEST_CASE("native: corrupt varint", "[native]") {
  std::string path = small_valid("varint.fltrace");
  std::vector<Event> ev(20, Event{});
  for (size_t i = 0; i < ev.size(); ++i) ev[i].id = static_cast<AllocId>(i), ev[i].size = 512;
  auto raw = raw_block(ev);
  std::fill_n(raw.begin() + nd::kColumnTableBytes + 40, 11, 0xff);  // the id column: 11 continuation bytes
  write_bytes(path, with_block0(path, raw, 20));
  expect_rejected(path, 32, "corrupt varint");
}

TEST_CASE("native: event naming a stream or stack not in the meta", "[native]") {
  std::vector<Event> ev(20, Event{});
  for (size_t i = 0; i < ev.size(); ++i) ev[i].id = static_cast<AllocId>(i), ev[i].size = 512;
  SECTION("stream") {
    std::string path = small_valid("stream.fltrace");
    ev[7].stream = 3;
    write_bytes(path, with_block0(path, raw_block(ev), 20));
    expect_rejected(path, 32, "stream index not in the trace's stream table");
  }
  SECTION("stack") {
    std::string path = small_valid("stack.fltrace");
    ev[7].stack = 1;
    write_bytes(path, with_block0(path, raw_block(ev), 20));
    expect_rejected(path, 32, "stack id not in the trace's stack table");
  }
}

TEST_CASE("native: free of an id that is not live", "[native]") {
  std::string path = small_valid("free.fltrace");
  std::vector<Event> ev(20, Event{});
  for (size_t i = 0; i < ev.size(); ++i) ev[i].id = static_cast<AllocId>(i), ev[i].size = 512;
  ev[19] = {EventKind::Free, 0, 77, 0, 0, 0, 0};
  write_bytes(path, with_block0(path, raw_block(ev), 20));
  expect_rejected(path, 32, "free of an id that is not live");
}

TEST_CASE("native: unknown event kind", "[native]") {
  std::string path = small_valid("kind.fltrace");
  std::vector<Event> ev(20, Event{});
  for (size_t i = 0; i < ev.size(); ++i) ev[i].id = static_cast<AllocId>(i), ev[i].size = 512;
  auto raw = raw_block(ev);
  raw[nd::kColumnTableBytes + 5] = static_cast<uint8_t>((raw[nd::kColumnTableBytes + 5] & 0xf0) | 12);
  write_bytes(path, with_block0(path, raw, 20));
  expect_rejected(path, 32, "unknown kind or flags 12");
}

TEST_CASE("native: a missing file and an empty file", "[native]") {
  CliResult r = cli("info " + temp("nope.fltrace"));
  CHECK(r.code == 2);
  CHECK(r.err.find("nope.fltrace") != std::string::npos);
  write_bytes(temp("zero.fltrace"), "");
  expect_rejected(temp("zero.fltrace"), 0, "wrong magic");
}

TEST_CASE("convert: a failed conversion leaves no output", "[native]") {
  std::string path = small_valid("bad_in.fltrace");
  std::string b = read_file(path);
  b[8] = 2;
  write_bytes(path, b);
  CliResult r = cli("convert " + path + " " + temp("never.jsonl"));
  CHECK(r.code == 2);
  CHECK_FALSE(fs::exists(temp("never.jsonl")));
}

// JSON Lines defects: exit 2 and FILE:LINE.
TEST_CASE("jsonl: malformed lines are rejected with their line number", "[native][jsonl]") {
  const std::string head = "{\"fraglab_trace\": 1}\n{\"op\": \"alloc\", \"id\": 1, \"size\": 100}\n";
  auto reject = [&](const std::string& name, const std::string& bad_line, const std::string& what) {
    std::string path = temp(name);
    write_bytes(path, head + bad_line + "\n{\"op\": \"free\", \"id\": 1}\n");
    CliResult r = cli("info " + path);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(path + ":3: ") != std::string::npos);
    CHECK(r.err.find(what) != std::string::npos);
  };
  reject("unknown_free.jsonl", "{\"op\": \"free\", \"id\": 99}", "free of unknown id 99");
  reject("negative.jsonl", "{\"op\": \"alloc\", \"id\": 2, \"size\": -4096}", "negative");
  reject("absurd.jsonl", "{\"op\": \"alloc\", \"id\": 2, \"size\": 1180591620717411303424}", "size");
  reject("absurd2.jsonl", "{\"op\": \"alloc\", \"id\": 2, \"size\": 18014398509481984}", "absurdly large");
  reject("badjson.jsonl", "{\"op\": \"alloc\", \"id\": 2, \"size\": ", "not valid JSON");
  reject("double.jsonl", "{\"op\": \"alloc\", \"id\": 1, \"size\": 5}", "already live");
  reject("noop.jsonl", "{\"op\": \"realloc\", \"id\": 1}", "unknown op");
}
