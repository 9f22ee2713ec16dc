// Opening and writing traces in every supported format, chosen by file extension
// (or, for reading, by the file's first bytes when the extension says nothing).
//
//   .pickle, .pickle.gz, .pkl   PyTorch memory snapshot (torch.cuda.memory._dump_snapshot)
//   .fltrace                    fraglab's native format (traces/native_format.h)
//   .jsonl, .jsonl.gz           JSON Lines, for small hand-written traces (traces/jsonl_format.h)
//   .csv, .csv.gz               RMM logging_resource_adaptor log, read only (traces/rmm_log_format.h)
#pragma once

#include <memory>
#include <string>

#include "traces/trace.h"

namespace fraglab {

enum class TraceFormat { PytorchSnapshot, Native, Jsonl, RmmLog };

const char* format_name(TraceFormat format);
// By extension; throws FormatError for an unknown one.
TraceFormat format_for_path(const std::string& path);
// "snapshot"/"pickle", "native"/"fltrace", "jsonl", "rmm" -> format; throws std::invalid_argument.
TraceFormat parse_format_name(const std::string& name);

struct ReadOptions {
  int device = 0;  // snapshots record one trace per device
};

// A streaming reader (throws FormatError when the file is bad, now or while reading).
std::unique_ptr<EventSource> open_trace(const std::string& path, const ReadOptions& options = {});
// The whole trace in memory.
Trace load_trace(const std::string& path, const ReadOptions& options = {});

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
inline void save_trace(const Trace& trace, const std::string& path) {
  save_trace(trace, path, format_for_path(path));
}

// Reads everything from a source into memory.
Trace drain(EventSource& source);

}  // namespace fraglab
