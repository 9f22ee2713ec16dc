#include "traces/trace_io.h"

#include <fstream>
#include <optional>
#include <stdexcept>

#include "traces/atomic_file.h"
#include "traces/format_error.h"
#include "traces/jsonl_format.h"
#include "traces/native_format.h"
#include "traces/pytorch_snapshot.h"
#include "traces/rmm_log_format.h"

namespace fraglab {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first bytes of a file decide when its name does not.
std::optional<TraceFormat> sniff(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof head);
  std::string h(head, static_cast<size_t>(in.gcount()));
  if (h.rfind("FLTRACE", 0) == 0) return TraceFormat::Native;
  if (h.size() >= 2 && static_cast<unsigned char>(h[0]) == 0x80) return TraceFormat::PytorchSnapshot;
  if (!h.empty() && h[0] == '{') return TraceFormat::Jsonl;
  if (h.rfind("Thread,T", 0) == 0) return TraceFormat::RmmLog;
  return std::nullopt;
}

class TraceSource final : public EventSource {
 public:
  explicit TraceSource(Trace trace) : trace_(std::move(trace)), inner_(trace_) {}
  const TraceMeta& meta() const override { return trace_.meta; }
  size_t read(Event* out, size_t capacity) override { return inner_.read(out, capacity); }
  const Event* read_in_place(size_t capacity, size_t& n) override { return inner_.read_in_place(capacity, n); }
  bool rewind() override { return inner_.rewind(); }

 private:
  Trace trace_;
  MemorySource inner_;
};

}  // namespace

const char* format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::PytorchSnapshot: return "pytorch-snapshot";
    case TraceFormat::Native: return "native";
    case TraceFormat::Jsonl: return "jsonl";
    case TraceFormat::RmmLog: return "rmm-log";
  }
  return "?";
}

TraceFormat format_for_path(const std::string& path) {
  if (ends_with(path, ".pickle") || ends_with(path, ".pickle.gz") || ends_with(path, ".pkl") ||
      ends_with(path, ".pkl.gz"))
    return TraceFormat::PytorchSnapshot;
  if (ends_with(path, ".fltrace")) return TraceFormat::Native;
  if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz")) return TraceFormat::Jsonl;
  if (ends_with(path, ".csv") || ends_with(path, ".csv.gz")) return TraceFormat::RmmLog;
  throw FormatError::in_file(path, "unknown trace extension (use .pickle[.gz], .fltrace or .jsonl)");
}

TraceFormat parse_format_name(const std::string& name) {
  if (name == "snapshot" || name == "pickle" || name == "pytorch" || name == "pytorch-snapshot")
    return TraceFormat::PytorchSnapshot;
  if (name == "native" || name == "fltrace") return TraceFormat::Native;
  if (name == "jsonl") return TraceFormat::Jsonl;
  if (name == "rmm" || name == "rmm-log") return TraceFormat::RmmLog;
  throw std::invalid_argument("unknown format '" + name + "' (snapshot, native, jsonl)");
}

std::unique_ptr<EventSource> open_trace(const std::string& path, const ReadOptions& options) {
  require_regular_file(path);  // a directory reads as an empty trace, a FIFO blocks: both refused
  TraceFormat format;
  try {
    format = format_for_path(path);
  } catch (const FormatError&) {
    auto sniffed = sniff(path);
    if (!sniffed) throw;
    format = *sniffed;
  }
  switch (format) {
    case TraceFormat::Native: return open_native(path);
    case TraceFormat::PytorchSnapshot: return std::make_unique<TraceSource>(read_pytorch_snapshot(path, options));
    case TraceFormat::Jsonl: return std::make_unique<TraceSource>(read_jsonl(path));
    case TraceFormat::RmmLog: return std::make_unique<TraceSource>(read_rmm_log(path));
  }
  throw std::logic_error("unreachable");
}

Trace drain(EventSource& source) {
  Trace trace;
  trace.meta = source.meta();
  constexpr size_t kChunk = 1 << 16;
  for (;;) {
    size_t at = trace.events.size();
    trace.events.resize(at + kChunk);
    size_t n = source.read(trace.events.data() + at, kChunk);
    trace.events.resize(at + n);
    if (n == 0) break;
  }
  return trace;
}

Trace load_trace(const std::string& path, const ReadOptions& options) {
  auto source = open_trace(path, options);
  return drain(*source);
}

std::unique_ptr<TraceWriter> create_writer(const std::string& path, TraceFormat format, const TraceMeta& meta) {
  switch (format) {
    case TraceFormat::Native: return create_native_writer(path, meta);
    case TraceFormat::Jsonl: return create_jsonl_writer(path, meta);
    case TraceFormat::PytorchSnapshot:
      throw std::invalid_argument(
          "writing a PyTorch snapshot needs a policy's placement: use `fraglab export --to snapshot`");
    case TraceFormat::RmmLog:
      throw std::invalid_argument("RMM logs are read, not written: convert to native or jsonl");
  }
  throw std::logic_error("unreachable");
}

void save_trace(const Trace& trace, const std::string& path, TraceFormat format) {
  auto writer = create_writer(path, format, trace.meta);
  writer->write(trace.events.data(), trace.events.size());
  writer->finish();
}

}  // namespace fraglab
