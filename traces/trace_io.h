// Opening and writing traces in every supported format, a snapshot judged by the model passed in
// (ReadOptions::model); the commands read through import/trace_import.h, which passes PyTorch's. Reading goes by the
// file's content (traces/formats/format_sniff.h), so a name need not match; the extension picks the reader only when
// the content is not recognised (then that reader says what is wrong), and picks the format of files written.
//
//   .pickle .pkl .json [.gz]   PyTorch memory snapshot (torch.cuda.memory._dump_snapshot),
//                              pickled (protocols 0-5) or JSON-encoded (traces/formats/pytorch/json_snapshot.h)
//   .fltrace                   fraglab's native format (traces/formats/native/native_format.h)
//   .jsonl [.gz]               JSON Lines, for small hand-written traces (traces/formats/jsonl/jsonl_format.h)
//   .csv [.gz]                 RMM logging_resource_adaptor log, read only (traces/formats/rmm_log/rmm_log_format.h)
//
// The formats live in one table in trace_io.cpp; format_list() prints it for help texts.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "traces/trace.h"

namespace fraglab {

struct SnapshotModel;  // traces/formats/pytorch/snapshot_model.h

enum class TraceFormat { PytorchSnapshot, Native, Jsonl, RmmLog };

const char* format_name(TraceFormat format);
// Every readable format with its file names, one line, for help texts and errors.
std::string format_list();
// The formats fraglab writes, with their file names: "native (.fltrace) or jsonl (.jsonl)".
std::string writable_format_list();
// By extension (for writing); throws FormatError for an unknown one.
TraceFormat format_for_path(const std::string& path);
// "snapshot"/"pickle", "native"/"fltrace", "jsonl", "rmm" -> format; throws std::invalid_argument.
TraceFormat parse_format_name(const std::string& name);
// By content; nullopt when no format recognises it. Throws FormatError when unreadable.
std::optional<TraceFormat> detect_format(const std::string& path);
// True when the file's reader decodes as it goes, in bounded memory (the native format), so a
// long trace is better replayed as it streams than loaded; false for the others and when the
// file is unreadable (opening it then says why).
bool reads_streaming(const std::string& path);

// For directory scans: the name ends in a trace extension, and for names other files share
// too (.json, .jsonl, .csv) the content is a trace.
bool has_trace_extension(const std::string& path);
bool looks_like_trace_file(const std::string& path);
// "x/gpt2.default.pickle.gz" -> "x/gpt2.default"; a name without a trace extension unchanged.
std::string strip_trace_extension(const std::string& name);

// ReadOptions::device for "whichever device has data": a snapshot's device 0, unless device 0 holds
// nothing while exactly one other device does. Then that one: the snapshot of rank N of a
// DistributedDataParallel or FSDP job holds only GPU N. (What the CLI and the GUI read when no
// device is named.)
constexpr int kAnyDevice = -1;

struct ReadOptions {
  int device = 0;  // snapshots record one trace per device (or kAnyDevice)
  // Snapshots: where the rules infer no private pool, skip the allocator model's check of the
  // inferred pools (traces/formats/pytorch/pool_inference.h, rule 7) and leave it to the caller (pool_check_pending,
  // pools_confirmed): a viewer shows the trace first and runs that replay on a worker.
  bool defer_pool_check = false;
  // Snapshots: check the history (traces/history_check.h) as the entries are read, on the reading's second core,
  // for a caller that checks it after (HistoryCheckAhead): `info` then finds the verdict instead of walking the
  // events again.
  bool check_history_ahead = false;
  // Snapshots: the model of the recording allocator that judges the importer's guesses (pools, settings
  // windows, collector runs: traces/formats/pytorch/snapshot_model.h). None reads by the rules alone; the import
  // layer's load_trace (import/trace_import.h) passes PyTorch's, as every command does.
  const SnapshotModel* model = nullptr;
};

// A streaming reader (throws FormatError when the file is bad, now or while reading).
std::unique_ptr<EventSource> stream_trace(const std::string& path, const ReadOptions& options = {});
// The whole trace in memory.
Trace read_trace(const std::string& path, const ReadOptions& options = {});

// Streaming writer: events go out as they come; nothing appears at `path` until
// finish() succeeds (the file is written beside it and renamed into place).
class TraceWriter {
 public:
  virtual ~TraceWriter() = default;
  virtual void write(const Event* events, size_t count) = 0;
  virtual void finish() = 0;
};

std::unique_ptr<TraceWriter> create_writer(const std::string& path, TraceFormat format, const TraceMeta& meta);
void save_trace(const Trace& trace, const std::string& path, TraceFormat format);
inline void save_trace(const Trace& trace, const std::string& path) { save_trace(trace, path, format_for_path(path)); }

// Reads everything from a source into memory.
Trace drain(EventSource& source);

}  // namespace fraglab
