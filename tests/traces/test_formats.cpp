// Snapshots as users store them: pickle protocols 1-5 and JSON (plain and gzipped) of real
// PyTorch 2.11 recordings load to the trace the original gives; formats are told by content,
// not by name; JSON errors name the byte offset; help texts and errors list every format.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "import/trace_import.h"
#include "report/corpus.h"
#include "tests/shell_command.h"
#include "traces/formats/format_sniff.h"
#include "traces/formats/jsonl/jsonl_format.h"
#include "traces/formats/native/native_format.h"
#include "traces/formats/pytorch/json_snapshot.h"
#include "traces/formats/pytorch/pickle_reader.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/formats/rmm_log/rmm_log_format.h"
#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"
#include "traces/io/gzip.h"
#include "traces/trace_io.h"

using namespace fraglab;
namespace fs = std::filesystem;

namespace {

const std::string kSource = FRAGLAB_SOURCE_DIR;
const std::string kCorpus = kSource + "/traces/corpus/";
const std::string kEncodings = kSource + "/tests/data/encodings/";

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("fraglab_formats_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& bytes) const {
    std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

using fraglab::test::CliResult;

CliResult run(const std::string& command) { return fraglab::test::run_shell(command + " 2>&1"); }

CliResult run_cli(const std::string& args) { return run(std::string(FRAGLAB_CLI) + " " + args); }

// Everything but the file name must agree: events, streams, stacks, segments, settings.
void check_same_trace(Trace got, const Trace& want, const std::string& what) {
  INFO(what);
  CHECK(got.meta.format == want.meta.format);
  got.meta.source = want.meta.source;
  CHECK(got.events.size() == want.events.size());
  CHECK(got.meta.stacks.size() == want.meta.stacks.size());
  CHECK(got.meta.segments.size() == want.meta.segments.size());
  CHECK(got.meta.allocator_settings == want.meta.allocator_settings);
  CHECK(got == want);
}

std::string gunzip_file(const std::string& path) { return gunzip(read_file(path), path); }

FormatError expect_error(const std::string& json) {
  try {
    parse_json_snapshot(json, "t.json", with_pytorch_model());
  } catch (const FormatError& e) {
    return e;
  }
  FAIL("accepted: " << json);
  return FormatError::in_file("", "");
}

}  // namespace

TEST_CASE("formats: a real snapshot re-encoded as users store it loads to the identical trace", "[formats]") {
  // tests/data/encodings: traces/corpus/side_stream_prefetch.default.pickle.gz (PyTorch 2.11,
  // two streams) re-encoded by tests/tools/reencode_snapshot.py: pickle protocols 1-5 and JSON.
  const Trace original = load_trace(kCorpus + "side_stream_prefetch.default.pickle.gz");
  REQUIRE(original.events.size() > 1000);
  REQUIRE(original.meta.streams.size() == 2);  // the default stream and the side stream
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kEncodings)) {
    std::string path = entry.path().string();
    check_same_trace(load_trace(path), original, path);
    ++files;
  }
  CHECK(files == 6);

  // The same bytes, uncompressed, under every name a user might give them.
  TempDir dir("names");
  std::string json = gunzip_file(kEncodings + "side_stream_prefetch.default.json.gz");
  std::string proto5 = gunzip_file(kEncodings + "side_stream_prefetch.default.proto5.pickle.gz");
  std::string proto2 = gunzip_file(kEncodings + "side_stream_prefetch.default.proto2.pickle.gz");
  CHECK(proto5.substr(0, 3) == "\x80\x05\x95");  // PROTO 5, FRAME
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{{"snap.json", json},
                                                                                    {"snap.pkl", json},
                                                                                    {"snap.pickle", json},
                                                                                    {"snap", json},
                                                                                    {"snap.json", proto5},
                                                                                    {"snap.pkl", proto2},
                                                                                    {"snapshot.bin", proto5}}) {
    std::string path = dir.file(name, bytes);
    CHECK(detect_format(path) == TraceFormat::PytorchSnapshot);
    check_same_trace(load_trace(path), original, name);
  }
  // The JSON, gzipped under a .json.gz name, and read whole from memory.
  check_same_trace(parse_pytorch_snapshot(json, "mem.json", with_pytorch_model()), original,
                   "parse_pytorch_snapshot(JSON)");
}

TEST_CASE("formats: Python re-encodes corpus snapshots with stacks and expandable segments", "[formats]") {
  // python3 is a build dependency (scripts/setup-debian.sh). These two carry frames (memoized
  // strings, shared frame lists) and segment_map entries, which the bundled encodings do not.
  TempDir dir("python");
  for (std::string name : {"gpt2_train.default.stacks", "gpt2_train.expandable"}) {
    std::string src = kCorpus + name + ".pickle.gz";
    CliResult r = run("python3 " + kSource + "/tests/tools/reencode_snapshot.py " + src + " " + dir.path.string());
    INFO(r.output);
    REQUIRE(r.code == 0);
    const Trace original = load_trace(src);
    for (std::string variant : {".proto1.pickle.gz", ".proto2.pickle.gz", ".proto3.pickle.gz", ".proto4.pickle.gz",
                                ".proto5.pickle.gz", ".json.gz"})
      check_same_trace(load_trace((dir.path / (name + variant)).string()), original, name + variant);
  }
}

TEST_CASE("formats: pickle opcodes of protocols 4 and 5 as Python writes them", "[formats]") {
  // FRAME around the data, MEMOIZE + BINGET, SHORT_BINUNICODE, BINUNICODE8, BYTEARRAY8.
  std::string p = "\x80\x05\x95";
  std::string body = std::string(
                         "]\x94(\x8c\x03"
                         "abc\x94h\x01") +
                     "\x8d" + std::string("\x02\0\0\0\0\0\0\0", 8) + "xy" + "\x96" +
                     std::string("\x03\0\0\0\0\0\0\0", 8) + "\x01\x02\x03" + "e.";
  uint64_t n = body.size() - 1;  // the frame ends before STOP... or anywhere: it is a hint
  for (int i = 0; i < 8; ++i) p += static_cast<char>((n >> (8 * i)) & 0xff);
  p += body;
  auto doc = pickle::Document::parse(p, "proto5");
  REQUIRE(doc.root().kind() == pickle::Kind::List);
  std::vector<pickle::Value> items;
  doc.for_each(doc.root(), [&](pickle::Value v) { items.push_back(v); });
  REQUIRE(items.size() == 4);
  CHECK(doc.as_str(items[0], "0") == "abc");
  CHECK(items[1].same_object(items[0]));  // BINGET of the MEMOIZEd string
  CHECK(doc.as_str(items[2], "2") == "xy");
  CHECK(items[3].kind() == pickle::Kind::Bytes);
  CHECK(doc.as_str(items[3], "3") == "\x01\x02\x03");
}

TEST_CASE("formats: JSON transcodes to the pickle Python would write, offsets mapped back", "[formats]") {
  std::string json = R"({"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0},
 {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0}]],
 "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "garbage_collection_threshold": 0.0,
 "expandable_segments": false, "max_split_size": -1, "big": 18446744073709551615, "none": null}})";
  TranscodedSnapshot t = transcode_json_snapshot(json, "t.json");
  auto doc = pickle::Document::parse(t.pickle, "t");
  const pickle::Value* settings = doc.find(doc.root(), "allocator_settings");
  REQUIRE(settings);
  CHECK(doc.to_text(*doc.find(*settings, "garbage_collection_threshold")) == "0.0");  // a float, as pickled
  CHECK(doc.to_text(*doc.find(*settings, "expandable_segments")) == "False");
  CHECK(doc.to_text(*doc.find(*settings, "max_split_size")) == "-1");
  CHECK(doc.find(*settings, "big")->kind() == pickle::Kind::HugeInt);  // beyond int64, as pickle's LONG1
  CHECK(doc.find(*settings, "none")->kind() == pickle::Kind::None);
  // Repeated strings are one memoized object, as in a real pickle.
  const pickle::Value* traces = doc.find(doc.root(), "device_traces");
  std::vector<pickle::Value> keys;
  doc.for_each(*traces, [&](pickle::Value list) {
    doc.for_each(list, [&](pickle::Value entry) {
      doc.for_each_pair(entry, [&](pickle::Value k, pickle::Value) { keys.push_back(k); });
    });
  });
  REQUIRE(keys.size() == 8);
  for (size_t i = 0; i < 4; ++i) CHECK(keys[i].same_object(keys[i + 4]));
  // Every container's pickle offset maps back to its opening bracket in the JSON.
  REQUIRE(t.origins.size() >= 5);
  for (const auto& [pickle_at, json_at] : t.origins) {
    CHECK((json[json_at] == '{' || json[json_at] == '['));
    CHECK(t.json_offset(pickle_at) == json_at);
  }
  Trace trace = parse_json_snapshot(json, "t.json", with_pytorch_model());
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.meta.allocator_settings.at("garbage_collection_threshold") == "0.0");
  CHECK(trace.meta.allocator_settings.at("expandable_segments") == "False");
}

TEST_CASE("formats: JSON errors name the byte offset in the JSON", "[formats]") {
  std::string entry2 = R"({"action": "alloc", "addr": 8192, "size": -5, "stream": 0})";
  std::string bad =
      R"({"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0}, )" + entry2 + "]]}";
  FormatError e = expect_error(bad);
  CHECK(e.where() == FormatError::Where::Offset);
  CHECK(e.position() == bad.find(entry2));  // the entry's opening brace
  CHECK(e.detail().find("'size' is negative") != std::string::npos);

  std::string syntax = R"({"device_traces": [[{"action": "alloc" "addr": 1}]]})";
  e = expect_error(syntax);
  CHECK(e.detail().find("not valid JSON") != std::string::npos);
  CHECK(e.position() >= syntax.find("\"addr\""));
  CHECK(e.position() <= syntax.find("\"addr\"") + 6);

  std::string truncated = R"({"device_traces": [[{"action": "alloc", "ad)";
  e = expect_error(truncated);
  CHECK(e.position() == truncated.size());

  std::string deep = "{\"segments\": " + std::string(100, '[') + std::string(100, ']') + "}";
  e = expect_error(deep);
  CHECK(e.detail().find("nested deeper than") != std::string::npos);
  CHECK(e.position() == 13 + kMaxJsonDepth - 1);  // the bracket that opens level kMaxJsonDepth + 1

  // The importer's errors about a container other than an entry land on that container.
  std::string no_device = R"({"device_traces": [[]], "segments": []})";
  try {
    parse_json_snapshot(no_device, "t.json", with_pytorch_model(ReadOptions{3}));
    FAIL("device 3 accepted");
  } catch (const FormatError& err) {
    CHECK(err.position() == no_device.find("[["));
    CHECK(err.detail().find("no data for device 3") != std::string::npos);
  }
}

TEST_CASE("formats: the content decides, whatever the name", "[formats]") {
  TempDir dir("content");
  std::string jsonl =
      "{\"fraglab_trace\": 1, \"device\": 0, \"streams\": [0]}\n{\"op\": \"alloc\", \"id\": 1, \"size\": 512}\n";
  std::string rmm = "7,10:00:00.000000,allocate,0x1000,256,0x0\n7,10:00:00.000001,free,0x1000,256,0x0\n";
  std::string native_path = (dir.path / "n.fltrace").string();
  save_trace(load_trace(dir.file("x.jsonl", jsonl)), native_path);
  struct Case {
    std::string name, bytes;
    TraceFormat format;
  };
  for (const Case& c :
       std::vector<Case>{{"trace.txt", jsonl, TraceFormat::Jsonl},
                         {"trace.json", jsonl, TraceFormat::Jsonl},
                         {"alloc.log", rmm, TraceFormat::RmmLog},
                         {"alloc.pickle", "Thread,Time,Action,Pointer,Size,Stream\n" + rmm, TraceFormat::RmmLog},
                         {"native.data", read_file(native_path), TraceFormat::Native}}) {
    std::string path = dir.file(c.name, c.bytes);
    INFO(c.name);
    CHECK(detect_format(path) == c.format);
    CHECK_NOTHROW(load_trace(path));
  }
  // Gzip is looked through before deciding.
  std::string gz = dir.file("log.gz", read_file(kEncodings + "side_stream_prefetch.default.json.gz"));
  CHECK(detect_format(gz) == TraceFormat::PytorchSnapshot);

  // Protocol 0 and 1 pickles have no PROTO opcode: recognised by their first opcodes.
  CHECK(looks_like_pickle("(dp0\nVdevice_traces\n"));
  CHECK(looks_like_pickle("}q\x00(X\x0d"));
  CHECK(looks_like_pickle("\x80\x02}q\x00"));
  CHECK_FALSE(looks_like_pickle("\x80\x09"));
  CHECK_FALSE(looks_like_pickle("{\"a\": 1}"));
  // JSON Lines and JSON snapshots both start with '{': the keys tell them apart, and JSON that
  // is neither (a results file, a stats line) is not a trace.
  CHECK(looks_like_json_snapshot("\xEF\xBB\xBF  {\"segments\": [], \"device_traces\": [[]]}"));
  CHECK(looks_like_json_snapshot("{\"allocator_settings\": {\"x\": 1}, \"device_traces\": [["));  // sort_keys, cut off
  CHECK(looks_like_json_snapshot("[{\"device\": 0, \"address\": 1, \"total_size\": 2}]"));
  CHECK_FALSE(looks_like_json_snapshot("{\"fraglab_trace\": 1, \"allocator_settings\": {}}\n"));
  CHECK_FALSE(looks_like_json_snapshot("{\"workload\": \"x\", \"stats\": {\"segments\": 3}}"));
  CHECK_FALSE(looks_like_json_snapshot("[1, 2, 3]"));
  CHECK(looks_like_jsonl("{\"allocator_settings\": {}, \"device\": 0, \"fraglab_trace\": 1}\n"));
  CHECK_FALSE(looks_like_jsonl("{\"segments\": [{\"op\": 1}]}"));  // only top-level keys count
  CHECK(looks_like_rmm_log("\r\n140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n"));
  CHECK_FALSE(looks_like_rmm_log("a,b,c,d,e,f\n"));
  CHECK_FALSE(looks_like_rmm_log("1,t,allocate,0x1,1,0x0,extra\n"));

  // Unrecognised content: the name picks the reader, which says what is wrong and where.
  std::string broken = dir.file("broken.pickle", std::string("\x80\x04\xff.", 4));
  CliResult r = run_cli("info " + broken);
  CHECK(r.code == 2);
  CHECK(r.output.find(broken + ": byte offset 2: unknown opcode 0xff") != std::string::npos);
  // Neither: the error lists every format.
  std::string junk = dir.file("junk.dat", "hello\n");
  r = run_cli("info " + junk);
  CHECK(r.code == 2);
  for (std::string name : {".pickle", ".pkl", ".json", ".fltrace", ".jsonl", ".csv", "RMM"})
    CHECK(r.output.find(name) != std::string::npos);
}

TEST_CASE("formats: help texts and errors list every format", "[formats]") {
  for (std::string command : {"replay", "info", "fidelity", "export", "convert", "tune", "diagnose", "ops"}) {
    CliResult r = run_cli(command + " --help");
    INFO(command << ": " << r.output);
    CHECK(r.code == 0);
    for (std::string name : {".pickle", ".pkl", ".json", ".fltrace", ".jsonl", ".csv", "RMM", "JSON"})
      CHECK(r.output.find(name) != std::string::npos);
  }
  std::string list = format_list();
  CHECK(list.find(".pickle[.gz] .pkl[.gz] .json[.gz]") != std::string::npos);
  CHECK(list.find(".csv[.gz]") != std::string::npos);
  try {
    format_for_path("out.txt");
    FAIL("accepted out.txt");
  } catch (const FormatError& e) {
    CHECK(std::string(e.what()).find(".fltrace") != std::string::npos);
    CHECK(std::string(e.what()).find(".csv") != std::string::npos);
  }
  CHECK(parse_format_name("rmm") == TraceFormat::RmmLog);
  CHECK_THROWS_WITH(parse_format_name("xml"), Catch::Contains("rmm") && Catch::Contains("snapshot"));
  CHECK(format_for_path("a.json.gz") == TraceFormat::PytorchSnapshot);
  CHECK(strip_trace_extension("gpt2.default.json.gz") == "gpt2.default");
  CHECK(strip_trace_extension("gpt2.default.pickle.gz") == "gpt2.default");
  CHECK(strip_trace_extension("notes.txt") == "notes.txt");
  // Commands that write traces offer the formats that have a writer, from the same table.
  CHECK(writable_format_list() == "native (.fltrace) or jsonl (.jsonl)");
  for (std::string command : {"convert", "gen random"}) {
    CliResult r = run_cli(command + " --help");
    INFO(command << ": " << r.output);
    CHECK(r.output.find("native (.fltrace) or jsonl (.jsonl)") != std::string::npos);
  }
}

TEST_CASE("formats: only a native trace streams, whatever its name", "[formats]") {
  TempDir dir("streams");
  std::string jsonl =
      "{\"fraglab_trace\": 1, \"device\": 0, \"streams\": [0]}\n{\"op\": \"alloc\", \"id\": 1, \"size\": 512}\n";
  std::string jsonl_path = dir.file("x.jsonl", jsonl);
  std::string native_path = (dir.path / "n.fltrace").string();
  save_trace(load_trace(jsonl_path), native_path);
  CHECK(reads_streaming(native_path));
  CHECK(reads_streaming(dir.file("native.data", read_file(native_path))));
  CHECK_FALSE(reads_streaming(jsonl_path));
  CHECK_FALSE(reads_streaming(dir.file("fake.fltrace", jsonl)));  // the content decides
  CHECK_FALSE(reads_streaming((dir.path / "missing.fltrace").string()));
  CHECK_FALSE(reads_streaming(dir.path.string()));  // a directory: opening it says why
}

// read_trace() returns a whole-file reader's Trace as it is and drains a streaming one; a stream of any
// file gives the same trace, event for event.
TEST_CASE("formats: reading a file whole and streaming it give the same trace in every format", "[formats]") {
  TempDir dir("whole");
  std::string jsonl_path = dir.file("x.jsonl",
                                    "{\"fraglab_trace\": 1, \"device\": 0, \"streams\": [0]}\n"
                                    "{\"op\": \"alloc\", \"id\": 1, \"size\": 512}\n{\"op\": \"free\", \"id\": 1}\n");
  std::string native_path = (dir.path / "n.fltrace").string();
  save_trace(load_trace(kCorpus + "side_stream_prefetch.default.pickle.gz"), native_path);
  for (const std::string& path : {kCorpus + "side_stream_prefetch.default.pickle.gz", native_path, jsonl_path,
                                  std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/rmm_log_small.csv"}) {
    INFO(path);
    const Trace whole = load_trace(path);
    REQUIRE(!whole.events.empty());
    CHECK(whole == drain(*open_trace(path)));
  }
  CHECK_THROWS_AS(load_trace(dir.path.string()), FormatError);  // a directory: refused, as streaming it is
  CHECK_THROWS_AS(load_trace(dir.file("text.txt", "hello")), FormatError);
}

TEST_CASE("formats: a directory scan takes .json and .csv files only when they hold a trace", "[formats]") {
  TempDir dir("scan");
  std::string snapshot = dir.file("snap.json", gunzip_file(kEncodings + "side_stream_prefetch.default.json.gz"));
  std::string pickled =
      dir.file("pickled.json.gz", read_file(kEncodings + "side_stream_prefetch.default.proto4.pickle.gz"));
  std::string log =
      dir.file("alloc.csv", "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x1,8,0x0\n");
  dir.file("results.json", "{\"rows\": []}\n");
  dir.file("table.csv", "policy,peak\nbestfit,12\n");
  dir.file("stats.jsonl", "{\"workload\": \"x\"}\n");
  CHECK(expand_corpus({dir.path.string()}) == std::vector<std::string>{log, pickled, snapshot});
}

// A snapshot dumped before anything was allocated (a public one holds only allocator_settings): a
// PyTorch snapshot, empty, not "not a snapshot".
TEST_CASE("formats: fidelity says a snapshot is empty", "[formats]") {
  TempDir dir("empty");
  std::string empty =
      dir.file("empty.json",
               R"({"segments": [], "device_traces": [[]], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""}})");
  CliResult r = run_cli("fidelity " + empty);
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("is an empty snapshot") != std::string::npos);
  CHECK(r.output.find("fidelity needs a PyTorch snapshot") == std::string::npos);
  CHECK(run_cli("info " + empty).code == 0);
}

TEST_CASE("formats: fidelity says when a trace records no device calls", "[formats]") {
  std::string rmm = kSource + "/tests/data/rmm_log_small.csv";
  CliResult r = run_cli("fidelity " + rmm);
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("records no device calls of its allocator") != std::string::npos);
  CHECK(r.output.find("nothing to compare") != std::string::npos);
  // The same requests converted to another format: still nothing to compare.
  TempDir dir("fidelity");
  std::string native = (dir.path / "rmm.fltrace").string();
  REQUIRE(run_cli("convert " + rmm + " " + native).code == 0);
  CHECK(run_cli("fidelity --json " + native).code == 2);
  // A snapshot does record them (its JSON encoding too).
  r = run_cli("fidelity " + kEncodings + "side_stream_prefetch.default.json.gz");
  CHECK(r.code == 0);
  CHECK(r.output.rfind("exact:", 0) == 0);
}
