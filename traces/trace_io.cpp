#include "traces/trace_io.h"

#include <algorithm>
#include <stdexcept>

#include "traces/atomic_file.h"
#include "traces/format_error.h"
#include "traces/format_sniff.h"
#include "traces/jsonl_format.h"
#include "traces/native_format.h"
#include "traces/pytorch_snapshot.h"
#include "traces/rmm_log_format.h"

namespace fraglab {

namespace {

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

template <Trace (*Read)(const std::string&)>
std::unique_ptr<EventSource> in_memory(const std::string& path, const ReadOptions&) {
  return std::make_unique<TraceSource>(Read(path));
}

// The one table of formats: reading, writing, naming, extensions and content detection all
// come from here, and so do the lists that help texts and errors print.
struct Extension {
  std::string_view suffix;
  // Other files carry this name too (results.json, a stats.jsonl, any .csv): a directory
  // scan takes such a file only when its content is a trace.
  bool shared;
};

struct FormatEntry {
  TraceFormat format;
  const char* name;  // format_name()
  std::vector<std::string_view> aliases;  // parse_format_name(); the first is the one to suggest
  const char* description;
  std::vector<Extension> extensions;
  bool (*recognise)(std::string_view head);
  std::unique_ptr<EventSource> (*open)(const std::string& path, const ReadOptions& options);
  std::unique_ptr<TraceWriter> (*create)(const std::string& path, const TraceMeta& meta);  // null: read only
  const char* no_writer;  // why, when read only
};

const std::vector<FormatEntry>& formats() {
  static const std::vector<FormatEntry> table = {
      {TraceFormat::PytorchSnapshot,
       "pytorch-snapshot",
       {"snapshot", "pickle", "pytorch", "pytorch-snapshot"},
       "PyTorch memory snapshot, pickled or JSON",
       {{".pickle", false}, {".pickle.gz", false}, {".pkl", false}, {".pkl.gz", false}, {".json", true},
        {".json.gz", true}},
       [](std::string_view h) { return looks_like_pickle(h) || looks_like_json_snapshot(h); },
       [](const std::string& path, const ReadOptions& options) -> std::unique_ptr<EventSource> {
         return std::make_unique<TraceSource>(read_pytorch_snapshot(path, options));
       },
       nullptr,
       "writing a PyTorch snapshot needs a policy's placement: use `fraglab export --to snapshot`"},
      {TraceFormat::Native,
       "native",
       {"native", "fltrace"},
       "fraglab native",
       {{".fltrace", false}},
       looks_like_native,
       [](const std::string& path, const ReadOptions&) { return open_native(path); },
       [](const std::string& path, const TraceMeta& meta) -> std::unique_ptr<TraceWriter> {
         return create_native_writer(path, meta);
       },
       nullptr},
      {TraceFormat::Jsonl,
       "jsonl",
       {"jsonl"},
       "JSON Lines",
       {{".jsonl", true}, {".jsonl.gz", true}},
       looks_like_jsonl,
       in_memory<read_jsonl>,
       create_jsonl_writer,
       nullptr},
      {TraceFormat::RmmLog,
       "rmm-log",
       {"rmm", "rmm-log"},
       "RMM logging_resource_adaptor CSV log",
       {{".csv", true}, {".csv.gz", true}},
       looks_like_rmm_log,
       in_memory<read_rmm_log>,
       nullptr,
       "RMM logs are read, not written: convert to native or jsonl"},
  };
  return table;
}

const FormatEntry& entry(TraceFormat format) {
  for (const auto& e : formats())
    if (e.format == format) return e;
  throw std::logic_error("trace format missing from the table");
}

// The longest matching suffix wins (".pickle.gz" over a hypothetical ".gz").
const Extension* extension_of(const std::string& path, const FormatEntry** owner = nullptr) {
  const Extension* best = nullptr;
  for (const auto& f : formats())
    for (const auto& ext : f.extensions)
      if (path.ends_with(ext.suffix) && (!best || ext.suffix.size() > best->suffix.size())) {
        best = &ext;
        if (owner) *owner = &f;
      }
  return best;
}

const FormatEntry* recognise(const std::string& head) {
  for (const auto& f : formats())
    if (f.recognise(head)) return &f;
  return nullptr;
}

}  // namespace

const char* format_name(TraceFormat format) { return entry(format).name; }

std::string format_list() {
  std::string out;
  for (const auto& f : formats()) {
    std::string names;
    for (const auto& ext : f.extensions) {
      if (ext.suffix.ends_with(".gz")) continue;  // shown as [.gz] on its plain name
      bool gz = std::any_of(f.extensions.begin(), f.extensions.end(), [&](const Extension& other) {
        return other.suffix.size() == ext.suffix.size() + 3 && other.suffix.starts_with(ext.suffix) &&
               other.suffix.ends_with(".gz");
      });
      names += (names.empty() ? "" : " ") + std::string(ext.suffix) + (gz ? "[.gz]" : "");
    }
    out += (out.empty() ? "" : ", ") + std::string(f.description) + " (" + names + ")";
  }
  return out + "; each recognised by its content, whatever the file's name";
}

TraceFormat format_for_path(const std::string& path) {
  const FormatEntry* owner = nullptr;
  if (extension_of(path, &owner)) return owner->format;
  throw FormatError::in_file(path, "unknown trace extension; formats: " + format_list());
}

TraceFormat parse_format_name(const std::string& name) {
  std::string known;
  for (const auto& f : formats())
    for (std::string_view alias : f.aliases) {
      if (alias == name) return f.format;
      if (alias == f.aliases.front()) known += (known.empty() ? "" : ", ") + std::string(alias);
    }
  throw std::invalid_argument("unknown format '" + name + "' (" + known + ")");
}

bool has_trace_extension(const std::string& path) { return extension_of(path) != nullptr; }

std::string strip_trace_extension(const std::string& name) {
  const Extension* ext = extension_of(name);
  return ext && name.size() > ext->suffix.size() ? name.substr(0, name.size() - ext->suffix.size()) : name;
}

bool looks_like_trace_file(const std::string& path) {
  const Extension* ext = extension_of(path);
  if (!ext) return false;
  if (!ext->shared) return true;
  try {
    return recognise(read_head(path).bytes) != nullptr;
  } catch (const FormatError&) {
    return false;
  }
}

std::optional<TraceFormat> detect_format(const std::string& path) {
  if (const FormatEntry* f = recognise(read_head(path).bytes)) return f->format;
  return std::nullopt;
}

std::unique_ptr<EventSource> open_trace(const std::string& path, const ReadOptions& options) {
  require_regular_file(path);  // a directory reads as an empty trace, a FIFO blocks: both refused
  // Content first; when the content is not recognised (damaged, or empty), the name picks
  // the reader, whose error then says what is wrong and where.
  const FormatEntry* f = recognise(read_head(path).bytes);
  if (!f) extension_of(path, &f);
  if (!f) throw FormatError::in_file(path, "not a trace fraglab reads; formats: " + format_list());
  return f->open(path, options);
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
  const FormatEntry& f = entry(format);
  if (!f.create) throw std::invalid_argument(f.no_writer);
  return f.create(path, meta);
}

void save_trace(const Trace& trace, const std::string& path, TraceFormat format) {
  auto writer = create_writer(path, format, trace.meta);
  writer->write(trace.events.data(), trace.events.size());
  writer->finish();
}

}  // namespace fraglab
