#include "traces/trace_io.h"

#include <algorithm>
#include <stdexcept>

#include "traces/formats/format_sniff.h"
#include "traces/formats/jsonl/jsonl_format.h"
#include "traces/formats/native/native_format.h"
#include "traces/formats/pytorch/pytorch_snapshot.h"
#include "traces/formats/rmm_log/rmm_log_format.h"
#include "traces/io/atomic_file.h"
#include "traces/io/format_error.h"

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
Trace without_options(const std::string& path, const ReadOptions&) {
  return Read(path);
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
  const char* name;                       // format_name()
  std::vector<std::string_view> aliases;  // parse_format_name(); the first is the one to suggest
  const char* description;
  std::vector<Extension> extensions;
  bool (*recognise)(std::string_view head);
  // One of the two: a reader that loads the file whole into a Trace (read_trace() returns it as it is, a
  // stream reads it from memory), or one that decodes block by block (read_trace() drains it).
  Trace (*read)(const std::string& path, const ReadOptions& options);
  std::unique_ptr<EventSource> (*open)(const std::string& path, const ReadOptions& options);
  std::unique_ptr<TraceWriter> (*create)(const std::string& path, const TraceMeta& meta);  // null: read only
  const char* no_writer;                                                                   // why, when read only
  bool streams() const { return open != nullptr; }
};

const std::vector<FormatEntry>& formats() {
  static const std::vector<FormatEntry> table = {
      {TraceFormat::PytorchSnapshot,
       "pytorch-snapshot",
       {"snapshot", "pickle", "pytorch", "pytorch-snapshot"},
       "PyTorch memory snapshot, pickled or JSON",
       {{".pickle", false},
        {".pickle.gz", false},
        {".pkl", false},
        {".pkl.gz", false},
        {".json", true},
        {".json.gz", true}},
       [](std::string_view h) { return looks_like_pickle(h) || looks_like_json_snapshot(h); },
       read_pytorch_snapshot,
       nullptr,
       nullptr,
       "writing a PyTorch snapshot needs a policy's placement: use `fraglab export --to snapshot`"},
      {TraceFormat::Native,
       "native",
       {"native", "fltrace"},
       "fraglab native",
       {{".fltrace", false}},
       looks_like_native,
       nullptr,
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
       without_options<read_jsonl>,
       nullptr,
       create_jsonl_writer,
       nullptr},
      {TraceFormat::RmmLog,
       "rmm-log",
       {"rmm", "rmm-log"},
       "RMM logging_resource_adaptor CSV log",
       {{".csv", true}, {".csv.gz", true}},
       looks_like_rmm_log,
       without_options<read_rmm_log>,
       nullptr,
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

// The reader stream_trace picks: by content first; when the content is not recognised
// (damaged, or empty), by the name, whose reader then says what is wrong and where.
const FormatEntry* reader_for(const std::string& path) {
  FileHead head = read_head(path);
  const FormatEntry* f = recognise(head.bytes);
  if (!f)
    if (std::optional<std::string> why = unsupported_text(head.bytes)) throw FormatError::in_file(path, *why);
  if (!f) extension_of(path, &f);
  return f;
}

// ".jsonl" and ".jsonl.gz" -> ".jsonl[.gz]", once.
std::string extension_names(const FormatEntry& f) {
  std::string names;
  for (const auto& ext : f.extensions) {
    if (ext.suffix.ends_with(".gz")) continue;  // shown as [.gz] on its plain name
    bool gz = std::any_of(f.extensions.begin(), f.extensions.end(), [&](const Extension& other) {
      return other.suffix.size() == ext.suffix.size() + 3 && other.suffix.starts_with(ext.suffix) &&
             other.suffix.ends_with(".gz");
    });
    names += (names.empty() ? "" : " ") + std::string(ext.suffix) + (gz ? "[.gz]" : "");
  }
  return names;
}

}  // namespace

const char* format_name(TraceFormat format) { return entry(format).name; }

std::string format_list() {
  std::string out;
  for (const auto& f : formats())
    out += (out.empty() ? "" : ", ") + std::string(f.description) + " (" + extension_names(f) + ")";
  return out + "; each recognised by its content, whatever the file's name";
}

std::string writable_format_list() {
  std::vector<std::string> items;
  for (const auto& f : formats()) {
    if (!f.create) continue;
    // Writers write their plain form (a .gz name is not compressed), so only that is offered.
    std::string names;
    for (const auto& ext : f.extensions)
      if (!ext.suffix.ends_with(".gz")) names += (names.empty() ? "" : " ") + std::string(ext.suffix);
    items.push_back(std::string(f.aliases.front()) + " (" + names + ")");
  }
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
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

bool reads_streaming(const std::string& path) {
  try {
    require_regular_file(path);  // a FIFO would block read_head
    const FormatEntry* f = reader_for(path);
    return f && f->streams();
  } catch (const FormatError&) {
    return false;
  }
}

namespace {

// The format of the file at `path`, by its content; a directory (it reads as an empty trace) and a FIFO
// (it blocks) are refused.
const FormatEntry& format_of(const std::string& path) {
  require_regular_file(path);
  const FormatEntry* f = reader_for(path);
  if (!f) throw FormatError::in_file(path, "not a trace fraglab reads; formats: " + format_list());
  return *f;
}

}  // namespace

std::unique_ptr<EventSource> stream_trace(const std::string& path, const ReadOptions& options) {
  const FormatEntry& f = format_of(path);
  if (f.streams()) return f.open(path, options);
  return std::make_unique<TraceSource>(f.read(path, options));
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

// A whole-file reader's Trace is returned as it is: draining it through a stream copied every event
// again (a 2.4M-entry snapshot: 96 MB grown by reallocation, ~85 ms of the desktop app's open).
Trace read_trace(const std::string& path, const ReadOptions& options) {
  const FormatEntry& f = format_of(path);
  return f.streams() ? drain(*f.open(path, options)) : f.read(path, options);
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
