// RMM logging_resource_adaptor CSV logs: the bundled hand-made log (two threads, three
// streams, a free of a block allocated before logging began, an allocation failure, midnight
// passing) and malformed lines reported with their line number.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "import/trace_import.h"
#include "traces/formats/rmm_log/rmm_log_format.h"
#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/trace_io.h"
#include "traces/trace_stats.h"

using namespace fraglab;
namespace fs = std::filesystem;

namespace {

const std::string kSmall = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/rmm_log_small.csv";
const std::string kHeader = "Thread,Time,Action,Pointer,Size,Stream\n";

int run_cli(const std::string& args, std::string& err) {
  std::string err_path =
      (fs::temp_directory_path() / ("fraglab_rmm_test_" + std::to_string(::getpid()) + ".err")).string();
  int status = std::system((std::string(FRAGLAB_CLI) + " " + args + " >/dev/null 2>" + err_path).c_str());
  err = read_file(err_path);
  fs::remove(err_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("rmm log: the bundled small log", "[rmm]") {
  Trace t = load_trace(kSmall);
  CHECK(t.meta.format == "rmm-log");
  std::array<uint64_t, kEventKindCount> kinds{};
  for (const Event& e : t.events) ++kinds[static_cast<size_t>(e.kind)];
  CHECK(kinds[static_cast<size_t>(EventKind::Alloc)] == 6);
  CHECK(kinds[static_cast<size_t>(EventKind::Free)] == 6);
  CHECK(kinds[static_cast<size_t>(EventKind::Oom)] == 1);
  CHECK(t.meta.dropped_unknown_frees == 1);
  CHECK(t.meta.streams == std::vector<uint64_t>{0, 0x7f8a38001020ull, 0x7f8a38001a40ull});
  REQUIRE(t.meta.stacks.size() == 3);  // the empty stack and one per thread
  CHECK(t.meta.stacks[1][0].name == "thread 140573312345856");
  CHECK(t.meta.stacks[2][0].name == "thread 140573303953152");
  // Pointers become dense ids: the reused address 0x...400 gets the lowest free slot.
  CHECK(t.events[0].id == 0);
  CHECK(t.events[0].addr == 0x7f8a40000000ull);
  CHECK(t.events[4].kind == EventKind::Free);
  CHECK(t.events[5].id == 1);
  CHECK(t.events[5].size == 512);
  // Times keep rising across midnight.
  for (size_t i = 1; i < t.events.size(); ++i) CHECK(t.events[i].time_us >= t.events[i - 1].time_us);
  CHECK(t.events.back().time_us - t.events.front().time_us == 104000);
  MemorySource src(t);
  TraceStats s = compute_stats(src);
  CHECK(s.peak_live_requested == 1024 + 1048576 + 8388608 + 2048);
  CHECK(s.never_freed == 0);
}

TEST_CASE("rmm log: replays through every policy and converts to native", "[rmm]") {
  std::string err;
  CHECK(run_cli("replay " + kSmall + " --policy all --check", err) == 0);
  INFO(err);
  std::string out = (fs::temp_directory_path() / ("fraglab_rmm_" + std::to_string(::getpid()) + ".fltrace")).string();
  REQUIRE(run_cli("convert " + kSmall + " " + out, err) == 0);
  CHECK(load_trace(out).events == load_trace(kSmall).events);
  fs::remove(out);
}

TEST_CASE("rmm log: malformed lines name the file and line", "[rmm]") {
  auto reject = [](const std::string& text, uint64_t line, const std::string& what) {
    try {
      parse_rmm_log(text, "log.csv");
      FAIL("accepted: " << text);
    } catch (const FormatError& e) {
      INFO(e.what());
      CHECK(e.where() == FormatError::Where::Line);
      CHECK(e.position() == line);
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  const std::string ok = "1,10:00:00.000000,allocate,0x1000,256,0x0\n";
  reject("Thread,Time,Action\n" + ok, 1, "not an RMM log");
  reject("", 1, "empty file");
  reject(kHeader + ok + "1,10:00:00.000001,allocate,0x2000,256\n", 3, "expected 6 fields");
  reject(kHeader + ok + "1,10:00:00.000001,allocate,0x2000,256,0x0,7\n", 3, "more than 6 fields");
  reject(kHeader + ok + "1,10:00:00.000001,reallocate,0x2000,256,0x0\n", 3, "unknown action");
  reject(kHeader + ok + "1,10:00:00.000001,allocate,0xZZ,256,0x0\n", 3, "bad pointer");
  reject(kHeader + ok + "1,10:00:00.000001,allocate,0x2000,-256,0x0\n", 3, "bad size");
  reject(kHeader + ok + "1,10:00:00.000001,allocate,0x2000,18014398509481984,0x0\n", 3, "absurdly large");
  reject(kHeader + ok + "1,10:00:00,allocate,0x2000,256,0x0\n", 3, "bad time");
  reject(kHeader + ok + "1,10:00:00.000001,allocate,0x1000,256,0x0\n", 3, "already live");
  reject(kHeader + ok + "1,10:00:00.000001,free,0x1000,512,0x0\n", 3, "allocated with 256");
  std::string err;
  std::string path = (fs::temp_directory_path() / ("fraglab_rmm_bad_" + std::to_string(::getpid()) + ".csv")).string();
  std::ofstream(path) << kHeader << ok << "x,10:00:00.000001,free,0x1000,256,0x0\n";
  CHECK(run_cli("info " + path, err) == 2);
  CHECK(err.find(path + ":3: bad thread id") != std::string::npos);
  fs::remove(path);
}

TEST_CASE("rmm log: a real log recorded on an H100 loads and replays through every policy", "[rmm]") {
  // Written by rmm::mr::logging_resource_adaptor over pool_memory_resource over
  // cuda_memory_resource (tools/rmm_log/record_rmm_log.cu): two host threads, two CUDA streams
  // plus the default stream.
  const std::string real = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/rmm_log_h100.csv";
  Trace t = load_trace(real);
  CHECK(t.meta.format == "rmm-log");
  std::vector<decltype(Event::stream)> streams;
  std::vector<StackId> threads;
  uint64_t allocs = 0;
  for (const Event& e : t.events) {
    if (e.kind != EventKind::Alloc) continue;
    ++allocs;
    if (std::find(streams.begin(), streams.end(), e.stream) == streams.end()) streams.push_back(e.stream);
    if (std::find(threads.begin(), threads.end(), e.stack) == threads.end()) threads.push_back(e.stack);
  }
  CHECK(allocs > 0);
  CHECK(streams.size() > 1);
  CHECK(threads.size() > 1);
  CHECK(t.meta.stacks.size() > 2);  // the empty stack and one per thread
  CHECK(t.meta.dropped_unknown_frees == 0);
  std::string err;
  CHECK(run_cli("replay " + real + " --policy all --check", err) == 0);
  INFO(err);
}

TEST_CASE("rmm log: pointers and streams without 0x (RMM 24.10-25.02) and (nil) failures", "[rmm]") {
  // Newer logging adaptors print pointers and streams as bare hexadecimal, and a failed
  // allocation's pointer through %p as "(nil)".
  Trace t = parse_rmm_log(kHeader +
                              "7,10:00:00.000000,allocate,7f8a40000000,256,7f8a38001020\n"
                              "7,10:00:00.000001,allocate failure,(nil),1099511627776,7f8a38001020\n"
                              "7,10:00:00.000002,free,7f8a40000000,256,7f8a38001020\n",
                          "new.csv");
  REQUIRE(t.events.size() == 3);
  CHECK(t.events[0].kind == EventKind::Alloc);
  CHECK(t.events[0].addr == 0x7f8a40000000ull);
  CHECK(t.meta.streams.at(t.events[0].stream) == 0x7f8a38001020ull);
  CHECK(t.events[1].kind == EventKind::Oom);
  CHECK(t.events[2].kind == EventKind::Free);
}

TEST_CASE("rmm log: every Time format RMM writes or documents, with or without the header", "[rmm]") {
  // The real H100 log rewritten: its HH:MM:SS.ffffff times as epoch seconds (RMM's user guide),
  // as HH:MM:SS:ffffff (RMM before April 2021), and without the header line. The events must not
  // change; epoch times shift every time_us by one constant.
  const std::string real = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/rmm_log_h100.csv";
  const Trace original = load_trace(real);
  const std::string text = read_file(real);
  constexpr int64_t kMidnight = 1763769600;  // 2025-11-22 00:00:00 UTC
  std::string epoch, colon, headerless;
  size_t rows = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    if (line.rfind("Thread,", 0) == 0) {
      epoch += line + "\n";
      colon += line + "\n";
      continue;
    }
    size_t c0 = line.find(','), c1 = line.find(',', c0 + 1);
    std::string t = line.substr(c0 + 1, c1 - c0 - 1);  // HH:MM:SS.ffffff
    REQUIRE(t.size() == 15);
    int64_t seconds =
        kMidnight + std::stoll(t.substr(0, 2)) * 3600 + std::stoll(t.substr(3, 2)) * 60 + std::stoll(t.substr(6, 2));
    epoch += line.substr(0, c0 + 1) + std::to_string(seconds) + "." + t.substr(9) + line.substr(c1) + "\n";
    colon += line.substr(0, c0 + 1) + t.substr(0, 8) + ":" + t.substr(9) + line.substr(c1) + "\n";
    headerless += line + "\n";
    ++rows;
  }
  REQUIRE(rows == original.events.size() + original.meta.dropped_unknown_frees);
  Trace from_epoch = parse_rmm_log(epoch, "epoch.csv");
  Trace from_colon = parse_rmm_log(colon, "colon.csv");
  Trace from_headerless = parse_rmm_log(headerless, "headerless.csv");
  CHECK(from_colon.events == original.events);
  CHECK(from_headerless.events == original.events);
  REQUIRE(from_epoch.events.size() == original.events.size());
  const int64_t shift = from_epoch.events[0].time_us - original.events[0].time_us;
  CHECK(shift == kMidnight * 1000000);
  for (size_t i = 0; i < original.events.size(); ++i) {
    Event e = from_epoch.events[i];
    e.time_us -= shift;
    CHECK(e == original.events[i]);
  }
  // A headerless log is recognised by its rows, whatever the file is called.
  fs::path path = fs::temp_directory_path() / ("fraglab_rmm_headerless_" + std::to_string(::getpid()) + ".log");
  std::ofstream(path) << headerless;
  CHECK(detect_format(path.string()) == TraceFormat::RmmLog);
  CHECK(load_trace(path.string()).events == original.events);
  fs::remove(path);
}

TEST_CASE("rmm log: failed allocations with an empty, (nil) or 0x0 pointer; deallocate; repeated headers", "[rmm]") {
  Trace t = parse_rmm_log("\n" + kHeader +
                              "7,1763800000.000238,allocate,0x7f8a40000000,256,0x0\n"
                              "7,1763800000.000240,allocate failure,,1099511627776,0x0\n"
                              "7,1763800000.000241,allocate failure,(nil),1099511627776,0\n"
                              "7,1763800000.0003,allocate failure,0x0,1099511627776,0x0\n" +
                              kHeader + "7,1763800001,deallocate,0x7f8a40000000,256,0x0\n",
                          "doc.csv");
  REQUIRE(t.events.size() == 5);
  CHECK(t.events[0].time_us == 1763800000000238);
  for (size_t i = 1; i <= 3; ++i) {
    CHECK(t.events[i].kind == EventKind::Oom);
    CHECK(t.events[i].size == 1099511627776ull);
  }
  CHECK(t.events[3].time_us == 1763800000000300);
  CHECK(t.events[4].kind == EventKind::Free);
  CHECK(t.events[4].time_us == 1763800001000000);
  CHECK(parse_rmm_log(kHeader, "header-only.csv").events.empty());

  auto reject = [](const std::string& text, uint64_t line, const std::string& what) {
    try {
      parse_rmm_log(text, "log.csv");
      FAIL("accepted: " << text);
    } catch (const FormatError& e) {
      INFO(e.what());
      CHECK(e.position() == line);
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  reject(kHeader + "7,1763800000.000238,allocate,,256,0x0\n", 2, "bad pointer ''");  // only failures may lack it
  reject(kHeader + "7,1763800000.,allocate,0x1,256,0x0\n", 2, "bad time");
  reject(kHeader + "7,-1763800000.5,allocate,0x1,256,0x0\n", 2, "bad time");
  reject(kHeader + "7,1763800000.1234567890,allocate,0x1,256,0x0\n", 2, "bad time");
  reject(kHeader + "7,10:00:00,000000,allocate,0x1,256,0x0\n", 2, "more than 6 fields");
  reject(kHeader + "7,10:00:00-000000,allocate,0x1,256,0x0\n", 2, "bad time");
  reject("\n\n", 1, "empty file");
  reject("policy,peak\nbestfit,12\n", 1, "not an RMM log");
}
