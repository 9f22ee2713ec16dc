// The pickle reader and the PyTorch snapshot importer: real corpus files against
// PyTorch's own counters, hand-built pickles for each opcode family, and every kind of
// malformed input through the CLI (exit code 2, file and byte offset in the message).
#include <sys/wait.h>

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>

#include "import/trace_import.h"
#include "tests/every_recording.h"
#include "tests/shell_command.h"
#include "traces/addr_map.h"
#include "traces/formats/pytorch/pickle_reader.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/history_check.h"
#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/io/gzip.h"
#include "traces/populate_pages.h"
#include "traces/trace_stats.h"

using namespace fraglab;
namespace fs = std::filesystem;

namespace {

const std::string kCorpus = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/";

// A minimal pickle writer for test inputs (protocol 4 opcodes, no memo unless asked).
struct P {
  std::string b = "\x80\x04";
  P& op(char c) {
    b += c;
    return *this;
  }
  P& raw(const std::string& s) {
    b += s;
    return *this;
  }
  P& str(const std::string& s) {
    b += '\x8c';
    b += static_cast<char>(s.size());
    b += s;
    return *this;
  }
  P& i64(int64_t v) {  // LONG1 with 8 bytes: any int64
    b += '\x8a';
    b += '\x08';
    for (int i = 0; i < 8; ++i) b += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    return *this;
  }
  P& mark() { return op('('); }
  P& empty_dict() { return op('}'); }
  P& empty_list() { return op(']'); }
  P& setitems() { return op('u'); }
  P& appends() { return op('e'); }
  std::string stop() { return b + '.'; }
};

// {'device_traces': [[{'action': a, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t}, ...]]}, the times
// 100, 101, ... unless given.
std::string snapshot_of(const std::vector<std::tuple<std::string, int64_t, int64_t>>& entries,
                        const std::vector<int64_t>& times = {}) {
  P p;
  p.empty_dict().mark().str("device_traces").empty_list().empty_list().mark();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [action, addr, size] = entries[i];
    p.empty_dict().mark();
    p.str("action").str(action).str("addr").i64(addr).str("size").i64(size).str("stream").i64(0);
    p.str("time_us").i64(i < times.size() ? times[i] : 100 + static_cast<int64_t>(i));
    p.setitems();
  }
  p.appends().op('a');  // inner list into device_traces
  p.setitems();
  return p.stop();
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  fs::path dir = fs::temp_directory_path() / "fraglab_test_snapshot";
  fs::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

using fraglab::test::CliResult;

CliResult run_cli(const std::string& args) {
  return fraglab::test::run_shell(std::string(FRAGLAB_CLI) + " " + args + " 2>&1");
}

// Runs `fraglab info` on the bytes and checks exit code 2 and a message naming the file,
// the byte offset and `expect`.
void expect_rejected(const std::string& file_name, const std::string& bytes, const std::string& expect) {
  std::string path = temp_file(file_name, bytes);
  CliResult r = run_cli("info " + path);
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find(path + ": byte offset ") != std::string::npos);
  CHECK(r.output.find(expect) != std::string::npos);
}

Trace parse(const std::string& bytes) { return parse_pytorch_snapshot(bytes, "test.pickle", with_pytorch_model()); }

}  // namespace

TEST_CASE("pickle reader: scalars, containers, memo identity", "[snapshot]") {
  // [None, True, False, -3 (BININT), 255 (BININT1), 65535 (BININT2), -2**40 (LONG1),
  //  2**63 (LONG1, 9 bytes: wider than int64), 1.5 (BINFLOAT), 'héllo', b'xy', (1, 2), {'k': 7}, memo-shared list
  //  twice]
  std::string b = "\x80\x04]\x94(N\x88\x89J\xfd\xff\xff\xffK\xffM\xff\xff";
  b += std::string("\x8a\x06\x00\x00\x00\x00\x00\xff", 8);               // -2**40
  b += std::string("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00", 11);  // 2**63
  b += std::string("G\x3f\xf8\x00\x00\x00\x00\x00\x00", 9);              // 1.5
  b += "\x8c\x06h\xc3\xa9llo";
  b += "C\x02xy";
  b += "K\x01K\x02\x86";
  b += "}(\x8c\x01kK\x07u";
  b += "]\x94K\x09"
       "a";      // a list [9], memoized as key 1
  b += "h\x01";  // the same list again
  b += "e.";
  auto doc = pickle::Document::parse(b, "mem");
  pickle::Value root = doc.root();
  REQUIRE(root.kind() == pickle::Kind::List);
  std::vector<pickle::Value> items;
  doc.for_each(root, [&](pickle::Value v) { items.push_back(v); });
  REQUIRE(items.size() == 15);
  CHECK(items[0].kind() == pickle::Kind::None);
  CHECK(doc.as_bool(items[1], "t"));
  CHECK_FALSE(doc.as_bool(items[2], "f"));
  CHECK(doc.as_int(items[3], "i") == -3);
  CHECK(doc.as_int(items[4], "i") == 255);
  CHECK(doc.as_int(items[5], "i") == 65535);
  CHECK(doc.as_int(items[6], "i") == -(int64_t{1} << 40));
  CHECK(items[7].kind() == pickle::Kind::HugeInt);
  CHECK_THROWS_AS(doc.as_int(items[7], "i"), FormatError);
  CHECK(doc.as_float(items[8], "f") == 1.5);
  CHECK(doc.as_str(items[9], "s") == "h\xc3\xa9llo");
  CHECK(doc.as_str(items[10], "s") == "xy");
  CHECK(items[11].kind() == pickle::Kind::Tuple);
  CHECK(doc.size(items[11]) == 2);
  REQUIRE(items[12].kind() == pickle::Kind::Dict);
  REQUIRE(doc.find(items[12], "k"));
  CHECK(doc.as_int(*doc.find(items[12], "k"), "k") == 7);
  CHECK(doc.find(items[12], "missing") == nullptr);
  CHECK(items[13].kind() == pickle::Kind::List);
  CHECK(items[13].same_object(items[14]));
}

TEST_CASE("pickle reader: a memo GET yields the same object", "[snapshot]") {
  // [[1], <GET of that list>] -> the two items are one object
  std::string b = std::string(
      "\x80\x04](]\x94K\x01"
      "ah\x00"
      "e.",
      14);
  auto doc = pickle::Document::parse(b, "mem");
  std::vector<pickle::Value> items;
  doc.for_each(doc.root(), [&](pickle::Value v) { items.push_back(v); });
  REQUIRE(items.size() == 2);
  CHECK(items[0].same_object(items[1]));
  CHECK(doc.size(items[0]) == 1);
}

TEST_CASE("pickle reader: rejects code, names opcode and offset", "[snapshot]") {
  auto reject = [](const std::string& bytes, const std::string& what, uint64_t offset) {
    try {
      pickle::Document::parse(bytes, "evil.pickle");
      FAIL("accepted");
    } catch (const FormatError& e) {
      INFO(e.what());
      CHECK(e.position() == offset);
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  reject(
      "\x80\x02"
      "cos\nsystem\n"
      "\x8c\x02id\x85R.",
      "GLOBAL", 2);
  reject("\x80\x04\x8c\x02os\x8c\x06system\x93.", "STACK_GLOBAL", 14);
  reject("\x80\x02N)R.", "REDUCE", 4);
  reject(
      "\x80\x02}N"
      "b.",
      "BUILD", 4);
  reject("\x80\x04\xff.", "unknown opcode 0xff", 2);
  reject("\x80\x04h\x05.", "memo key 5 was never stored", 2);
  reject("\x80\x04]K\x01", "truncated", 5);
  reject("\x80\x04\x8c\x10short.", "truncated", 2);
  reject(
      "\x80\x04K\x01"
      "e.",
      "no MARK", 4);
  reject("\x80\x04(K\x01K\x02u.", "no container below the MARK", 7);
}

TEST_CASE("snapshot import: gpt2_train.default", "[snapshot]") {
  Trace t = read_pytorch_snapshot(kCorpus + "gpt2_train.default.pickle.gz", with_pytorch_model());
  MemorySource source(t);
  TraceStats s = compute_stats(source);
  CHECK(s.by_kind[static_cast<size_t>(EventKind::Alloc)] == 7612);
  CHECK(s.by_kind[static_cast<size_t>(EventKind::Free)] == 7609);
  CHECK(s.by_kind[static_cast<size_t>(EventKind::FreeRequested)] == 7609);
  CHECK(s.by_kind[static_cast<size_t>(EventKind::SegmentAlloc)] == 154);
  CHECK(s.never_freed == 3);
  // Cross-checked with a Python replay of the same entries (alloc adds size,
  // free_completed subtracts): peak 13594206920 bytes after entry 5866.
  CHECK(s.peak_live_requested == 13594206920ull);
  CHECK(s.peak_live_index == 5866);
  CHECK(t.meta.allocator_settings.at("max_split_size") == "-1");
  CHECK(t.meta.allocator_settings.at("expandable_segments") == "False");
  CHECK(t.meta.allocator_settings.at("garbage_collection_threshold") == "0.0");
  CHECK(t.meta.allocator_settings.at("roundup_power2_divisions.1024") == "0");
  CHECK(t.meta.segments.size() == 154);
  uint64_t total = 0;
  for (const auto& seg : t.meta.segments) {
    total += seg.total_size;
    uint64_t blocks = 0;
    for (const auto& b : seg.blocks) blocks += b.size;
    CHECK(blocks == seg.total_size);
  }
  CHECK(total == 15286140928ull);  // reserved_bytes.all.current in stats.jsonl
  // Ids are slots: bounded by the peak number of live blocks.
  AllocId max_id = 0;
  for (const auto& e : t.events) max_id = std::max(max_id, e.id);
  CHECK(max_id < s.peak_live_count);
}

TEST_CASE("snapshot import: stacks are interned", "[snapshot]") {
  Trace t = read_pytorch_snapshot(kCorpus + "gpt2_train.default.stacks.pickle.gz", with_pytorch_model());
  Trace plain = read_pytorch_snapshot(kCorpus + "gpt2_train.default.pickle.gz", with_pytorch_model());
  CHECK(t.meta.stacks.size() > 10);
  CHECK(t.meta.stacks.size() < t.events.size() / 4);  // shared, not one per event
  size_t with_stack = 0;
  for (const auto& e : t.events) with_stack += e.stack != 0;
  CHECK(with_stack > t.events.size() / 2);
  for (size_t i = 1; i < t.meta.stacks.size(); ++i) CHECK_FALSE(t.meta.stacks[i].empty());
  // Same run shape: the frames change nothing else.
  REQUIRE(t.events.size() == plain.events.size());
  CHECK(t.meta.stacks[t.events[0].stack].back().filename == "record_torch_traces.py");
}

TEST_CASE("snapshot import: every corpus file against PyTorch's counters", "[snapshot]") {
  std::ifstream stats(kCorpus + "stats.jsonl");
  std::string line;
  int files = 0;
  while (std::getline(stats, line)) {
    auto j = nlohmann::json::parse(line);
    std::string file = j["file"];
    INFO(file);
    Trace t = read_pytorch_snapshot(kCorpus + file, with_pytorch_model());
    MemorySource source(t);
    TraceStats s = compute_stats(source);
    auto k = [&](EventKind kind) { return s.by_kind[static_cast<size_t>(kind)]; };
    // One event per entry, plus the EmptyCache events the importer infers.
    CHECK(s.events - k(EventKind::EmptyCache) == j["trace_entries"].get<uint64_t>());
    CHECK(k(EventKind::SegmentAlloc) + k(EventKind::SegmentMap) == j["stats"]["num_device_alloc"].get<uint64_t>());
    CHECK(k(EventKind::SegmentFree) + k(EventKind::SegmentUnmap) == j["stats"]["num_device_free"].get<uint64_t>());
    CHECK(s.recorded_peak_reserved == j["stats"]["reserved_bytes.all.peak"].get<uint64_t>());
    if (j["conf"] == "default") CHECK(k(EventKind::SegmentMap) == 0);
    ++files;
  }
  CHECK(files == 12);  // every file but the .stacks variant, which the next test reads
}

TEST_CASE("snapshot import: streams, empty_cache, frees in flight", "[snapshot]") {
  Trace side = read_pytorch_snapshot(kCorpus + "side_stream_prefetch.default.pickle.gz", with_pytorch_model());
  CHECK(side.meta.streams.size() == 2);
  size_t pending = 0;  // free requested at the end, never completed: the block stays live
  std::vector<int> state(1024, 0);
  for (const auto& e : side.events) {
    if (e.kind == EventKind::Alloc) state.at(e.id) = 1;
    if (e.kind == EventKind::FreeRequested) state.at(e.id) = 2;
    if (e.kind == EventKind::Free) state.at(e.id) = 0;
  }
  for (int s : state) pending += s == 2;
  CHECK(pending == 612 - 593);

  // seed_examples runs torch.cuda.empty_cache(): its segment_free is not part of a malloc.
  Trace seed = read_pytorch_snapshot(kCorpus + "seed_examples.default.pickle.gz", with_pytorch_model());
  size_t ec = 0;
  for (size_t i = 0; i < seed.events.size(); ++i) {
    if (seed.events[i].kind != EventKind::EmptyCache) continue;
    ++ec;
    REQUIRE(i + 1 < seed.events.size());
    CHECK(seed.events[i + 1].kind == EventKind::SegmentFree);
  }
  CHECK(ec == 1);
  // The GC + max_split run frees segments inside malloc only: no EmptyCache.
  Trace gc = read_pytorch_snapshot(
      kCorpus + "gpt2_train.garbage_collection_threshold-0.6_max_split_size_mb-256_cap0.25.pickle.gz",
      with_pytorch_model());
  for (const auto& e : gc.events) CHECK(e.kind != EventKind::EmptyCache);
}

TEST_CASE("snapshot import: a block freed twice is a double free, not a block from before recording",
          "[snapshot][hardening]") {
  Trace t = parse(snapshot_of({{"alloc", 8192, 100},
                               {"free_completed", 8192, 100},
                               {"free_completed", 8192, 100},  // again, nothing allocated there between
                               {"free_completed", 4096, 512},  // from before the history
                               {"alloc", 8192, 100},
                               {"free_completed", 8192, 100}}));
  CHECK(t.meta.double_frees == 1);
  CHECK(t.meta.dropped_unknown_frees == 1);
  HistoryProblems h = check_history(t);
  CHECK(h.count == 1);
  CHECK_THAT(h.first, Catch::Contains("1 double free"));
  // The two-thread reading of a trace in memory says what the one-pass reading of its events says.
  MemorySource source(t);
  const CheckedStats one_pass = compute_checked_stats(source);
  const CheckedStats two_threads = compute_checked_stats(t);
  CHECK(two_threads.history.count == one_pass.history.count);
  CHECK(two_threads.history.first == one_pass.history.first);
  CHECK(two_threads.stats.events == one_pass.stats.events);
  CHECK(two_threads.stats.peak_live_requested == one_pass.stats.peak_live_requested);
  CHECK(two_threads.stats.by_kind == one_pass.stats.by_kind);
}

// check_history() remembers the histories it found clean (the pools' model check asks again for each variant
// of a snapshot): a variant with other pools and an inserted release is clean without a second pass, and any
// change to what the check reads is checked again and reported where it is.
TEST_CASE("history check: a clean verdict is remembered, a changed history checked again", "[snapshot]") {
  Trace t = load_trace(kCorpus + "side_stream_prefetch.default.pickle.gz");
  REQUIRE(check_history(t).count == 0);
  Trace variant = t;
  for (Event& e : variant.events) e.pool = 0;
  Event ec;
  ec.kind = EventKind::EmptyCache;
  variant.events.insert(variant.events.begin() + 10, ec);
  CHECK(check_history(variant).count == 0);
  // Two allocations at one address, both live: an overlap, found in the changed trace and again when asked again.
  size_t first = SIZE_MAX, second = 0;  // `second` allocated while `first` is live
  for (size_t i = 0; i < t.events.size() && !second; ++i) {
    const Event& e = t.events[i];
    if (e.kind == EventKind::Alloc && e.addr) {
      if (first == SIZE_MAX)
        first = i;
      else if (t.events[first].addr != e.addr)
        second = i;
    } else if (e.kind == EventKind::Free && first != SIZE_MAX && e.id == t.events[first].id) {
      first = SIZE_MAX;
    }
  }
  REQUIRE(second > first);
  Trace overlapping = t;
  overlapping.events[second].addr = t.events[first].addr;
  for (int round = 0; round < 2; ++round) {
    HistoryProblems h = check_history(overlapping);
    CHECK(h.count >= 1);
    CHECK(h.first_event >= first);
    CHECK_THAT(h.first, Catch::Contains("overlaps") || Catch::Contains("lies in no recorded segment"));
  }
  CHECK(check_history(t).count == 0);
}

// The importer checks the history as it resolves the entries (ReadOptions::check_history_ahead, what `info` asks
// for): check_history() of the trace then finds the clean verdict, which a full walk confirms, and the verdict
// holds for that history only.
TEST_CASE("history check: a history checked as it is read gives its verdict, for that history only", "[snapshot]") {
  // On two cores the fields' worker checks as it resolves (a thread of its own from four cores: tested in
  // test_in_order_worker.cpp, under ThreadSanitizer too).
  set_snapshot_import_cores(2);
  struct Reset {
    ~Reset() { set_snapshot_import_cores(0); }
  } reset;
  size_t ahead = 0, files = 0;
  for (const std::string& dir : {kCorpus, std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/"})
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string f = entry.path().string();
      if (!f.ends_with(".pickle.gz")) continue;
      INFO(f);
      ReadOptions options;
      options.check_history_ahead = true;
      const Trace t = read_pytorch_snapshot(f, options);  // the rules alone: the check does not depend on the model
      ++files;
      if (!last_snapshot_import_checked_ahead()) continue;
      ++ahead;
      CHECK(last_snapshot_import_resolved_ahead());
      CHECK(t.meta.initial.segments.empty());
      HistoryChecker walk(t.meta);
      walk.add(t.events.data(), t.events.size(), 0);
      CHECK(walk.result().count == 0);
      CHECK(check_history(t).count == 0);
    }
  CHECK(files >= 50);
  CHECK(ahead >= 5);
  // Without the option, nothing is checked ahead.
  read_pytorch_snapshot(kCorpus + "gpt2_train.default.pickle.gz", with_pytorch_model());
  CHECK_FALSE(last_snapshot_import_checked_ahead());

  // By hand: a clean history kept, a changed one checked again; problems and state before the history keep nothing.
  Trace t = load_trace(kCorpus + "side_stream_prefetch.default.pickle.gz");
  REQUIRE(t.meta.initial.segments.empty());
  REQUIRE(t.meta.double_frees == 0);
  HistoryCheckAhead clean;
  for (const Event& e : t.events) clean.add(e);
  TraceMeta with_initial = t.meta;
  with_initial.initial.segments.push_back(t.meta.segments.front());
  CHECK_FALSE(clean.remember(with_initial));
  TraceMeta with_double_free = t.meta;
  with_double_free.double_frees = 1;
  CHECK_FALSE(clean.remember(with_double_free));
  CHECK(clean.remember(t.meta));
  size_t alloc = 0, later = 0;  // two allocations at other addresses, the first live at the second
  for (size_t i = 0; i < t.events.size() && !later; ++i)
    if (t.events[i].kind == EventKind::Alloc && t.events[i].addr) {
      if (!alloc)
        alloc = i + 1;
      else if (t.events[i].addr != t.events[alloc - 1].addr)
        later = i;
    } else if (alloc && t.events[i].kind == EventKind::Free && t.events[i].id == t.events[alloc - 1].id) {
      alloc = 0;
    }
  REQUIRE(later);
  Trace overlapping = t;
  overlapping.events[later].addr = t.events[alloc - 1].addr;
  CHECK(check_history(overlapping).count >= 1);
  HistoryCheckAhead problem;
  for (const Event& e : overlapping.events) problem.add(e);
  CHECK_FALSE(problem.remember(overlapping.meta));
  CHECK(check_history(overlapping).count >= 1);
}

TEST_CASE("convert and info say a double free was dropped, naming it a double free", "[snapshot][hardening]") {
  const std::string in = temp_file("double_free.pickle", snapshot_of({{"alloc", 8192, 100},
                                                                      {"free_completed", 8192, 100},
                                                                      {"free_completed", 8192, 100},
                                                                      {"alloc", 8192, 100},
                                                                      {"free_completed", 8192, 100}}));
  const std::string out = (fs::path(in).parent_path() / "double_free.jsonl").string();
  CliResult c = run_cli("convert " + in + " " + out);
  CHECK(c.code == 0);
  CHECK_THAT(c.output, Catch::Contains("1 double free dropped"));
  CHECK_THAT(c.output, !Catch::Contains("no segment"));
  CliResult i = run_cli("info " + in);
  CHECK(i.code == 0);
  CHECK_THAT(i.output, Catch::Contains("double free"));
  fs::remove(in);
  fs::remove(out);
}

TEST_CASE("snapshot import: frees of blocks from before recording are dropped and counted", "[snapshot]") {
  Trace t = parse(snapshot_of({{"free_requested", 4096, 512},
                               {"free_completed", 4096, 512},
                               {"alloc", 8192, 100},
                               {"free_requested", 12288, 512},  // never completed
                               {"free_requested", 8192, 100},
                               {"free_completed", 8192, 100},
                               {"alloc", 8192, 200}}));
  CHECK(t.meta.dropped_unknown_frees == 2);
  REQUIRE(t.events.size() == 4);
  CHECK(t.events[0].kind == EventKind::Alloc);
  CHECK(t.events[1].kind == EventKind::FreeRequested);
  CHECK(t.events[2].kind == EventKind::Free);
  CHECK(t.events[3].kind == EventKind::Alloc);
  CHECK(t.events[3].id == 0);  // the slot was released and reused
  CHECK(t.events[3].size == 200);
  CHECK(t.events[0].time_us == 102);
}

TEST_CASE("snapshot import: oom entries carry device_free instead of addr", "[snapshot]") {
  P p;
  p.empty_dict().mark().str("device_traces").empty_list().empty_list().empty_dict().mark();
  p.str("action").str("oom").str("device_free").i64(1 << 20).str("size").i64(3 << 20).str("stream").i64(0);
  p.setitems().op('a').op('a').setitems();
  Trace t = parse(p.stop());
  REQUIRE(t.events.size() == 1);
  CHECK(t.events[0].kind == EventKind::Oom);
  CHECK(t.events[0].size == 3u << 20);
  CHECK(t.events[0].addr == 1u << 20);
}

TEST_CASE("snapshot import: a snapshot of two GPUs with data lists both, whichever is read", "[snapshot]") {
  // Device 0: two allocations; device 1: one.
  P p;
  p.empty_dict().mark().str("device_traces").empty_list().mark();
  p.empty_list().mark();
  for (int i = 0; i < 2; ++i)
    p.empty_dict().mark().str("action").str("alloc").str("addr").i64(512 + 64 * i).str("size").i64(8).setitems();
  p.appends();
  p.empty_list().empty_dict().mark().str("action").str("alloc").str("addr").i64(512).str("size").i64(8);
  p.setitems().op('a').appends().setitems();
  const std::string bytes = p.stop();
  const std::vector<std::pair<int, std::string>> both{{0, "2 entries"}, {1, "1 entries"}};
  for (int device : {0, 1}) {
    CAPTURE(device);
    Trace t = parse_pytorch_snapshot(bytes, "two", with_pytorch_model({device}));
    CHECK(t.meta.device == device);
    CHECK(t.meta.devices_with_data == both);
  }
  // One GPU's data (the other list empty): nothing to offer.
  P one;
  one.empty_dict().mark().str("device_traces").empty_list().mark().empty_list();
  one.empty_list().empty_dict().mark().str("action").str("alloc").str("addr").i64(512).str("size").i64(8);
  one.setitems().op('a').appends().setitems();
  CHECK(parse_pytorch_snapshot(one.stop(), "one", with_pytorch_model({1})).meta.devices_with_data.empty());
  // A real one: one process on two H100s (a model split across them), read for either GPU, streamed or not.
  const std::string two = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/two_devices.default.pickle.gz";
  const std::vector<std::pair<int, std::string>> real{{0, "280 entries"}, {1, "694 entries"}};
  CHECK(load_trace(two, {0}).meta.devices_with_data == real);
  CHECK(load_trace(two, {1}).meta.devices_with_data == real);
  CHECK(drain(*open_trace(two, {1})).meta.devices_with_data == real);
}

TEST_CASE("snapshot import: device selection", "[snapshot]") {
  // Two devices: device 1 has one alloc.
  P p;
  p.empty_dict().mark().str("device_traces").empty_list().mark().empty_list();
  p.empty_list().empty_dict().mark().str("action").str("alloc").str("addr").i64(512).str("size").i64(8);
  p.setitems().op('a').appends().setitems();
  std::string bytes = p.stop();
  CHECK(parse_pytorch_snapshot(bytes, "two", with_pytorch_model({1})).events.size() == 1);
  // Device 0 holds nothing while device 1 does (a DDP rank's snapshot): refused, naming device 1.
  try {
    parse_pytorch_snapshot(bytes, "two", with_pytorch_model({0}));
    FAIL("accepted");
  } catch (const FormatError& e) {
    CHECK(std::string(e.what()).find("device 0 has no history and no segments in this snapshot; devices with data: "
                                     "1 (1 entries)") != std::string::npos);
  }
  try {
    parse_pytorch_snapshot(bytes, "two", with_pytorch_model({2}));
    FAIL("accepted");
  } catch (const FormatError& e) {
    CHECK(std::string(e.what()).find("no data for device 2; devices with data: 1 (1 entries)") != std::string::npos);
  }
  // No device named: the one with data.
  Trace any = parse_pytorch_snapshot(bytes, "two", with_pytorch_model({kAnyDevice}));
  CHECK(any.events.size() == 1);
  CHECK(any.meta.device == 1);
  // Device 0 holds only the `snapshot` marker _snapshot() leaves (a public snapshot of a process that used
  // GPU 1): no data there; the listing names device 1 alone, and no device named reads device 1.
  P marked;
  marked.empty_dict().mark().str("device_traces").empty_list().mark();
  marked.empty_list().empty_dict().mark().str("action").str("snapshot").str("addr").i64(0).str("size").i64(0);
  marked.setitems().op('a');
  marked.empty_list().empty_dict().mark().str("action").str("alloc").str("addr").i64(512).str("size").i64(8);
  marked.setitems().op('a').appends().setitems();
  const std::string marked_bytes = marked.stop();
  try {
    parse_pytorch_snapshot(marked_bytes, "marked", with_pytorch_model({0}));
    FAIL("accepted");
  } catch (const FormatError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find("devices with data: 1 (1 entries) (pick") != std::string::npos);
  }
  Trace marked_any = parse_pytorch_snapshot(marked_bytes, "marked", with_pytorch_model({kAnyDevice}));
  CHECK(marked_any.meta.device == 1);
  CHECK(marked_any.events.size() == 1);
  // Nothing on any device: an empty trace, as before.
  P empty;
  empty.empty_dict().mark().str("device_traces").empty_list().mark().empty_list().empty_list().appends().setitems();
  const std::string nothing = empty.stop();
  CHECK(parse_pytorch_snapshot(nothing, "none", with_pytorch_model({0})).events.empty());
  CHECK(parse_pytorch_snapshot(nothing, "none", with_pytorch_model({kAnyDevice})).events.empty());
}

namespace {

// Both readings of the same bytes: the streaming one (what read_pytorch_snapshot does) and the
// complete one. Their traces, or their errors, must be equal.
struct BothReadings {
  std::optional<Trace> streaming, complete;
  std::string streaming_error, complete_error;
  bool streamed = false;
  uint64_t flat_entries = 0;
  bool ahead = false;  // ids given as the entries were read (last_snapshot_import_resolved_ahead)
};

BothReadings read_both(const std::string& bytes, const std::string& name, const ReadOptions& options = {}) {
  BothReadings r;
  try {
    r.streaming = parse_pytorch_snapshot(bytes, name, with_pytorch_model(options));
    r.streamed = last_snapshot_import_streamed();
    r.flat_entries = last_snapshot_import_flat_entries();
    r.ahead = last_snapshot_import_resolved_ahead();
  } catch (const FormatError& e) {
    r.streaming_error = e.what();
  }
  try {
    r.complete = parse_pytorch_snapshot_complete(bytes, name, with_pytorch_model(options));
  } catch (const FormatError& e) {
    r.complete_error = e.what();
  }
  return r;
}

// device_traces[0] = [alloc a (frames F, memoized), free_requested a, free_completed a], each entry in its
// own APPENDS batch, the frees naming F through the memo: F is interned between batches.
std::string shared_frames_snapshot(bool repeat_entry) {
  P p;
  p.empty_dict().mark().str("device_traces").empty_list().empty_list();
  p.mark().empty_dict().op('\x94').mark();  // memo 0: the alloc entry
  p.str("action").str("alloc").str("addr").i64(4096).str("size").i64(512).str("stream").i64(0);
  p.str("frames").empty_list().op('\x94').mark();  // memo 1: its frames
  p.empty_dict().mark().str("name").str("f").str("filename").str("a.py").str("line").i64(3).setitems();
  p.appends().setitems().appends();
  for (const char* action : {"free_requested", "free_completed"}) {
    p.mark().empty_dict().mark();
    p.str("action").str(action).str("addr").i64(4096).str("size").i64(512).str("stream").i64(0);
    p.str("frames").raw(std::string("h\x01", 2)).setitems().appends();
  }
  if (repeat_entry) p.mark().raw(std::string("h\x00", 2)).appends();  // the alloc entry again
  p.op('a').setitems();
  return p.stop();
}

}  // namespace

TEST_CASE("snapshot import: the streaming reading equals the complete one on every recording", "[snapshot]") {
  const auto files =
      test::every_recording({kCorpus, std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/"}, ".pickle.gz");
  REQUIRE(files.size() >= test::at_least(40));
  size_t streamed = 0, ahead = 0;
  for (const fs::path& path : files) {
    const std::string f = path.string();
    INFO(f);
    std::string bytes = gunzip(read_file(f), f);
    BothReadings r = read_both(bytes, f);
    REQUIRE(r.streaming);
    REQUIRE(r.complete);
    CHECK(*r.streaming == *r.complete);
    // Ids given ahead only where nothing was live at the first entry (a recording from the program's start).
    if (r.ahead) CHECK(r.complete->meta.initial.live_blocks == 0);
    ahead += r.ahead;
    // Every recording with a history streams it (the others have nothing to stream).
    CHECK(r.streamed == !r.complete->meta.history_absent);
    streamed += r.streamed;
    // The parser's fast path reads nearly all of them (new frame dicts keep a batch generic). With C++
    // frames (stacks="all") most batches bring frame dicts not seen before: the generic path reads
    // those (836 of 1,853 entries fast in side_stream_prefetch's .stacksall), as do the first few thousand
    // entries of a run whose code is large (Lightning's loops: a run stopped by its OOM after 1,600 events
    // read 260 fast; the whole run, 195,000 entries, reads nearly all fast).
    const size_t warmed_up = f.find("lightning_lm.") == std::string::npos ? 1000 : 10000;
    if (r.streamed && r.complete->events.size() > warmed_up && f.find(".stacksall") == std::string::npos)
      CHECK(r.flat_entries >= r.complete->events.size() / 2);
  }
  CHECK(streamed >= test::at_least(30));
  if (std::thread::hardware_concurrency() > 1) CHECK(ahead >= test::at_least(10));  // the worker is there to give them
}

namespace {

// PyTorch's entry layouts and a few others, in four APPENDS batches: the first generic (new frame
// dicts), the second and fourth read by the parser's fast path, the third generic from a repeated key.
std::string flat_layouts_snapshot(size_t& flat_entries) {
  P p;
  auto put = [&](int k) { p.op('q').op(static_cast<char>(k)); };
  auto get = [&](int k) { p.op('h').op(static_cast<char>(k)); };
  auto frame = [&](int k, const char* name, int line) {
    p.empty_dict();
    put(k);
    p.mark().str("name").str(name).str("filename").str("a.py").str("line").i64(line).setitems();
  };
  // action, addr, size, stream (keys 'action' and 'size' through the memo once they are there)
  auto head = [&](const char* action, int64_t addr, int64_t size) {
    p.empty_dict().mark();
    get(20);
    p.str(action).str("addr").i64(addr);
    get(21);
    p.op('K').op(static_cast<char>(size / 256)).str("stream").op('K').op('\0');
  };
  p.empty_dict().mark().str("device_traces").empty_list().empty_list();
  p.mark().empty_dict().mark().str("action");
  put(20);
  p.str("alloc").str("addr").i64(4096).str("size");
  put(21);
  p.i64(512).str("frames").empty_list();
  put(1);
  p.mark();
  frame(10, "f", 1);
  frame(11, "g", 2);
  p.appends().setitems();
  head("alloc", 8192, 1024);
  p.str("frames").empty_list();
  put(2);
  p.mark();
  get(10);
  get(11);
  p.appends().setitems().appends();

  p.mark();
  head("alloc", 12288, 512);
  p.str("frames").empty_list();
  put(3);
  p.mark();
  get(11);
  get(10);
  p.appends().setitems();
  head("free_requested", 4096, 512);
  p.str("frames");
  get(1);  // a frames list of the first batch
  p.setitems();
  head("free_requested", 12288, 512);
  p.str("frames");
  get(3);  // this batch's
  p.setitems();
  head("alloc", 16384, 256);
  p.str("frames").empty_list();
  put(4);
  get(10);
  p.op('a').str("time_us").i64(7).setitems();  // one frame: ref APPEND, then another key
  p.empty_dict().mark().str("frames").empty_list();
  put(5);
  get(20);  // an empty frames list, then the next key through the memo
  p.str("alloc").str("addr").i64(20480).raw(std::string("\x95\0\0\0\0\0\0\0\0", 9));  // FRAME between pairs
  get(21);
  p.op('M').op('\0').op('\x02').str("user_metadata").str("x").str("compile_context").op('N');
  p.str("is_expandable").op('\x88').setitems();
  p.appends();
  flat_entries = 5;

  p.mark();
  head("alloc", 24576, 512);
  get(21);
  p.i64(768).setitems();  // 'size' twice: the last counts
  head("free_completed", 4096, 512);
  p.setitems().appends();

  p.mark();
  head("free_completed", 12288, 512);
  p.setitems().empty_dict().mark();
  get(20);
  p.str("oom").str("device_free").i64(1 << 20);
  get(21);
  p.i64(3 << 20).setitems();
  p.appends();
  flat_entries += 2;
  p.op('a').setitems();
  return p.stop();
}

}  // namespace

TEST_CASE("snapshot import: the fast path reads entries as the generic machine does", "[snapshot]") {
  size_t flat = 0;
  std::string bytes = flat_layouts_snapshot(flat);
  BothReadings r = read_both(bytes, "layouts.pickle");
  INFO(r.streaming_error << r.complete_error);
  REQUIRE(r.streaming);
  REQUIRE(r.complete);
  CHECK(r.streamed);
  CHECK(r.flat_entries == flat);
  CHECK(*r.streaming == *r.complete);
  REQUIRE(r.complete->events.size() == 11);
  CHECK(r.complete->meta.stacks.size() == 3 + 1);  // f g, g f, f (and StackId 0: none)
  for (const Event& e : r.complete->events)
    if (e.kind == EventKind::Alloc && e.addr == 24576) CHECK(e.size == 768);
  // Every cut of it: the same trace or the same error either way.
  for (size_t cut = 1; cut < bytes.size(); cut += 7) {
    BothReadings c = read_both(bytes.substr(0, cut), "cut.pickle");
    CHECK(c.streaming_error == c.complete_error);
  }
}

// The fast path knows a key by the bytes of the memo reference that gave it at the same position of the
// entry before (BINGET 21: 'size'). A memo slot rewritten since then names another key: read as that key
// (here the third entry then has no 'size': the complete reading's error), never as the remembered one.
TEST_CASE("snapshot import: a key's memo slot rewritten between entries is read as the generic machine does",
          "[snapshot]") {
  for (bool rewrite : {false, true}) {
    INFO("rewrite " << rewrite);
    P p;
    auto put = [&](int k) { p.op('q').op(static_cast<char>(k)); };
    auto get = [&](int k) { p.op('h').op(static_cast<char>(k)); };
    p.empty_dict().mark().str("device_traces").empty_list().empty_list();
    p.mark().empty_dict().mark().str("action");
    put(20);
    p.str("alloc").str("addr");
    put(22);
    p.i64(4096).str("size");
    put(21);
    p.i64(512).setitems();
    for (int64_t addr : {8192, 12288}) {  // keys through the memo: the third entry's known by their bytes
      p.empty_dict().mark();
      get(20);
      p.str("alloc");
      get(22);
      p.i64(addr);
      get(21);
      p.i64(1024).str("user_metadata").str("time_us");
      if (rewrite && addr == 8192) put(21);  // memo 21: 'time_us' from here on
      p.setitems();
    }
    p.appends().op('a').setitems();
    BothReadings r = read_both(p.stop(), "rewritten.pickle");
    CHECK(r.streaming_error == r.complete_error);
    if (!rewrite) {
      REQUIRE(r.streaming);
      CHECK(r.flat_entries == 3);
      CHECK(*r.streaming == *r.complete);
      REQUIRE(r.streaming->events.size() == 3);
      CHECK(r.streaming->events[2].size == 1024);
    } else {
      CHECK_FALSE(r.streaming);
      CHECK(r.complete_error.find("no 'size'") != std::string::npos);
    }
  }
}

TEST_CASE("snapshot import: streaming off PyTorch's layout falls back to the complete reading", "[snapshot]") {
  SECTION("a frames list named through the memo after its entry was consumed") {
    BothReadings r = read_both(shared_frames_snapshot(false), "shared.pickle");
    REQUIRE(r.streaming);
    CHECK(r.streamed);
    CHECK(*r.streaming == *r.complete);
    REQUIRE(r.streaming->events.size() == 3);
    for (const Event& e : r.streaming->events) CHECK(e.stack == r.streaming->events[0].stack);
    CHECK(r.streaming->events[0].stack != 0);
  }
  SECTION("a consumed entry named again through the memo: the complete reading's error") {
    BothReadings r = read_both(shared_frames_snapshot(true), "repeat.pickle");
    CHECK_FALSE(r.streaming);
    CHECK(r.streaming_error == r.complete_error);
    CHECK(r.streaming_error.find("the same object as an earlier one") != std::string::npos);
  }
  SECTION("an error in an entry: the same message and offset") {
    std::string bytes = snapshot_of({{"alloc", 4096, 512}, {"bogus", 4096, 512}});
    BothReadings r = read_both(bytes, "bad.pickle");
    CHECK_FALSE(r.streaming);
    CHECK_FALSE(r.complete_error.empty());
    CHECK(r.streaming_error == r.complete_error);
  }
  SECTION("a device the recording has no trace for, and truncations of a real recording") {
    std::string bytes = gunzip(read_file(kCorpus + "gpt2_train.default.stacks.pickle.gz"), "x");
    for (size_t cut : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 2}) {
      BothReadings r = read_both(bytes.substr(0, cut), "cut.pickle");
      CHECK_FALSE(r.streaming);
      CHECK(r.streaming_error == r.complete_error);
    }
    ReadOptions one;
    one.device = 1;
    BothReadings r = read_both(bytes, "x.pickle", one);
    CHECK(r.streaming_error == r.complete_error);
    CHECK(r.streaming_error.find("no data for device 1") != std::string::npos);
  }
}

TEST_CASE("snapshot import: entries read on the other core give the complete reading's trace and errors",
          "[snapshot]") {
  // Enough entries for the importer's worker (batches of 2048) to read most of them while the parse goes on.
  auto entries = [](size_t pairs) {
    std::vector<std::tuple<std::string, int64_t, int64_t>> e;
    for (size_t i = 0; i < pairs; ++i) {
      const auto addr = static_cast<int64_t>(0x7f0000000000 + 4096 * (i % 64));
      e.emplace_back("alloc", addr, 512 + static_cast<int64_t>(i % 7));
      e.emplace_back("free_completed", addr, 512 + static_cast<int64_t>(i % 7));
    }
    return e;
  };
  SECTION("an entry with a value the worker may not read (a wide int) is read in its place") {
    auto e = entries(6000);
    e.insert(e.begin() + 5001, {{"alloc", int64_t{1} << 61, 4096}, {"free_completed", int64_t{1} << 61, 4096}});
    BothReadings r = read_both(snapshot_of(e), "wide.pickle");
    REQUIRE(r.streaming);
    CHECK(r.streamed);
    CHECK(r.flat_entries == e.size());
    CHECK(*r.streaming == *r.complete);
    CHECK(r.streaming->events.size() == e.size());
    CHECK(r.streaming->events[5001].addr == uint64_t{1} << 61);
  }
  SECTION("an error the worker finds: the complete reading's message and offset") {
    for (size_t bad : {size_t{4500}, size_t{9001}}) {
      auto e = entries(6000);
      std::get<0>(e[bad]) = "bogus";
      BothReadings r = read_both(snapshot_of(e), "bad.pickle");
      CHECK_FALSE(r.streaming);
      CHECK(r.complete_error.find("unknown trace action 'bogus'") != std::string::npos);
      CHECK(r.streaming_error == r.complete_error);
      e = entries(6000);
      std::get<2>(e[bad]) = -5;
      r = read_both(snapshot_of(e), "negative.pickle");
      CHECK(r.complete_error.find("'size' is negative (-5)") != std::string::npos);
      CHECK(r.streaming_error == r.complete_error);
    }
  }
}

TEST_CASE("snapshot import: ids given as the entries are read equal those given after, or give way to them",
          "[snapshot]") {
  if (std::thread::hardware_concurrency() < 2) {
    WARN("one core: no worker reads the entries, so none are given ahead");
    return;
  }
  auto pairs = [](size_t n) {
    std::vector<std::tuple<std::string, int64_t, int64_t>> e;
    for (size_t i = 0; i < n; ++i) {
      const auto addr = static_cast<int64_t>(0x7f0000000000 + 4096 * (i % 50));
      e.emplace_back("alloc", addr, 256);
      e.emplace_back("free_requested", addr, 256);
      e.emplace_back("free_completed", addr, 256);
    }
    return e;
  };
  auto check = [](const std::vector<std::tuple<std::string, int64_t, int64_t>>& e, bool ahead,
                  const std::vector<int64_t>& times = {}) {
    BothReadings r = read_both(snapshot_of(e, times), "ahead.pickle");
    REQUIRE(r.streaming);
    REQUIRE(r.complete);
    CHECK(r.flat_entries == e.size());
    CHECK(*r.streaming == *r.complete);
    CHECK(r.ahead == ahead);
    return *r.complete;
  };
  SECTION("a recording from the start: given ahead") { check(pairs(3000), true); }
  SECTION("a free requested twice and a double free: entries that make no event, given ahead") {
    auto e = pairs(3000);
    e.insert(e.begin() + 4001, {"free_requested", std::get<1>(e[4000]), 256});
    e.insert(e.begin() + 6003, {"free_completed", std::get<1>(e[6002]), 256});
    Trace t = check(e, true);
    CHECK(t.meta.double_frees == 1);
    CHECK(t.events.size() == e.size() - 2);
  }
  SECTION("a free of an address the history never allocated: resolved after") {
    auto e = pairs(3000);
    e.insert(e.begin() + 5000, {"free_completed", 0x10000, 256});
    Trace t = check(e, false);
    CHECK(t.meta.dropped_unknown_frees == 1);
  }
  SECTION("entries from before a shrunk ring (times going back): resolved after") {
    auto e = pairs(3000);
    std::vector<int64_t> times;
    for (size_t i = 0; i < e.size(); ++i) times.push_back(static_cast<int64_t>(i < 4500 ? 1000 + i : i));
    Trace t = check(e, false, times);
    CHECK(t.meta.dropped_stale_entries > 0);
  }
  SECTION("free_completed skipped (addresses reused after free_requested): resolved after") {
    auto e = pairs(3000);
    std::erase_if(e, [](const auto& x) { return std::get<0>(x) == "free_completed"; });
    Trace t = check(e, false);
    REQUIRE(t.meta.skipped_actions.size() == 1);
    CHECK(t.meta.skipped_actions[0].action == "free_completed");
  }
}

namespace {

// gzip -6 of `raw`, through zlib (one member, trailer with CRC and size).
std::string gzip_of(const std::string& raw) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, raw.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string read_error(const std::string& path) {
  try {
    read_pytorch_snapshot(path, with_pytorch_model());
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("snapshot import: parsing while inflating equals inflating first", "[snapshot]") {
  for (const char* name : {"gpt2_train.default.stacks.pickle.gz", "bert_varlen_train.default.pickle.gz",
                           "side_stream_prefetch.expandable.pickle.gz"}) {
    INFO(name);
    std::string path = kCorpus + name;
    std::string raw = gunzip(read_file(path), path);
    CHECK(read_pytorch_snapshot(path, with_pytorch_model()) == parse_pytorch_snapshot(raw, path, with_pytorch_model()));
  }
  SECTION("the bytes come out in order, all of them, and the end is checked") {
    std::string raw = gunzip(read_file(kCorpus + "seed_examples.default.pickle.gz"), "seed");
    std::string gz = gzip_of(raw);
    auto in = InflatingBytes::start(gz);
    REQUIRE(in);
    REQUIRE(in->bytes().size() == raw.size());
    size_t ready = 0;
    while (ready < raw.size()) {
      size_t now = in->wait_beyond(ready);
      REQUIRE(now > ready);
      CHECK(in->bytes().substr(ready, now - ready) == std::string_view(raw).substr(ready, now - ready));
      ready = now;
    }
    CHECK_NOTHROW(in->finish());
    std::string bad = gz;
    bad[bad.size() - 6] ^= 0x5a;  // the CRC
    auto damaged = InflatingBytes::start(bad);
    REQUIRE(damaged);
    CHECK_THROWS_AS(damaged->finish(), InflateAbandoned);
    CHECK_FALSE(InflatingBytes::start(gz.substr(0, 10)));  // no trailer to size it by
  }
  SECTION("files as Python's gzip writes them (a name in the header), and an end on a step's boundary") {
    std::string python = read_file(kCorpus + "gpt2_train.default.pickle.gz");
    std::string exact(size_t{2} << 20, 'x');  // the stream ends as the second MiB step fills
    for (size_t i = 0; i < exact.size(); i += 4096) exact[i] = static_cast<char>(i >> 12);
    for (const std::string& gz : {python, gzip_of(exact)}) {
      auto in = InflatingBytes::start(gz);
      REQUIRE(in);
      CHECK_NOTHROW(in->finish());  // read by the streaming inflater to the end, not given up
      CHECK(in->bytes() == gunzip(gz, "python"));
    }
  }
}

TEST_CASE("snapshot import: a damaged gzip file is reported as when inflated first", "[snapshot]") {
  std::string raw = gunzip(read_file(kCorpus + "seed_examples.default.pickle.gz"), "seed");
  std::string gz = gzip_of(raw);
  auto with = [&](std::string bytes, size_t at, char x) {
    bytes[at] = static_cast<char>(bytes[at] ^ x);
    return bytes;
  };
  std::string bad_op = std::string("\x80\x02N)R.", 6) + raw;  // REDUCE at byte 4, then a megabyte more
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;  // "" : reads as the plain file does
  };
  std::vector<Case> cases = {
      {"crc.pickle.gz", with(gz, gz.size() - 6, 0x5a), "gzip: incorrect data check"},
      {"length.pickle.gz", with(gz, gz.size() - 2, 0x01), "gzip: incorrect length check"},
      {"half.pickle.gz", gz.substr(0, gz.size() / 2), "gzip data is truncated"},
      {"garbage.pickle.gz", gz + "garbage!", "trailing garbage after gzip data"},
      // The pickle's own error comes first, but inflating first finds the damage at the end first.
      {"reduce_crc.pickle.gz", with(gzip_of(bad_op), gzip_of(bad_op).size() - 6, 0x5a), "gzip: incorrect data check"},
      {"reduce.pickle.gz", gzip_of(bad_op), "REDUCE"},
      {"members.pickle.gz", gzip_of(raw.substr(0, raw.size() / 3)) + gzip_of(raw.substr(raw.size() / 3)), ""},
  };
  Trace plain = parse_pytorch_snapshot(raw, "seed", with_pytorch_model());
  for (const Case& c : cases) {
    INFO(c.name);
    std::string path = temp_file(c.name, c.bytes);
    std::string error = read_error(path);
    if (*c.expect == '\0') {
      CHECK(error.empty());
      CHECK(read_pytorch_snapshot(path, with_pytorch_model()).events == plain.events);
    } else {
      CHECK(error.find(c.expect) != std::string::npos);
      CHECK(error.find(path + ": byte offset ") != std::string::npos);
    }
  }
}

TEST_CASE("snapshot import: a deferred pool check gives the checked trace once the model agrees", "[snapshot]") {
  size_t pending = 0, checked_at_once = 0;
  for (const fs::path& path :
       test::every_recording({kCorpus, std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/"}, ".pickle.gz")) {
    const std::string f = path.string();
    INFO(f);
    ReadOptions defer;
    defer.defer_pool_check = true;
    Trace deferred = read_pytorch_snapshot(f, with_pytorch_model(defer));
    Trace checked = read_pytorch_snapshot(f, with_pytorch_model());
    if (!pool_check_pending(deferred)) {
      ++checked_at_once;  // private pools (or no history): checked while reading, as without deferring
      CHECK(deferred == checked);
      continue;
    }
    ++pending;
    CHECK(deferred.meta.pools.size() == 1);
    if (pools_confirmed(deferred)) CHECK(deferred == checked);
  }
  CHECK(pending >= test::at_least(20));
  CHECK(checked_at_once >= 1);
}

TEST_CASE("CLI info: says where the program ran under the other expandable_segments setting", "[snapshot][settings]") {
  const std::string cases = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";
  CliResult r = run_cli("info " + cases + "varlen_transformer_train.default_set3-exp.pickle.gz");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("changed      expandable_segments was False for allocations #0 to the end (the program's "
                      "_set_allocator_settings;") != std::string::npos);
  r = run_cli("info " + cases + "varlen_transformer_train.default.pickle.gz");
  CHECK(r.output.find("changed ") == std::string::npos);
}

TEST_CASE("CLI info: allocations and peak with its event index", "[snapshot]") {
  CliResult r = run_cli("info " + kCorpus + "gpt2_train.default.pickle.gz");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("7612 allocations") != std::string::npos);
  CHECK(r.output.find("(13594206920 bytes) requested, at event 5866") != std::string::npos);
  CliResult bad = run_cli("info " + kCorpus + "gpt2_train.default.pickle.gz --gpu 3");
  CHECK(bad.code == 2);
  CHECK(bad.output.find("no data for device 3; devices with data: 0 (22984 entries)") != std::string::npos);
  CHECK(bad.output.find("(pick one with --gpu)") != std::string::npos);
  CliResult usage = run_cli("info " + kCorpus + "gpt2_train.default.pickle.gz --gpu banana");
  CHECK(usage.code == 2);
  // --device is where a replay runs, nothing else: an integer there is refused with the --gpu spelling, and
  // info (which runs nothing) refuses an execution device.
  CliResult old = run_cli("info " + kCorpus + "gpt2_train.default.pickle.gz --device 3");
  CHECK(old.code == 2);
  CHECK(old.output.find("the snapshot's GPU 3 is --gpu 3") != std::string::npos);
  CliResult runs = run_cli("info " + kCorpus + "gpt2_train.default.pickle.gz --device cuda");
  CHECK(runs.code == 2);
  CHECK(runs.output.find("runs nothing on a device") != std::string::npos);
  CHECK(run_cli("info " + kCorpus + "gpt2_train.default.pickle.gz --trace-device 0").code == 0);
}

TEST_CASE("malformed snapshots: exit code 2 naming file and offset", "[snapshot]") {
  std::string gz = read_file(kCorpus + "seed_examples.default.pickle.gz");
  std::string raw = gunzip(gz, "seed");
  SECTION("truncated pickle") { expect_rejected("trunc.pickle", raw.substr(0, raw.size() / 2), "truncated"); }
  SECTION("truncated gzip") { expect_rejected("trunc.pickle.gz", gz.substr(0, gz.size() / 2), "truncated"); }
  SECTION("unknown opcode") { expect_rejected("unknown.pickle", "\x80\x04\xff.", "unknown opcode 0xff"); }
  SECTION("GLOBAL") {
    expect_rejected("global.pickle",
                    "\x80\x02"
                    "cos\nsystem\n.",
                    "GLOBAL");
  }
  SECTION("REDUCE") { expect_rejected("reduce.pickle", "\x80\x02N)R.", "REDUCE"); }
  SECTION("memo GET of a missing key") {
    expect_rejected("memo.pickle", std::string("\x80\x04]j\x07\x00\x01\x00.", 9), "memo key 65543");
  }
  SECTION("negative size") {
    expect_rejected("neg.pickle", snapshot_of({{"alloc", 4096, -512}}), "'size' is negative");
  }
  SECTION("absurd size") {
    expect_rejected("absurd.pickle", snapshot_of({{"alloc", 4096, int64_t{1} << 60}}), "'size' is absurdly large");
  }
  SECTION("alloc of a live address") {
    // The history frees blocks (so no free action was skipped: traces/formats/pytorch/skipped_actions.h), but not this
    // one.
    expect_rejected("twice.pickle",
                    snapshot_of({{"alloc", 4096, 512},
                                 {"alloc", 8192, 512},
                                 {"free_requested", 8192, 512},
                                 {"free_completed", 8192, 512},
                                 {"alloc", 4096, 512}}),
                    "already allocated");
  }
  SECTION("an address allocated twice with no free at all: skip_actions of both frees") {
    std::string bytes = snapshot_of({{"alloc", 4096, 512}, {"alloc", 4096, 512}});
    Trace t = parse_pytorch_snapshot(bytes, "x", with_pytorch_model());
    REQUIRE(t.meta.skipped_actions.size() == 1);
    CHECK(t.meta.skipped_actions[0].action == "free_requested, free_completed");
  }
  SECTION("unknown action") {
    expect_rejected("action.pickle", snapshot_of({{"teleport", 4096, 512}}), "unknown trace action 'teleport'");
  }
}

TEST_CASE("AddrMap agrees with std::unordered_map under random inserts and erases", "[snapshot]") {
  AddrMap map;
  std::unordered_map<uint64_t, uint32_t> ref;
  uint64_t x = 88172645463325252ull;
  auto rnd = [&] {  // xorshift64: deterministic
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (uint32_t i = 0; i < 200000; ++i) {
    uint64_t addr = (rnd() % 4096) * 512;  // few distinct keys: long probe runs and many erases
    if (rnd() % 2) {
      bool fresh = ref.emplace(addr, i).second;
      REQUIRE(map.insert(addr, i) == fresh);
    } else {
      REQUIRE(map.erase(addr) == (ref.erase(addr) == 1));
    }
    uint64_t probe = (rnd() % 4096) * 512;
    const uint32_t* got = map.find(probe);
    auto it = ref.find(probe);
    REQUIRE((got != nullptr) == (it != ref.end()));
    if (got) REQUIRE(*got == it->second);
  }
  CHECK(map.size() == ref.size());
}

// The pages are faulted in on another thread while this one writes the buffer from its start: nothing
// written, before or during, is lost or changed (populating leaves present pages as they are).
TEST_CASE("PopulatePages keeps what is written before and while it populates", "[snapshot]") {
  std::vector<uint64_t> buffer;
  buffer.reserve(size_t{8} << 20);  // 64 MiB: past PopulatePages::kWorthIt
  const size_t before = buffer.capacity() / 8;
  for (size_t i = 0; i < before; ++i) buffer.push_back(i * 0x9e3779b97f4a7c15ull);
  {
    PopulatePages populate(buffer.data(), buffer.capacity() * sizeof(uint64_t));
    while (buffer.size() < buffer.capacity()) buffer.push_back(buffer.size() * 0x9e3779b97f4a7c15ull);
  }
  REQUIRE(buffer.size() == buffer.capacity());
  size_t wrong = 0;
  for (size_t i = 0; i < buffer.size(); ++i) wrong += buffer[i] != i * 0x9e3779b97f4a7c15ull;
  CHECK(wrong == 0);
  PopulatePages small(buffer.data(), 4096);  // below the threshold: nothing started, nothing to join
}

// A DDP rank's snapshot holds its own GPU only: every command that reads a snapshot reads it as `info` and
// `replay` do (the one device with data), and diagnose and tune take --gpu like them. Before, diagnose,
// tune, compare and diff stopped at "device 0 has no history".
TEST_CASE("snapshot import: every command reads a rank's snapshot on its own GPU", "[snapshot]") {
  const std::string rank1 =
      std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/ranks/ddp_train.default_rank1.pickle.gz";
  for (const std::string& command :
       {"diagnose --no-search " + rank1, "tune --space max_split_size_mb:{unset,64} " + rank1,
        "compare --policies pytorch,bestfit " + rank1, "diff " + rank1 + " " + rank1,
        "diagnose --no-search --gpu 1 " + rank1, "diagnose --no-search --trace-device 1 --device sim " + rank1}) {
    CliResult r = run_cli(command);
    INFO(command << "\n" << r.output);
    CHECK(r.code == 0);
  }
  CliResult wrong = run_cli("diagnose --no-search --gpu 0 " + rank1);
  CHECK(wrong.code == 2);
  CHECK(wrong.output.find("devices with data: 1 (") != std::string::npos);
  CliResult gpu = run_cli("tune --device cuda " + rank1);
  CHECK(gpu.code == 2);
  CHECK(gpu.output.find("tune replays on the simulated device") != std::string::npos);
}

// torch.cuda.memory.memory_snapshot()'s plain list from a process that used GPU 1 (a public one): read as
// GPU 1's state where no device is named, an error naming device 1 where device 0 is. It read as an empty
// state of device 0 before, silently.
TEST_CASE("snapshot import: a segments-only snapshot of another GPU reads that GPU", "[snapshot]") {
  const std::string list = temp_file("gpu1_segments.json", R"([{"device": 1, "address": 1048576, "total_size": 2097152,
    "allocated_size": 512, "active_size": 512, "requested_size": 8, "stream": 0, "segment_type": "small",
    "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
    "blocks": [{"address": 1048576, "size": 512, "requested_size": 8, "state": "active_allocated", "frames": []},
               {"address": 1049088, "size": 2096640, "requested_size": 0, "state": "inactive", "frames": []}]}])");
  Trace any = load_trace(list, {kAnyDevice});
  CHECK(any.meta.device == 1);
  CHECK(any.meta.segments.size() == 1);
  CHECK(any.events.size() == 1);  // the live block, as the prologue
  try {
    load_trace(list, {0});
    FAIL("device 0 read as an empty state");
  } catch (const FormatError& e) {
    CHECK_THAT(e.what(), Catch::Contains("device 0 has no segments in this snapshot; devices with data: 1"));
  }
  // The same as a dict of segments without device_traces.
  const std::string dict = temp_file("gpu1_segments_dict.json", R"({"segments": [{"device": 1, "address": 1048576,
    "total_size": 2097152, "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0,
    "segment_type": "small", "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
    "blocks": [{"address": 1048576, "size": 2097152, "requested_size": 0, "state": "inactive", "frames": []}]}]})");
  CHECK(load_trace(dict, {kAnyDevice}).meta.device == 1);
  CHECK_THROWS_AS(load_trace(dict, {0}), FormatError);
  CliResult info = run_cli("info " + list);
  INFO(info.output);
  CHECK(info.code == 0);
  CHECK(info.output.find("1 segments") != std::string::npos);
}

TEST_CASE("snapshot import: each entry's compile context (recorded with compile_context=True)", "[snapshot]") {
  // A torch.compile'd MLP recorded on an H200 with _record_memory_history(compile_context=True): entries
  // carry "Torch-Compiled Region: 0/0" or "0/1" inside the compiled regions, PyTorch's "N/A" elsewhere.
  const std::string file = std::string(FRAGLAB_SOURCE_DIR) +
                           "/tests/data/snapshots/compiled_mlp.default_compile_context_h200.stacksall.pickle.gz";
  const Trace t = load_trace(file);
  std::vector<std::string> contexts = t.meta.compile_contexts;
  std::sort(contexts.begin(), contexts.end());
  REQUIRE(contexts == std::vector<std::string>{"Torch-Compiled Region: 0/0", "Torch-Compiled Region: 0/1"});
  std::map<std::string, uint64_t> allocs;  // "" for none
  for (const Event& e : t.events)
    if (e.kind == EventKind::Alloc) {
      const std::string* c = t.meta.compile_context_of(e);
      ++allocs[c ? *c : ""];
    }
  CHECK(allocs["Torch-Compiled Region: 0/0"] == 7);
  CHECK(allocs["Torch-Compiled Region: 0/1"] == 17);
  CHECK(allocs[""] == 611);
  // Both readings (streaming and complete) and both writable formats keep them.
  const std::string raw = gunzip(read_file(file), file);
  CHECK(parse_pytorch_snapshot_complete(raw, file, with_pytorch_model()).events == t.events);
  for (const char* ext : {".fltrace", ".jsonl"}) {
    INFO(ext);
    const std::string path = (std::filesystem::temp_directory_path() / (std::string("compile_context") + ext)).string();
    save_trace(t, path);
    const Trace back = load_trace(path);
    CHECK(back.meta.compile_contexts == t.meta.compile_contexts);
    CHECK(back.events == t.events);
    std::filesystem::remove(path);
  }
  // `info` says how much each region allocated, in text and JSON.
  CliResult text = run_cli("info " + file);
  CHECK(text.output.find("17 allocations") != std::string::npos);
  CHECK(text.output.find("Torch-Compiled Region: 0/1") != std::string::npos);
  CliResult json_out = run_cli("info --json " + file);
  REQUIRE(json_out.code == 0);
  const nlohmann::json j = nlohmann::json::parse(json_out.output);
  REQUIRE(j["compile_contexts"].size() == 2);
  uint64_t in_regions = 0;
  for (const auto& c : j["compile_contexts"]) in_regions += c["allocations"].get<uint64_t>();
  CHECK(in_regions == 24);
}

TEST_CASE("formats: a compile context an event names must be in the table", "[formats]") {
  const std::string header =
      R"({"fraglab_trace": 1, "device": 0, "streams": [0], "allocator_settings": {}, "compile_contexts": ["c"]})"
      "\n";
  const std::string good =
      temp_file("context_ok.jsonl", header + R"({"op": "alloc", "id": 1, "size": 8, "compile_context": 1})"
                                             "\n");
  CHECK(load_trace(good).events.at(0).compile_context == 1);
  auto rejected = [](const std::string& name, const std::string& bytes, const std::string& where,
                     const std::string& expect) {
    const std::string path = temp_file(name, bytes);
    CliResult r = run_cli("info " + path);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find(path + ":" + where + ": ") != std::string::npos);
    CHECK(r.output.find(expect) != std::string::npos);
  };
  rejected("context_bad.jsonl",
           header + R"({"op": "alloc", "id": 1, "size": 8, "compile_context": 2})"
                    "\n",
           "2", "\"compile_context\" 2 is not in the header");
  rejected(
      "context_dup.jsonl",
      R"({"fraglab_trace": 1, "device": 0, "streams": [0], "allocator_settings": {}, "compile_contexts": ["c", "c"]})"
      "\n",
      "1", "listed twice");
}
