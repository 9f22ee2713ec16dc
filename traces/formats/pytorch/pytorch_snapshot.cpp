// PyTorch memory snapshot -> trace model. The layout read here is what
// torch/csrc/cuda/memory_snapshot.cpp (_memory_snapshot) builds from the caching
// allocator's TraceEntry records (c10/cuda/CUDACachingAllocator.h) and what
// torch/cuda/_memory_viz.py consumes:
//
//   {'segments': [{'device', 'address', 'total_size', 'allocated_size', 'active_size',
//                  'requested_size', 'stream', 'segment_type', 'is_expandable',
//                  'blocks': [{'address', 'size', 'requested_size', 'state', 'frames'}]}],
//    'device_traces': [[{'action', 'addr', 'size', 'stream', 'time_us', 'frames', ...}]],
//    'allocator_settings': {...}}
//
// Entry semantics (TraceEntry::Action): alloc/free_requested/free_completed carry the
// block address and its requested size; segment_* carry the segment (or mapped range)
// address and size; oom carries the requested size in `size` and the device's free
// bytes under the key `device_free` instead of `addr` (memory_snapshot.cpp).
//
// Two passes at most, one in the common case: the pickle is parsed streaming (pickle_reader.h),
// each device_traces entry read as it closes (its stream and stack kept as local ids, resolved
// after the segments so that ids come out in the order the complete reading gives them), and the
// pickle is released before the events are built. Whatever does not fit that path (another
// layout, any error) is read again the complete way, which alone decides results and messages.
#include "traces/formats/pytorch/pytorch_snapshot.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>

#include <unordered_map>
#include <unordered_set>

#include "traces/addr_map.h"
#include "traces/background_task.h"
#include "traces/context_interner.h"
#include "traces/formats/format_sniff.h"
#include "traces/formats/pytorch/history_index.h"
#include "traces/formats/pytorch/initial_state.h"
#include "traces/formats/pytorch/json_snapshot.h"
#include "traces/formats/pytorch/pickle_reader.h"
#include "traces/formats/pytorch/pool_inference.h"
#include "traces/formats/pytorch/settings_inference.h"
#include "traces/formats/pytorch/skipped_actions.h"
#include "traces/formats/pytorch/snapshot_model.h"
#include "traces/formats/pytorch/snapshot_schema.h"
#include "traces/formats/pytorch/stack_interner.h"
#include "traces/formats/pytorch/unrecorded_settings.h"
#include "traces/history_check.h"
#include "traces/in_order_worker.h"
#include "traces/io/file_bytes.h"
#include "traces/io/format_error.h"
#include "traces/io/gzip.h"
#include "traces/io/read_limits.h"
#include "traces/stream_interner.h"

namespace fraglab {

namespace {

using pickle::Document;
using pickle::Kind;
using pickle::Value;
using namespace snapshot_schema;

// Sizes above this are taken for corrupt input rather than a real request (read_limits.h).
constexpr int64_t kAbsurdSize = static_cast<int64_t>(kMaxEventBytes);

// Reading with kAnyDevice found device 0 empty and one other device with data: read that one instead.
// The file is read again rather than the device switched midway, because the parser streams the chosen
// device's history as it goes (StreamSpec), before it can know that the list is empty; only rank N > 0
// snapshots pay for it.
struct OnlyOtherDevice {
  int device;
};

// `read(options)`, and when kAnyDevice found device 0 empty, `read` again for the one device with data.
template <class Read>
Trace reading_the_device_with_data(const ReadOptions& options, Read read) {
  try {
    return read(options);
  } catch (const OnlyOtherDevice& other) {
    ReadOptions again = options;
    again.device = other.device;
    return read(again);
  }
}

// The cores the import plans its threads for: the machine's, or what a test sets.
std::atomic<unsigned> g_import_cores_for_tests{0};
std::atomic<bool> g_import_self_check{false};
unsigned import_cores() {
  const unsigned set = g_import_cores_for_tests.load(std::memory_order_relaxed);
  return set ? set : std::thread::hardware_concurrency();
}

class Importer final : public pickle::ListSink {
 public:
  // `disk_bytes`: the input's size on disk, which bounds what it may expand to (read_limits.h).
  // `streaming`: the entries come through item() while the pickle is parsed.
  Importer(const std::string& name, const ReadOptions& options, uint64_t disk_bytes, bool streaming)
      : name_(name), options_(options), stacks_(trace_.meta, read_limits().budget(disk_bytes)), streaming_(streaming) {
    // The fast path's entries are turned into events on another core while the parse goes on (where there is
    // one): a quarter of the parse's time.
    if (streaming_ && import_cores() > 1) {
      fields_worker_ = std::make_unique<FieldsWorker>([this](const pickle::FlatItem* items, size_t n) {
        for (size_t i = 0; i < n; ++i) {
          if (i + kAsked < n) ask_ahead(items[i + kAsked]);
          read_fields(items[i]);
        }
      });
      ahead_ = Ahead::Holding;
      // The check of the history as it is resolved: where there are cores for the inflater, the parser, this
      // worker and one more, on a thread of its own (it is a fifth of this worker's time, which then bounds the
      // parse: 16 cores, 0.35-0.47 s); on fewer, in this worker (two cores: a fourth busy thread took 40 ms
      // from the parser).
      if (options_.check_history_ahead) {
        check_ahead_ = std::make_unique<HistoryCheckAhead>();
        if (import_cores() >= 4)
          check_worker_ = std::make_unique<CheckWorker>([this](const Event* events, size_t n) {
            for (size_t i = 0; i < n; ++i) check_ahead_->add(events[i]);
          });
      }
    }
  }

  // kAnyDevice was asked for (options_.device is then 0): an empty device 0 gives way to the one device
  // with data (OnlyOtherDevice) instead of failing.
  void allow_other_device(bool allow) { allow_other_device_ = allow; }

  // The document, once parsed (nullptr: gone, only finish() may follow).
  void attach(const Document* doc) {
    doc_ = doc;
    stacks_.attach(doc);
    if (doc) claimed_.resize(doc->container_count());
  }

  // A streamed entry, while the parse goes on.
  void item(Document& doc, Value entry) override {
    enter(doc);
    fields_done();  // the entries before it first, in order
    read_entry(entry);
  }
  // The same read by the parser's fast path.
  bool reads_flat_items() const override { return true; }
  int slot_of(std::string_view key) override { return kSlotOfField[static_cast<size_t>(parse_field(key))]; }
  uint32_t intern_list(Document& doc, const Value* items, size_t n) override {
    enter(doc);
    if (n == 0) return 1;  // as local_stack() tags an empty transient list
    stacks_.key_of(items, n, key_);
    return local_stack_of_key() + 1;
  }
  void flat_item(Document& doc, const pickle::FlatItem& item) override {
    enter(doc);
    if (fields_worker_ && self_contained(item)) return fields_worker_->push(item);
    fields_done();
    read_fields(item);
  }
  // An error the worker found is thrown by the completed parse, as the parse would have thrown it.
  void stream_ended(bool completed) override {
    if (!fields_worker_) return;
    if (completed)
      fields_worker_->drain();
    else
      fields_worker_->stop();
  }

  // Everything but building the events; false: history absent. Streaming, it also checks that
  // the list streamed is the one the complete reading would have read (else StreamAbandoned).
  bool collect() {
    if (streaming_ && !doc_->streamed()) streaming_ = false;  // nothing streamed: the document is complete
    bool history = collect_document();
    if (streaming_ && !streamed_list_read_) throw pickle::StreamAbandoned{};
    return history;
  }

  // Streaming: the entries' local stream and stack ids become the trace's, in the order the
  // complete reading assigns them (the segments' first, then the entries' in order).
  void resolve_deferred() {
    if (!streaming_) return;
    std::vector<StreamIndex> streams(local_streams_.size() + 1, 0);
    for (size_t i = 0; i < local_streams_.size(); ++i) streams[i + 1] = streams_.intern(local_streams_[i]);
    std::vector<StackId> stacks(local_keys_.size() + 1, 0);
    for (size_t i = 0; i < local_keys_.size(); ++i)
      stacks[i + 1] = stacks_.stack_of_key(*local_keys_[i], [this](const std::string& what) { fail(what); });
    // The ids are usually the trace's already (the segments name the streams in the order the entries first do;
    // no stacks): then the history is not rewritten.
    bool same = true;
    for (size_t i = 0; i < streams.size(); ++i) same = same && streams[i] == i;
    for (size_t i = 0; i < stacks.size(); ++i) same = same && stacks[i] == i;
    if (!same)
      for (Event& e : raw_) {
        e.stream = streams[e.stream];
        e.stack = stacks[e.stack];
      }
    local_key_ids_ = {};
    last_key_id_ = 0;
    local_keys_ = {};
  }

  // The state at the first entry, the prologue that establishes it, then the history with ids.
  Trace finish(bool history) { return build(history); }
  bool streamed() const { return streaming_; }
  bool used_resolution_ahead() const { return used_resolution_ahead_; }
  bool checked_ahead() const { return checked_ahead_; }

 private:
  bool collect_document() {
    Value root = doc_->root();
    trace_.meta.format = "pytorch-snapshot";
    trace_.meta.source = name_;
    trace_.meta.device = options_.device;
    if (root.kind() == Kind::List) {  // torch.cuda.memory_snapshot(): the plain list of segments
      read_segments(root);
      if (trace_.meta.segments.empty()) refuse_empty_device(nullptr, root);
      return false;
    }
    if (root.kind() != Kind::Dict)
      doc_->fail_at(
          0, std::string("the snapshot must be a dict (or a list of segments), not ") + pickle::kind_name(root.kind()));
    const Value* traces = doc_->find(root, "device_traces");
    const Value* segments = doc_->find(root, "segments");
    if (!traces && !segments)
      doc_->fail(root, "the snapshot has neither device_traces nor segments: is it a PyTorch memory snapshot?");
    if (const Value* settings = doc_->find(root, "allocator_settings")) read_settings(*settings, "");
    // Host (pinned) memory and annotations: reported by `info`, not device memory to replay.
    for (const char* key : {"host_segments", "host_traces", "external_annotations"})
      if (const Value* v = doc_->find(root, key); v && v->is_container() && !doc_->empty(*v))
        trace_.meta.unreplayed.emplace_back(key, doc_->size(*v));
    if (const Value* annotations = doc_->find(root, "external_annotations"); annotations && annotations->is_container())
      read_annotations(*annotations);
    read_host(doc_->find(root, "host_segments"), doc_->find(root, "host_traces"));
    if (segments) read_segments(*segments);
    if (segments && !traces && trace_.meta.segments.empty()) refuse_empty_device(nullptr, *segments);
    bool history = false;
    if (traces) {
      doc_->expect(*traces, Kind::List, "device_traces");
      if (auto entries = select_device(*traces, segments != nullptr)) {
        if (!streaming_) {
          read_entries(*entries);
        } else if (entries->same_object(doc_->streamed_list())) {
          streamed_list_read_ = true;
        }
        history = !raw_.empty();
      }
      // The device asked for (0 by default) holds nothing while another does: the snapshot of one rank
      // of a multi-GPU job (DistributedDataParallel's rank 1 records only its own GPU). Saying so beats
      // showing an empty trace.
      if (!history && trace_.meta.segments.empty()) refuse_empty_device(traces, *traces);
    }
    note_devices_with_data(traces);
    return history;
  }

  // The model that judges the inferences (ReadOptions::model); none: the rules alone.
  const SnapshotModel& model() const {
    static const SnapshotModel kRulesAlone;
    return options_.model ? *options_.model : kRulesAlone;
  }

  // What read_fields() of an entry a few ahead will read from memory another core wrote or that is larger than the
  // caches: its block's slot in the address table, its action's and compile context's bytes in the input (each a
  // miss, most of the worker's waiting).
  static constexpr size_t kAsked = 8;
  void ask_ahead(const pickle::FlatItem& item) const {
    if (Value addr = item.get(kAddrSlot); addr.kind() == Kind::Int)
      blocks_.prefetch(static_cast<uint64_t>(doc_->as_int(addr, "addr")));
    doc_->prefetch_str(item.get(kActionSlot));
    doc_->prefetch_str(item.get(kCompileContextSlot));
  }
  // Whether the worker can read the item while the parse goes on (pickle::Document::self_contained).
  static bool self_contained(const pickle::FlatItem& item) {
    for (const Value& v : item.slots)
      if (!Document::self_contained(v)) return false;
    return true;
  }
  void fields_done() {
    if (fields_worker_) fields_worker_->drain();
  }

  const Document* doc_ = nullptr;
  std::string name_;
  const ReadOptions& options_;
  Trace trace_;
  IdSlots slots_;
  // Block address -> its id while allocated, kFreedBlock once freed (until allocated again): one probe an
  // entry, where a map of live blocks beside a set of freed addresses (for double frees) took two or three.
  AddrMap blocks_;
  static constexpr AllocId kFreedBlock = UINT32_MAX;
  std::vector<uint8_t> free_requested_;         // by id: free_requested seen, completion pending
  std::unordered_set<Addr> unknown_requested_;  // free_requested of blocks in no segment the snapshot shows
  uint64_t double_frees_ = 0;                   // TraceMeta's, once the history is resolved
  uint64_t dropped_unknown_frees_ = 0;          // likewise
  // Resolution ahead (resolve()): while the entries are read on the worker, on the guess that the history
  // begins with nothing live. Holding: every entry so far resolved so (ahead_resolved_ of them).
  enum class Ahead { Off, Holding, Abandoned };
  Ahead ahead_ = Ahead::Off;
  size_t ahead_resolved_ = 0;
  int64_t ahead_last_time_ = INT64_MIN;
  std::vector<size_t> ahead_dropped_;               // indices of entries that make no event, in order
  bool used_resolution_ahead_ = false;              // build() took it
  std::unique_ptr<HistoryCheckAhead> check_ahead_;  // the entries resolved ahead, checked as they come
  bool checked_ahead_ = false;                      // build() kept its clean verdict
  uint64_t user_metadata_entries_ = 0;              // trace entries with a non-empty user_metadata
  ContextInterner contexts_{trace_.meta};           // compile contexts (Event::compile_context)
  std::vector<Annotation> history_annotations_;     // the history's `annotate` entries
  std::vector<int> segment_devices_;                // devices the segments list, for error messages
  bool allow_other_device_ = false;                 // kAnyDevice: see allow_other_device()
  std::vector<Event> raw_;                          // the history at address level (ids not yet assigned)
  HistoryIndex index_;                              // raw_'s kinds and device calls as read (history_index.h) ...
  bool index_valid_ = true;                         // ... until an entry is dropped, changed or added
  size_t written_ = 0;                              // build(): events written so far (over the history)
  EntryOffsets raw_offsets_;                        // each raw entry's offset in the input, for errors
  struct EmptyCacheAt {
    uint64_t index;  // the event it goes before
    bool collector;  // garbage collection could have made the run instead (kEmptyCacheOrCollector)
  };
  std::vector<EmptyCacheAt> empty_cache_before_;  // where EmptyCache events go
  std::optional<EventsSurvey> written_survey_;    // the built events' survey, for the first pool inference
  size_t release_run_start_ = SIZE_MAX;           // first event of the current run of segment releases
  uint64_t reserved_ = 0;                         // the recording's reserved bytes as the history goes
  uint64_t reserved_before_run_ = 0;              // ... when the current run of releases began
  uint64_t peak_reserved_ = 0;                    // ... at most
  uint64_t least_oom_room_ = UINT64_MAX;          // the least reserved + free device memory at an OOM
  uint64_t large_page_ = 0;                       // an expandable segment's large page (large_segment_size)
  bool run_unmaps_ = false;                       // the current run of releases unmaps expandable pages
  RunReading runs_ = RunReading::OneByOne;        // AsTaken while the settings search tries a candidate
  StreamInterner streams_{trace_.meta};
  StackInterner stacks_;
  std::vector<uint8_t> claimed_;  // by container index: an entry, segment or block already read
  StrCache<Field> fields_;
  StrCache<Action> actions_;
  uint64_t entry_offset_ = 0;
  // Streaming: entries get local stream ids (0 = the default stream's handle 0, or no stream, as the trace's
  // index 0 is both; others 1-based, in the order the entries name them) and local stack ids (1-based; 0 =
  // none), made the trace's by resolve_deferred(). With the default stream at 0 the local ids are usually the
  // trace's already: no rewrite of the history.
  bool streaming_;
  bool streamed_list_read_ = false;
  Document* streaming_doc_ = nullptr;  // to tag frames lists as interned
  std::vector<uint64_t> local_streams_;
  std::unordered_map<uint64_t, StreamIndex> local_stream_ids_{{0, 0}};
  uint64_t last_handle_ = 0;  // the handle looked up last, and its local id
  StreamIndex last_local_stream_ = 0;
  std::unordered_map<std::string, StackId> local_key_ids_;
  std::string key_;       // the key being looked up (its buffer reused)
  std::string last_key_;  // the key looked up last, and its local id (0: none yet)
  StackId last_key_id_ = 0;
  std::vector<const std::string*> local_keys_;
  std::unordered_map<uint32_t, StackId> local_stack_of_list_;  // frames lists of the complete document
  // The events resolved ahead, checked on a third thread (check_ahead_). Before the fields' worker, which pushes
  // to it: it stops after that one.
  using CheckWorker = InOrderWorker<Event, std::function<void(const Event*, size_t)>>;
  std::unique_ptr<CheckWorker> check_worker_;
  // Streaming: read_fields() of self-contained flat items on another thread, in order. Last: it stops first.
  using FieldsWorker = InOrderWorker<pickle::FlatItem, std::function<void(const pickle::FlatItem*, size_t)>>;
  std::unique_ptr<FieldsWorker> fields_worker_;

  [[noreturn]] void fail(const std::string& what) const { throw FormatError::at_offset(name_, entry_offset_, what); }

  void enter(Document& doc) {
    if (streaming_doc_ == &doc) return;
    if (!streaming_doc_) {
      // Entries are at least ~40 bytes of pickle each: room for all, taken (not touched) at once.
      raw_.reserve(doc.input_size() / 40);
      raw_offsets_.reserve(doc.input_size() / 40);
    }
    doc_ = &doc;
    stacks_.attach(&doc);
    streaming_doc_ = &doc;
  }

  StreamIndex local_stream(Value v) {
    auto handle = static_cast<uint64_t>(int_field(v, "stream"));
    if (handle == last_handle_) return last_local_stream_;
    auto [it, inserted] = local_stream_ids_.try_emplace(handle, static_cast<StreamIndex>(local_streams_.size() + 1));
    if (inserted) {
      if (local_streams_.size() >= kMaxStreamIndex) throw pickle::StreamAbandoned{};  // the complete reading decides
      local_streams_.push_back(handle);
    }
    last_handle_ = handle;
    return last_local_stream_ = it->second;
  }

  // The local id of the stack whose key is key_ (a new one the first time).
  // Half the allocations of a real recording repeat the stack of the one before: compared first.
  StackId local_stack_of_key() {
    if (last_key_id_ && key_ == last_key_) return last_key_id_;
    StackId id;
    if (auto it = local_key_ids_.find(key_); it != local_key_ids_.end()) {
      id = it->second;
    } else {
      auto [added, inserted] = local_key_ids_.emplace(key_, static_cast<StackId>(local_keys_.size() + 1));
      local_keys_.push_back(&added->first);
      id = added->second;
    }
    last_key_ = key_;
    return last_key_id_ = id;
  }

  // A frames list's local stack id. A transient list is tagged with it (id + 1), so that the memo
  // names it by that id once the list itself is gone (Kind::Interned).
  StackId local_stack(Value frames) {
    if (frames.kind() == Kind::Interned) return static_cast<StackId>(frames.payload() - 1);
    if (frames.kind() != Kind::List) return 0;
    if (doc_->transient(frames)) {
      if (uint32_t tag = doc_->tag(frames)) return tag - 1;
      StackId id = 0;
      if (!doc_->empty(frames)) {
        stacks_.key_of(frames, key_);
        id = local_stack_of_key();
      }
      streaming_doc_->set_tag(frames, id + 1);
      return id;
    }
    if (doc_->empty(frames)) return 0;
    uint32_t list = doc_->container_index(frames);
    if (auto it = local_stack_of_list_.find(list); it != local_stack_of_list_.end()) return it->second;
    stacks_.key_of(frames, key_);
    StackId id = local_stack_of_key();
    local_stack_of_list_.emplace(list, id);
    return id;
  }

  // PyTorch writes every trace entry, segment and block as its own object. One referenced again
  // through the pickle memo would be read once per reference: an alias bomb (a few KB naming
  // one entry millions of times) is refused at the repeat instead.
  void claim(Value container, const char* what) {
    uint8_t& seen = claimed_[doc_->container_index(container)];
    if (seen)
      doc_->fail(container, fmt::format("{} is the same object as an earlier one (a pickle memo reference): refused, "
                                        "PyTorch writes each once",
                                        what));
    seen = 1;
  }

  StreamIndex stream_index(Value v, const char* what) {
    try {
      return streams_.intern(static_cast<uint64_t>(int_field(v, what)));
    } catch (const TooManyStreams& e) {
      fail(e.what());
    }
  }

  StackId stack_of(Value frames) {
    return stacks_.stack_of(frames, [this](const std::string& what) { fail(what); });
  }
  // A stack handled as at that point of the complete reading: streaming, a local id for now.
  StackId entry_stack(Value frames) { return streaming_ ? local_stack(frames) : stack_of(frames); }

  // The device's history, or nothing when the snapshot holds only segments for it.
  std::optional<Value> select_device(Value traces, bool have_segments) {
    int device = options_.device;
    size_t n = doc_->size(traces);
    if (device >= 0 && static_cast<size_t>(device) < n) {
      Value found;
      size_t i = 0;
      doc_->for_each(traces, [&](Value v) {
        if (i++ == static_cast<size_t>(device)) found = v;
      });
      doc_->expect(found, Kind::List, "device_traces[device]");
      return found;
    }
    if (have_segments && !trace_.meta.segments.empty()) return std::nullopt;  // segments, no history
    const std::string available = devices_with_data(&traces);
    doc_->fail(traces,
               fmt::format("the snapshot has no data for device {}; devices with data: {} (pick one with --gpu)",
                           device, available.empty() ? "none" : available));
  }

  // The device asked for (0 by default) holds nothing while another does: the snapshot of one rank of a
  // multi-GPU job (DistributedDataParallel's rank 1 records only its own GPU), or a segments-only
  // snapshot of a process that used GPU 1. Where no device was named the one device with data is read;
  // else the error names the devices that have some. Saying so beats showing an empty trace.
  void refuse_empty_device(const Value* traces, Value where) {
    std::vector<int> others;
    const std::string available = devices_with_data(traces, &others);
    if (allow_other_device_ && others.size() == 1) throw OnlyOtherDevice{others[0]};
    if (!available.empty())
      doc_->fail(where, fmt::format("device {} has no {}segments in this snapshot; devices with data: {} (pick one "
                                    "with --gpu)",
                                    options_.device, traces ? "history and no " : "", available));
  }

  // The entries of a device's history that change memory: a `snapshot` or `user_defined` marker alone (a
  // device the process touched only to take the snapshot) is no data.
  size_t memory_entries(Value list) const {
    size_t n = 0;
    doc_->for_each(list, [&](Value entry) {
      const Value* action = entry.kind() == Kind::Dict ? doc_->find(entry, "action") : nullptr;
      if (!action || !action->is_str()) return ++n, void();
      const Action a = parse_action(doc_->as_str(*action, "action"));
      n += a != Action::Snapshot && a != Action::UserDefined;
    });
    return n;
  }

  // The devices a snapshot holds a history (of the first 16 lists of `traces`, when there are any) or
  // segments for, each with what it holds ("909 entries", "segments only"); `lists`: how many lists
  // `traces` has. The device read counts the entries read (its list may have been streamed, not kept).
  struct GpuListing {
    std::vector<std::pair<int, std::string>> gpus;  // those of the lists first, then segments only
    size_t lists = 0, from_lists = 0;
  };
  GpuListing gpus_with_data(const Value* traces) const {
    GpuListing out;
    if (traces)
      doc_->for_each(*traces, [&](Value v) {
        const int device = static_cast<int>(out.lists++);
        if (device >= 16) return;  // a hostile list of millions: the first few say enough
        const bool read = device == options_.device && !raw_.empty();
        const size_t entries = read ? raw_.size() : v.kind() == Kind::List ? memory_entries(v) : 0;
        if (entries) out.gpus.emplace_back(device, fmt::format("{} entries", entries));
      });
    out.from_lists = out.gpus.size();
    for (int d : segment_devices_)
      if (std::none_of(out.gpus.begin(), out.gpus.end(), [d](const auto& g) { return g.first == d; }))
        out.gpus.emplace_back(d, "segments only");
    return out;
  }

  // "1 (909 entries), 2 (segments only)", for errors; `indices`, when given, receives the devices.
  std::string devices_with_data(const Value* traces, std::vector<int>* indices = nullptr) const {
    const GpuListing listing = gpus_with_data(traces);
    std::string available;
    for (size_t k = 0; k <= listing.gpus.size(); ++k) {
      if (k == listing.from_lists && listing.lists > 16) available += fmt::format(", ... ({} in all)", listing.lists);
      if (k == listing.gpus.size()) break;
      const auto& [device, holds] = listing.gpus[k];
      available += fmt::format("{}{} ({})", available.empty() ? "" : ", ", device, holds);
      if (indices) indices->push_back(device);
    }
    return available;
  }

  // TraceMeta::devices_with_data, where the snapshot holds more than one GPU's lists or segments.
  void note_devices_with_data(const Value* traces) {
    if ((!traces || doc_->size(*traces) < 2) && segment_devices_.size() < 2) return;
    auto gpus = gpus_with_data(traces).gpus;
    std::sort(gpus.begin(), gpus.end());
    if (gpus.size() >= 2) trace_.meta.devices_with_data = std::move(gpus);
  }

  // An inline int (nearly every one) without a call; the rest and the errors out of line.
  int64_t int_field(Value v, const char* what) const {
    if (v.kind() == Kind::Int) [[likely]]
      return static_cast<int64_t>(v.payload() << 4) >> 4;  // sign-extend 60 bits, as Document::as_int
    return int_field_slow(v, what);
  }
  [[gnu::noinline]] int64_t int_field_slow(Value v, const char* what) const {
    if (v.kind() == Kind::HugeInt) fail(fmt::format("'{}' does not fit in 64 bits", what));
    if (!v.is_int()) fail(fmt::format("'{}' must be an int, not {}", what, pickle::kind_name(v.kind())));
    return doc_->as_int(v, what);
  }
  uint64_t size_field(Value v, const char* what) const {
    int64_t s = int_field(v, what);
    if (s < 0) fail(fmt::format("'{}' is negative ({})", what, s));
    if (s > kAbsurdSize) fail(fmt::format("'{}' is absurdly large ({} bytes)", what, s));
    return static_cast<uint64_t>(s);
  }
  uint64_t addr_field(Value v, const char* what) const {
    int64_t a = int_field(v, what);
    if (a < 0) fail(fmt::format("'{}' is negative ({})", what, a));
    return static_cast<uint64_t>(a);
  }

  void read_entries(Value entries) {
    raw_.reserve(doc_->size(entries));
    raw_offsets_.reserve(doc_->size(entries));
    size_t index = 0;
    doc_->for_each(entries, [&](Value entry) {
      if (entry.kind() != Kind::Dict)
        doc_->fail(entries, fmt::format("device_traces entry {} must be a dict, not {}", index,
                                        pickle::kind_name(entry.kind())));
      claim(entry, "this trace entry");
      ++index;
      read_entry(entry);
    });
  }

  Trace build(bool history) {
    TraceMeta& m = trace_.meta;
    m.history_absent = !history;
    // Entries resolved ahead were checked in time order as they came (resolve_ahead): none is stale.
    if (ahead_ != Ahead::Holding || ahead_resolved_ != raw_.size()) drop_stale_entries();
    const SkipReading skips = read_skipped_actions(raw_, raw_offsets_, m.segments, index());
    if (!skips.skipped.empty() || skips.history_unusable) index_valid_ = false;  // entries changed or added
    m.skipped_actions = skips.skipped;
    if (skips.history_unusable) {  // no allocations: the final state alone
      raw_.clear();
      raw_offsets_.clear();
      m.history_absent = true;
    }
    m.annotations.insert(m.annotations.end(), history_annotations_.begin(), history_annotations_.end());
    std::stable_sort(m.annotations.begin(), m.annotations.end(),
                     [](const Annotation& x, const Annotation& y) { return x.time_us < y.time_us; });
    if (user_metadata_entries_) m.unreplayed.emplace_back("user_metadata", user_metadata_entries_);
    if (contexts_.dropped()) m.unreplayed.emplace_back("compile_context past 65,535 distinct", contexts_.dropped());
    std::sort(m.unreplayed.begin(), m.unreplayed.end());  // by key, as the formats that store it write it
    note_large_segment_size(m, raw_, index());
    // Every entry resolved ahead: no entry frees an address before the history allocates it (resolve()).
    const bool ahead = resolved_ahead(skips, raw_.size());
    m.initial = reconstruct_initial_state(raw_, m.segments, recorded_large_segment_size(m), ahead ? &blocks_ : nullptr,
                                          index());
    if (skips.requests_skipped)  // a first free_completed is no earlier request's completion
      for (RecordedSegment& seg : m.initial.segments)
        for (RecordedBlock& b : seg.blocks)
          if (b.state == RecordedBlock::State::ActivePendingFree) b.state = RecordedBlock::State::ActiveAllocated;
    reserved_ = m.initial.reserved();
    std::tie(peak_reserved_, least_oom_room_) = reserved_bounds(raw_, reserved_, index());
    large_page_ = recorded_large_segment_size(m);
    int64_t t0 = raw_.empty() ? 0 : raw_.front().time_us;
    // The events are written over the history, in place: the prologue into room made in front of
    // it, then each entry at or before its own slot (an entry makes at most one event).
    size_t prologue = 0;
    for (const RecordedSegment& seg : m.initial.segments) prologue += seg.blocks.size();
    size_t history_size = raw_.size();
    // The ids given as the entries were read stand where nothing was live at the first entry; else the history
    // is resolved from the state there.
    used_resolution_ahead_ = ahead && prologue == 0;
    if (!used_resolution_ahead_) forget_resolution();
    trace_.events = std::move(raw_);
    trace_.events.insert(trace_.events.begin(), prologue, Event{});
    written_ = 0;
    for (const RecordedSegment& seg : m.initial.segments)
      for (const RecordedBlock& b : seg.blocks) {
        Event e;
        e.kind = EventKind::Alloc;
        e.stream = seg.stream;
        e.size = b.requested_size;
        e.addr = b.address;
        e.time_us = t0;
        e.stack = b.stack;
        e.id = slots_.acquire();
        blocks_.insert(e.addr, e.id);
        if (e.id >= free_requested_.size()) free_requested_.resize(e.id + 1u);
        free_requested_[e.id] = b.state == RecordedBlock::State::ActivePendingFree;
        trace_.events[written_++] = e;
      }
    if (used_resolution_ahead_ && ahead_dropped_.empty() && index()) {
      apply_in_place(history_size);
    } else if (used_resolution_ahead_) {
      size_t next = 0;
      for (size_t i = 0; i < history_size; ++i) {
        if (next < ahead_dropped_.size() && ahead_dropped_[next] == i) {
          ++next;
          continue;
        }
        push(Event(trace_.events[i]));  // a copy: its slot may be written next
      }
    } else {
      for (size_t i = 0; i < history_size; ++i) {
        entry_offset_ = raw_offsets_[i];
        apply_entry(trace_.events[prologue + i]);  // a copy: its slot may be written next
      }
    }
    m.double_frees += double_frees_;
    m.dropped_unknown_frees += dropped_unknown_frees_;
    trace_.events.resize(written_);
    if (release_run_start_ != SIZE_MAX) empty_cache_before_.push_back({release_run_start_, false});
    // What the pools' inference would survey, known from what was written (no pass over the events): the
    // importer names no pool and writes no PoolRelease, and its only EmptyCaches are those it inserts.
    written_survey_ = survey_empty_caches(trace_.events, insert_empty_caches());
    if (g_import_self_check.load(std::memory_order_relaxed) && !(*written_survey_ == survey_events(trace_.events)))
      throw std::logic_error(name_ + ": the written events' survey differs from a pass over them");
    infer_pools_and_settings();
    // Requested but never completed frees of blocks no segment holds: dropped too.
    m.dropped_unknown_frees += unknown_requested_.size();
    raw_ = {};
    raw_offsets_ = {};
    index_ = {};
    // The history checked as it was read is the trace's where every entry kept the id given ahead.
    if (check_worker_) check_worker_->drain();
    checked_ahead_ = check_ahead_ && used_resolution_ahead_ && check_ahead_->remember(trace_.meta);
    return std::move(trace_);
  }

  // PyTorch's history ring (RingBuffer in CUDACachingAllocator.cpp) is not trimmed when
  // _record_memory_history is called again with a smaller max_entries while recording: setMaxEntries only
  // lowers the bound, the slots past it keep their entries and are never written again, and getEntries
  // returns them between the ring's older and newer halves. A recording's times never go back (entries are
  // stamped under the allocator's lock), so those stale entries are the ones earlier than an entry ahead of
  // them: dropped, the history then begins mid-run like any ring.
  void drop_stale_entries() {
    if (!trace_.meta.has_times) return;
    auto goes_back = std::adjacent_find(raw_.begin(), raw_.end(),
                                        [](const Event& a, const Event& b) { return b.time_us < a.time_us; });
    if (goes_back == raw_.end()) return;  // every recording but a shrunk ring: nothing moves
    size_t kept = static_cast<size_t>(goes_back - raw_.begin()) + 1;
    int64_t latest = goes_back->time_us;
    for (size_t i = kept; i < raw_.size(); ++i) {
      if (raw_[i].time_us < latest) continue;
      latest = raw_[i].time_us;
      raw_[kept] = raw_[i];
      raw_offsets_.set(kept++, raw_offsets_[i]);
    }
    trace_.meta.dropped_stale_entries += raw_.size() - kept;
    index_valid_ = false;
    raw_.resize(kept);
    raw_offsets_.resize(kept);
  }

  // A snapshot that records no settings is read again under those its recording shows
  // (traces/formats/pytorch/unrecorded_settings.h).
  void infer_pools_and_settings() {
    const bool unrecorded = settings_unrecorded(trace_);
    Trace unread;
    if (unrecorded) unread = trace_;
    infer_under_settings();
    if (!unrecorded) return;
    infer_unrecorded_settings(
        trace_, unread,
        [this](Trace& t) {
          std::swap(trace_, t);
          runs_ = RunReading::AsTaken;  // a candidate: compared as its better reading has it
          infer_under_settings();
          runs_ = RunReading::OneByOne;
          std::swap(trace_, t);
        },
        model());
  }
  // The setting's windows go first (the pool inference's model replays under them), and are read again
  // once the pools are known. Under expandable_segments:True a cudaMalloc-style segment is either a
  // MemPool's own allocator's or the setting turned off for a while: both readings are inferred where
  // the device calls allow the second, and the model judges (the first stands where it cannot tell).
  void infer_under_settings() {
    const PoolCheck when = options_.defer_pool_check ? PoolCheck::Deferrable : PoolCheck::Now;
    // The events as written: the first reading's alone (later ones read candidates or events an inference changed).
    const std::optional<EventsSurvey> written = std::exchange(written_survey_, std::nullopt);
    infer_expandable_switches(trace_, model(), index());
    if (trace_.meta.expandable_flipped.empty()) {
      infer_pools(trace_, model(), when, runs_, written ? &*written : nullptr);
      infer_expandable_switches(trace_, model(), index());  // MemPools' own allocators left out
      if (trace_.meta.expandable_flipped.empty()) return;
    }
    // The model judges the readings here, so their pools are checked now (not deferred).
    const bool on_at_end = recorded_expandable(trace_.meta);
    Trace own_allocator;
    if (on_at_end) {
      own_allocator = trace_;
      own_allocator.meta.expandable_flipped.clear();
      infer_pools(own_allocator, model(), PoolCheck::Now, runs_);
      infer_expandable_switches(own_allocator, model());
    }
    infer_pools_under_switches();
    if (on_at_end && agreement(trace_, model()) <= agreement(own_allocator, model())) trace_ = std::move(own_allocator);
  }
  // The pools inferred under the setting's windows, the windows revised by the model's replay, and the
  // pools inferred again under the revised windows (a pool the first reading invented to explain a
  // request the other setting served goes), until the windows hold.
  void infer_pools_under_switches() {
    const Trace unread = trace_;
    for (int round = 0; round < 4; ++round) {
      const auto windows = trace_.meta.expandable_flipped;
      infer_pools(trace_, model(), PoolCheck::Now, runs_);
      infer_expandable_switches(trace_, model(), index());
      if (trace_.meta.expandable_flipped == windows) return;
      const auto revised = trace_.meta.expandable_flipped;
      trace_ = unread;
      trace_.meta.expandable_flipped = revised;
    }
    infer_pools(trace_, model(), PoolCheck::Now, runs_);
  }

  void apply_entry(Event e) {
    if (resolve(e, false) == Resolved::Event) push(e);
  }

  // What an entry becomes: its allocation id found or given (Event), or no event (Dropped). `ahead`: resolved
  // as the entry is read, before the state at the first entry is known, on the guess that nothing was live
  // then (a recording from the program's start): Unsure where the entry belies that guess (a free of an
  // address the history never allocated may be a block from before it) or would be an error that reading
  // skipped actions may explain. build() takes the guess only where the state at the first entry bears it out.
  enum class Resolved { Event, Dropped, Unsure };
  Resolved resolve(Event& e, bool ahead) {
    switch (e.kind) {
      case EventKind::Alloc: {
        auto [id, added] = blocks_.try_insert(e.addr, kFreedBlock);
        if (!added && *id != kFreedBlock) {
          if (ahead) return Resolved::Unsure;
          fail(fmt::format("alloc at address 0x{:x}, which is already allocated and not yet freed", e.addr));
        }
        on_alloc(e, *id);
        return Resolved::Event;
      }
      case EventKind::FreeRequested:
      case EventKind::Free: {
        AllocId* id = blocks_.find(e.addr);
        if (ahead && !id) return Resolved::Unsure;
        return e.kind == EventKind::Free ? on_free_completed(e, id) : on_free_requested(e, id);
      }
      default:
        return Resolved::Event;
    }
  }

  // The entry just read, resolved ahead while the guess holds (see resolve()).
  void resolve_ahead() {
    if (ahead_ != Ahead::Holding) return;
    Event& e = raw_.back();
    if (trace_.meta.has_times && e.time_us < ahead_last_time_) {  // a stale entry (drop_stale_entries)
      ahead_ = Ahead::Abandoned;
      return;
    }
    ahead_last_time_ = e.time_us;
    switch (resolve(e, true)) {
      case Resolved::Event:
        if (check_worker_)
          check_worker_->push(e);
        else if (check_ahead_)
          check_ahead_->add(e);
        break;
      case Resolved::Dropped:
        ahead_dropped_.push_back(raw_.size() - 1);
        break;
      case Resolved::Unsure:
        ahead_ = Ahead::Abandoned;
        return;
    }
    ++ahead_resolved_;
  }
  // Whether every entry was resolved ahead and the history as build() reads it is the one resolved: no stale
  // entry dropped, no skipped action inferred, nothing live at the first entry (prologue 0, checked there).
  bool resolved_ahead(const SkipReading& skips, size_t history_size) const {
    return ahead_ == Ahead::Holding && ahead_resolved_ == history_size && skips.skipped.empty() &&
           !skips.history_unusable && trace_.meta.dropped_stale_entries == 0;
  }
  // raw_'s index while it describes raw_ as it stands; else null (the passes scan the history).
  const HistoryIndex* index() const { return index_valid_ ? &index_ : nullptr; }
  // The resolution ahead undone: build() resolves the history from the state at the first entry.
  void forget_resolution() {
    blocks_ = AddrMap{};
    slots_ = IdSlots{};
    free_requested_.clear();
    unknown_requested_.clear();
    double_frees_ = dropped_unknown_frees_ = 0;
    ahead_dropped_ = {};
  }

  void read_entry(Value entry) {
    if (entry.kind() != Kind::Dict)
      throw FormatError::in_file(
          name_, fmt::format("a device_traces entry must be a dict, not {}", pickle::kind_name(entry.kind())));
    pickle::FlatItem item;
    item.offset = doc_->offset(entry);
    doc_->for_each_pair(entry, [&](Value k, Value v) {
      if (!k.is_str()) return;
      Field field = fields_.get(*doc_, k, parse_field);
      if (field == Field::UserMetadata) {  // counted at each occurrence (the fast path has no repeats)
        count_user_metadata(v);
        return;
      }
      if (int slot = kSlotOfField[static_cast<size_t>(field)]; slot >= 0) {
        item.slots[slot] = v;
        item.present |= 1u << slot;
      }
    });
    read_fields(item);
  }

  // An `annotate` entry marks a moment of the program (a later PyTorch's memory annotations): kept as an
  // annotation (a mark, not a range), not replayed. Its name is its 'name', else its user_metadata text.
  void read_annotate(const pickle::FlatItem& item) {
    Annotation a;
    a.start = false;
    a.mark = true;
    if (Value t = item.get(kTimeSlot); t.is_int()) a.time_us = int_field(t, "time_us");
    for (int slot : {kNameSlot, kUserMetadataSlot})
      if (Value v = item.get(slot); a.name.empty() && v.is_str()) a.name = std::string(doc_->as_str(v, "name"));
    if (a.name.empty()) a.name = "annotate";
    history_annotations_.push_back(std::move(a));
    entry_stack(item.get(kFramesSlot));  // its stack interned as the streaming reading's fast path does
  }

  void count_user_metadata(Value v) {
    if (v.is_str() && !doc_->as_str(v, "user_metadata").empty()) ++user_metadata_entries_;
  }

  // An entry's values, gathered by read_entry() or read by the parser's fast path.
  void read_fields(const pickle::FlatItem& item) {
    entry_offset_ = item.offset;
    if (item.has(kUserMetadataSlot)) count_user_metadata(item.slots[kUserMetadataSlot]);
    bool has_action = item.has(kActionSlot), has_addr = item.has(kAddrSlot), has_size = item.has(kSizeSlot);
    Value action_v = item.get(kActionSlot), addr_v = item.get(kAddrSlot), size_v = item.get(kSizeSlot);
    Value stream_v = item.get(kStreamSlot), time_v = item.get(kTimeSlot), frames_v = item.get(kFramesSlot);
    if (!has_action || !action_v.is_str()) fail("trace entry has no 'action' string");
    Action action = actions_.get(*doc_, action_v, parse_action);
    if (action == Action::Snapshot || action == Action::UserDefined) return;  // markers, no memory change
    if (action == Action::Annotate) return read_annotate(item);
    if (action == Action::Unknown) fail(fmt::format("unknown trace action '{}'", doc_->as_str(action_v, "action")));
    if (!has_size) fail("trace entry has no 'size'");
    if (!has_addr && action != Action::Oom) fail("trace entry has no 'addr'");

    Event e;
    e.size = size_field(size_v, "size");
    // Oom: addr holds the device's free bytes (0 when not recorded).
    e.addr = action != Action::Oom ? addr_field(addr_v, "addr") : has_addr ? size_field(addr_v, "device_free") : 0;
    if (time_v.kind() == Kind::None)
      trace_.meta.has_times = false;
    else
      e.time_us = int_field(time_v, "time_us");
    e.stream = stream_v.kind() == Kind::None ? 0
               : streaming_                  ? local_stream(stream_v)
                                             : stream_index(stream_v, "stream");
    e.stack = entry_stack(frames_v);
    if (Value c = item.get(kCompileContextSlot); c.is_str())
      e.compile_context = contexts_.intern(doc_->as_str(c, "compile_context"));
    switch (action) {
      case Action::Alloc:
        e.kind = EventKind::Alloc;
        break;
      case Action::FreeRequested:
        e.kind = EventKind::FreeRequested;
        break;
      case Action::FreeCompleted:
        e.kind = EventKind::Free;
        break;
      case Action::SegmentAlloc:
        e.kind = EventKind::SegmentAlloc;
        break;
      case Action::SegmentFree:
        e.kind = EventKind::SegmentFree;
        break;
      case Action::SegmentMap:
        e.kind = EventKind::SegmentMap;
        break;
      case Action::SegmentUnmap:
        e.kind = EventKind::SegmentUnmap;
        break;
      case Action::Oom:
        e.kind = EventKind::Oom;
        break;
      default:
        return;
    }
    index_.note(e.kind, raw_.size());
    raw_.push_back(e);
    raw_offsets_.push_back(entry_offset_);
    resolve_ahead();
  }

  // Segment releases that the allocator's malloc path makes (garbage collection, the
  // release-and-retry after a failed cudaMalloc) are always followed by that malloc's
  // segment_alloc / segment_map or its oom. A run of releases followed by anything else
  // is torch.cuda.empty_cache(): it becomes an EmptyCache event before the run. So is a run
  // followed by a new segment that could not have failed: the release-and-retry follows a
  // cudaMalloc over the limit, and the limit is at least the recording's peak reserved bytes, so
  // with reserved bytes before the run plus the new segment within that peak the program emptied the
  // cache (torch.cuda.graph() does before it captures). Where the new segment would pass the peak
  // (reserved bytes were near it, as at the end of a training step that calls empty_cache()) or the least
  // limit the GPU's own OOMs show (the driver's memory grew: the limit fell below the peak), or
  // garbage collection may be on (its releases come before a new segment below the limit too), either
  // reading holds: the EmptyCache is marked (kEmptyCacheOrCollector) for a replay of the allocator to
  // keep or drop (pool_inference.h). A run followed by an oom is malloc's.
  void push(const Event& e) {
    note_run(e, written_);
    trace_.events[written_++] = e;
  }
  // The history resolved ahead, every entry an event standing where it was read: written as it is, only the
  // device calls (and the entry that ends a run of releases) looked at, as push() would.
  void apply_in_place(size_t history_size) {
    const std::vector<Event>& events = trace_.events;
    for (size_t i : index_.others()) {
      note_run(events[i], i);
      if (release_run_start_ != SIZE_MAX && i + 1 < history_size && HistoryIndex::is_block_entry(events[i + 1].kind))
        note_run(events[i + 1], i + 1);
    }
    written_ = history_size;
  }
  // The runs of segment releases (where EmptyCache events go) and the reserved bytes, as the event at `at` is
  // written.
  void note_run(const Event& e, size_t at) {
    bool release = e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap;
    if (release) {
      if (release_run_start_ == SIZE_MAX)
        release_run_start_ = at, reserved_before_run_ = reserved_, run_unmaps_ = false;
      run_unmaps_ = run_unmaps_ || e.kind == EventKind::SegmentUnmap;
    } else if (release_run_start_ != SIZE_MAX) {
      bool malloc_path = e.kind == EventKind::Oom;
      bool collector = false;
      // malloc checks a memory fraction against the request's segment size (get_allocation_size), but an
      // expandable segment maps whole pages for it, up to a large page more: there the peak may pass the
      // limit by that much, and a retry at the limit come with the new pages a page short of the peak.
      const uint64_t overshoot = e.kind == EventKind::SegmentMap ? large_page_ : 0;
      if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap)
        collector =
            reserved_before_run_ + e.size + overshoot > std::min(peak_reserved_, least_oom_room_) || gc_possible();
      // Under expandable segments with max_split_size, malloc's retry may map nothing: get_free_block refused
      // the oversize free block that best fits a smaller request, the fraction refused the request's segment,
      // and after release_cached_blocks find_expandable_block hands out the free block before the lowest
      // unmapped range, still mapped. A run of unmaps followed by a request then reads either way.
      else if (e.kind == EventKind::Alloc && run_unmaps_ && split_size_limited())
        collector = true;
      if (!malloc_path) empty_cache_before_.push_back({release_run_start_, collector});
      release_run_start_ = SIZE_MAX;
    }
    if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap) reserved_ += e.size;
    if (release) reserved_ -= std::min(reserved_, e.size);
  }

  // max_split_size_mb set, or settings that do not say (older snapshots).
  bool split_size_limited() const {
    const auto& settings = trace_.meta.allocator_settings;
    auto it = settings.find("max_split_size");
    return it == settings.end() || it->second != "-1";
  }

  // Garbage collection releases segments on malloc's path below the limit; settings that do not say
  // (older snapshots) may have it on.
  bool gc_possible() const {
    const auto& settings = trace_.meta.allocator_settings;
    auto it = settings.find("garbage_collection_threshold");
    return it == settings.end() || std::strtod(it->second.c_str(), nullptr) != 0.0;
  }

  // Over the history, from the state at the first entry: the recording's peak reserved bytes, and the least
  // of reserved + the free device memory (cudaMemGetInfo) at its OOMs. Where the GPU itself ran out, that is
  // its limit then, which falls as the driver's own memory grows, below the peak reserved bytes: a run of
  // releases before a new segment that passes it may be malloc's recovery, not the program's empty_cache().
  // (Under a memory fraction the GPU had room: far above the peak.)
  static std::pair<uint64_t, uint64_t> reserved_bounds(const std::vector<Event>& history, uint64_t initial,
                                                       const HistoryIndex* index) {
    uint64_t reserved = initial, peak = initial, least_oom_room = UINT64_MAX;
    for_each_other_entry(history, index, [&](size_t i) {
      const Event& e = history[i];
      if (e.kind == EventKind::SegmentAlloc || e.kind == EventKind::SegmentMap)
        peak = std::max(peak, reserved += e.size);
      else if (e.kind == EventKind::SegmentFree || e.kind == EventKind::SegmentUnmap)
        reserved -= std::min(reserved, e.size);
      else if (e.kind == EventKind::Oom && e.addr != 0)  // addr: the free memory, 0 where not recorded
        least_oom_room = std::min(least_oom_room, reserved + e.addr);
    });
    return {peak, least_oom_room};
  }

  // In place, from the back (the history's buffer has room: no second copy of millions of events): each event
  // moves up by the EmptyCache events that go before it. They go before events in order of position, one each.
  // Returns where they stand.
  std::vector<size_t> insert_empty_caches() {
    std::vector<Event>& events = trace_.events;
    const size_t n = events.size();
    size_t placed = 0;
    while (placed < empty_cache_before_.size() && empty_cache_before_[placed].index < n &&
           (placed == 0 || empty_cache_before_[placed].index > empty_cache_before_[placed - 1].index))
      ++placed;
    std::vector<size_t> at(placed);
    for (size_t k = 0; k < placed; ++k) at[k] = empty_cache_before_[k].index + k;  // k inserted before it
    if (placed == 0) return at;
    events.resize(n + placed);
    for (size_t i = n, before = placed; i-- > 0 && before > 0;) {
      events[i + before] = events[i];
      if (empty_cache_before_[before - 1].index != i) continue;
      --before;
      Event ec;
      ec.kind = EventKind::EmptyCache;
      ec.id = empty_cache_before_[before].collector ? kEmptyCacheOrCollector : 0;
      ec.time_us = events[i].time_us;
      events[i + before] = ec;
    }
    return at;
  }

  // `block`: the address's entry in blocks_.
  void on_alloc(Event& e, AllocId& block) {
    e.id = slots_.acquire();
    block = e.id;
    if (e.id >= free_requested_.size()) free_requested_.resize(e.id + 1u);
    free_requested_[e.id] = 0;
  }

  Resolved on_free_requested(Event& e, const AllocId* id) {
    if (!id || *id == kFreedBlock) {
      unknown_requested_.insert(e.addr);  // a block no segment of the snapshot holds
      return Resolved::Dropped;
    }
    if (free_requested_[*id]) return Resolved::Dropped;  // requested twice: the first request counts
    free_requested_[*id] = 1;
    e.id = *id;
    return Resolved::Event;
  }

  Resolved on_free_completed(Event& e, AllocId* id) {
    if (!id || *id == kFreedBlock) {
      // A block that lies in no segment the snapshot shows (so not in the state at the first
      // entry): counted once, whether or not its free_requested was recorded too.
      unknown_requested_.erase(e.addr);
      // A block this history allocated and freed already, freed again with no allocation between: a
      // double free (no allocator records one; the history is damaged), not a block before the history.
      if (id)
        ++double_frees_;
      else
        ++dropped_unknown_frees_;
      return Resolved::Dropped;
    }
    e.id = *id;
    *id = kFreedBlock;
    slots_.release(e.id);
    return Resolved::Event;
  }

  // Nested settings (roundup_power2_divisions is a dict of intervals) flatten to dotted
  // keys: "roundup_power2_divisions.1024" -> "4". Scalars use Python's spelling.
  void read_settings(Value settings, const std::string& prefix) {
    if (settings.kind() != Kind::Dict) return;
    doc_->for_each_pair(settings, [&](Value k, Value v) {
      std::string key = prefix + doc_->to_text(k);
      if (v.kind() == Kind::Dict &&
          prefix.empty()) {  // one level, as PyTorch writes (no deep recursion on hostile input)
        claim(v, "this nested allocator setting");
        read_settings(v, key + ".");
      } else if (!v.is_container())
        trace_.meta.allocator_settings[key] = doc_->to_text(v);
    });
  }

  static RecordedBlock::State parse_state(std::string_view s) {
    if (s == "active_allocated") return RecordedBlock::State::ActiveAllocated;
    // "active_awaiting_free" is the name a Python docstring gives the same state.
    if (s == "active_pending_free" || s == "active_awaiting_free") return RecordedBlock::State::ActivePendingFree;
    return RecordedBlock::State::Inactive;
  }

  // external_annotations: {"stage": "START"|"END", "name": str, "device": int, "time_us": int} each. They only
  // inform reports (steps and phases), so an item of another shape is passed over, not refused.
  void read_annotations(Value annotations) {
    if (annotations.kind() != Kind::List) return;
    doc_->for_each(annotations, [&](Value a) {
      if (a.kind() != Kind::Dict) return;
      const Value* stage = doc_->find(a, "stage");
      const Value* name = doc_->find(a, "name");
      const Value* time = doc_->find(a, "time_us");
      const Value* device = doc_->find(a, "device");
      if (!stage || !name || !time || !stage->is_str() || !name->is_str() || !time->is_int()) return;
      if (device && device->is_int() && options_.device >= 0 && int_field(*device, "device") != options_.device) return;
      std::string_view st = doc_->as_str(*stage, "stage");
      if (st != "START" && st != "END") return;
      trace_.meta.annotations.push_back(
          {doc_->as_int(*time, "time_us"), st == "START", std::string(doc_->as_str(*name, "name"))});
    });
    std::stable_sort(trace_.meta.annotations.begin(), trace_.meta.annotations.end(),
                     [](const Annotation& x, const Annotation& y) { return x.time_us < y.time_us; });
  }

  // Pinned host memory (PyTorch 2.14: host_segments in the device segments' layout, host_traces the
  // CachingHostAllocator's history entries, a list or a list per device): counted and its peaks found for
  // reports, not replayed. Items of another shape are passed over.
  void read_host(const Value* segments, const Value* traces) {
    HostMemory& h = trace_.meta.host;
    auto u64 = [&](Value dict, const char* key) -> uint64_t {
      const Value* v = doc_->find(dict, key);
      return v && v->is_int() && doc_->as_int(*v, key) > 0 ? static_cast<uint64_t>(doc_->as_int(*v, key)) : 0;
    };
    if (segments && segments->kind() == Kind::List)
      doc_->for_each(*segments, [&](Value s) {
        if (s.kind() != Kind::Dict) return;
        ++h.segments;
        h.reserved += u64(s, "total_size");
        uint64_t allocated = u64(s, "allocated_size");
        if (const Value* blocks = doc_->find(s, "blocks"); !allocated && blocks && blocks->kind() == Kind::List)
          doc_->for_each(*blocks, [&](Value b) {
            const Value* st = b.kind() == Kind::Dict ? doc_->find(b, "state") : nullptr;
            if (st && st->is_str() && doc_->as_str(*st, "state") != "inactive") allocated += u64(b, "size");
          });
        h.allocated += allocated;
      });
    if (!traces || traces->kind() != Kind::List) return;
    std::vector<std::pair<int, uint64_t>> steps;  // (+1 alloc / -1 free / +2 segment / -2 segment free, bytes)
    bool completions = false;
    std::function<void(Value)> entry = [&](Value e) {
      if (e.kind() == Kind::List)
        return doc_->for_each(e, [&](Value inner) {
          if (inner.kind() == Kind::Dict) entry(inner);
        });
      if (e.kind() != Kind::Dict) return;
      const Value* action = doc_->find(e, "action");
      if (!action || !action->is_str()) return;
      ++h.trace_entries;
      const std::string_view a = doc_->as_str(*action, "action");
      const uint64_t size = u64(e, "size");
      if (a == "alloc") {
        ++h.allocs;
        steps.emplace_back(1, size);
      } else if (a == "free_completed" || a == "free") {
        ++h.frees;
        completions = true;
        steps.emplace_back(-1, size);
      } else if (a == "free_requested") {
        steps.emplace_back(-3, size);
      } else if (a == "segment_alloc") {
        ++h.segment_allocs;
        steps.emplace_back(2, size);
      } else if (a == "segment_free") {
        ++h.segment_frees;
        steps.emplace_back(-2, size);
      }
    };
    doc_->for_each(*traces, entry);
    // Frees count at free_completed; a history without them (skip_actions) at free_requested.
    int64_t net_alloc = 0, net_reserved = 0;
    for (auto& [kind, size] : steps) {
      if (kind == -3 && !completions) {
        kind = -1;
        ++h.frees;
      }
      net_alloc += kind == 1 ? static_cast<int64_t>(size) : kind == -1 ? -static_cast<int64_t>(size) : 0;
      net_reserved += kind == 2 ? static_cast<int64_t>(size) : kind == -2 ? -static_cast<int64_t>(size) : 0;
    }
    int64_t allocated = std::max<int64_t>(0, static_cast<int64_t>(h.allocated) - net_alloc);
    int64_t reserved = std::max<int64_t>(0, static_cast<int64_t>(h.reserved) - net_reserved);
    h.peak_allocated = static_cast<uint64_t>(allocated);
    h.peak_reserved = static_cast<uint64_t>(reserved);
    for (const auto& [kind, size] : steps) {
      allocated += kind == 1 ? static_cast<int64_t>(size) : kind == -1 ? -static_cast<int64_t>(size) : 0;
      reserved += kind == 2 ? static_cast<int64_t>(size) : kind == -2 ? -static_cast<int64_t>(size) : 0;
      h.peak_allocated = std::max(h.peak_allocated, static_cast<uint64_t>(std::max<int64_t>(0, allocated)));
      h.peak_reserved = std::max(h.peak_reserved, static_cast<uint64_t>(std::max<int64_t>(0, reserved)));
    }
  }

  void read_segments(Value segments) {
    if (segments.kind() != Kind::List) doc_->fail(doc_->root(), "'segments' must be a list");
    doc_->for_each(segments, [&](Value s) {
      if (s.kind() != Kind::Dict) doc_->fail(segments, "each segment must be a dict");
      claim(s, "this segment");
      entry_offset_ = doc_->offset(s);
      if (const Value* d = doc_->find(s, "device")) {
        int device = static_cast<int>(int_field(*d, "device"));
        if (std::find(segment_devices_.begin(), segment_devices_.end(), device) == segment_devices_.end())
          segment_devices_.push_back(device);
        if (device != options_.device) return;
      }
      trace_.meta.segments.push_back(read_segment(s));
    });
  }

  RecordedSegment read_segment(Value s) {
    RecordedSegment seg;
    const Value* addr = doc_->find(s, "address");
    if (!addr) fail("segment has no 'address'");
    seg.address = addr_field(*addr, "address");
    seg.total_size = size_of(s, "total_size");
    seg.allocated_size = size_of(s, "allocated_size");
    seg.active_size = size_of(s, "active_size");
    seg.requested_size = size_of(s, "requested_size");
    if (const Value* v = doc_->find(s, "stream"); v && v->is_int()) seg.stream = stream_index(*v, "stream");
    if (const Value* v = doc_->find(s, "segment_type"); v && v->is_str())
      seg.small_pool = doc_->as_str(*v, "segment_type") == "small";
    if (const Value* v = doc_->find(s, "is_expandable"); v && !v->is_container())
      seg.is_expandable = v->kind() == Kind::True || (v->kind() != Kind::False && int_field(*v, "is_expandable") != 0);
    if (const Value* v = doc_->find(s, "segment_pool_id"); v && (v->kind() == Kind::Tuple || v->kind() == Kind::List)) {
      size_t k = 0;
      doc_->for_each(*v, [&](Value part) {
        if (k < 2 && part.is_int()) seg.pool_id[k] = int_field(part, "segment_pool_id");
        ++k;
      });
    }
    if (const Value* blocks = doc_->find(s, "blocks"); blocks && blocks->kind() == Kind::List) {
      // PyTorch 2.0-2.2 blocks have no 'address': they tile the segment in order.
      Addr next = seg.address;
      doc_->for_each(*blocks, [&](Value b) {
        if (b.kind() != Kind::Dict) fail("each block must be a dict");
        claim(b, "this block");
        entry_offset_ = doc_->offset(b);
        RecordedBlock block = read_block(b, next);
        next = block.address + block.size;
        seg.blocks.push_back(block);
      });
    }
    return seg;
  }

  RecordedBlock read_block(Value b, Addr tiled_address) {
    RecordedBlock block;
    const Value* baddr = doc_->find(b, "address");
    block.address = baddr ? addr_field(*baddr, "address") : tiled_address;
    block.size = size_of(b, "size");
    block.requested_size = size_of(b, "requested_size");
    if (const Value* v = doc_->find(b, "state"); v && v->is_str()) block.state = parse_state(doc_->as_str(*v, "state"));
    if (const Value* v = doc_->find(b, "frames")) block.stack = stack_of(*v);
    // PyTorch 2.0: 'history' lists the allocations that used the block, newest last, each with
    // the request ('real_size') and its frames.
    if (const Value* h = doc_->find(b, "history"); h && h->kind() == Kind::List && !doc_->empty(*h)) {
      Value last;
      doc_->for_each(*h, [&](Value v) { last = v; });
      if (last.kind() == Kind::Dict && block.state != RecordedBlock::State::Inactive) {
        if (!doc_->find(b, "requested_size")) block.requested_size = size_of(last, "real_size");
        if (const Value* v = doc_->find(last, "frames"); v && block.stack == 0) block.stack = stack_of(*v);
      }
    }
    return block;
  }

  uint64_t size_of(Value dict, const char* key) {
    const Value* v = doc_->find(dict, key);
    return v ? size_field(*v, key) : 0;
  }
};

}  // namespace

namespace {

thread_local bool g_last_import_streamed = false;
thread_local uint64_t g_last_import_flat_entries = 0;
thread_local bool g_last_import_resolved_ahead = false;
thread_local bool g_last_import_checked_ahead = false;

// The input is released (release_input) before the events are built, when the reading allows.
// `feed`: the input is still being written (InflatingBytes), both parses wait for it.
Trace import_snapshot(std::string_view bytes, const std::string& name, const ReadOptions& asked, uint64_t disk_bytes,
                      const std::function<void()>& release_input, pickle::InputFeed* feed = nullptr) {
  if (starts_as_json(bytes)) return parse_json_snapshot(bytes, name, asked);  // transcoded to pickle there
  ReadOptions options = asked;  // kAnyDevice reads device 0 first (OnlyOtherDevice names another)
  if (options.device == kAnyDevice) options.device = 0;
  const bool any_device = asked.device == kAnyDevice;
  std::unique_ptr<Importer> importer;
  bool history = false;
  g_last_import_flat_entries = 0;
  g_last_import_resolved_ahead = false;
  g_last_import_checked_ahead = false;
  try {
    importer = std::make_unique<Importer>(name, options, disk_bytes, true);
    importer->allow_other_device(any_device);
    Document doc = Document::parse(bytes, name, pickle::StreamSpec{options.device, importer.get()}, feed);
    g_last_import_flat_entries = doc.flat_items();
    importer->attach(&doc);
    history = importer->collect();
    importer->resolve_deferred();
    importer->attach(nullptr);
  } catch (const pickle::StreamAbandoned&) {
    importer.reset();
  } catch (const FormatError&) {
    importer.reset();  // the complete reading reports it, as it would have
  } catch (const TooManyStreams&) {
    importer.reset();
  }
  g_last_import_streamed = importer && importer->streamed();
  if (!importer) {
    importer = std::make_unique<Importer>(name, options, disk_bytes, false);
    importer->allow_other_device(any_device);
    Document doc = Document::parse(bytes, name, pickle::StreamSpec{}, feed);
    importer->attach(&doc);
    history = importer->collect();
    importer->attach(nullptr);
  }
  if (release_input) release_input();
  Trace t = importer->finish(history);
  g_last_import_resolved_ahead = importer->used_resolution_ahead();
  g_last_import_checked_ahead = importer->checked_ahead();
  return t;
}

// A file being inflated (InflatingBytes) or read (FileBytes) on another thread as the parser's feed.
template <class Bytes>
class BytesFeed final : public pickle::InputFeed {
 public:
  explicit BytesFeed(Bytes& bytes) : bytes_(bytes) {}
  size_t wait_beyond(size_t ready) override { return bytes_.wait_beyond(ready); }

 private:
  Bytes& bytes_;
};

// A gzip'd binary pickle (what PyTorch writes) parsed as it inflates on another thread, or nothing
// when the file is not that plain case: then it is inflated first, which also words gzip's errors.
// Errors come out as they would from inflating first: any error waits for the end of the stream,
// and a damaged stream gives way to the one-shot path.
std::optional<Trace> import_while_inflating(std::unique_ptr<FileBytes>& file, const std::string& path,
                                            const ReadOptions& options, uint64_t disk_bytes) {
  std::unique_ptr<InflatingBytes> raw = InflatingBytes::start(file->bytes(), true);
  if (!raw) return std::nullopt;
  try {
    // Binary pickles open with PROTO; anything else (JSON, protocol 0) is read whole.
    raw->wait_beyond(0);
    if (raw->bytes()[0] != '\x80') return std::nullopt;
    BytesFeed<InflatingBytes> feed(*raw);
    // The inflated pickle and the file's mapping are given back on the other core, which inflating has
    // left idle, while this one builds the events: unmapping 170 MB costs ~15 ms. Joined on return.
    BackgroundTask releasing;
    auto release = [&] {
      raw->finish();  // a bad checksum or trailer, found at the end, still decides
      releasing.start([r = std::move(raw), f = std::move(file)]() mutable {
        r.reset();
        f.reset();
      });
    };
    try {
      return import_snapshot(raw->bytes(), path, options, disk_bytes, release, &feed);
    } catch (const FormatError&) {
      if (raw) raw->finish();  // the stream's own damage, if any, is the error to report
      throw;
    }
  } catch (const InflateAbandoned&) {
    return std::nullopt;
  }
}

}  // namespace

bool last_snapshot_import_streamed() { return g_last_import_streamed; }
uint64_t last_snapshot_import_flat_entries() { return g_last_import_streamed ? g_last_import_flat_entries : 0; }
bool last_snapshot_import_resolved_ahead() { return g_last_import_resolved_ahead; }
bool last_snapshot_import_checked_ahead() { return g_last_import_checked_ahead; }
void set_snapshot_import_cores(unsigned cores) { g_import_cores_for_tests.store(cores, std::memory_order_relaxed); }
void set_snapshot_import_self_check(bool on) { g_import_self_check.store(on, std::memory_order_relaxed); }

Trace parse_pytorch_snapshot(std::string_view bytes, const std::string& name, const ReadOptions& options) {
  return reading_the_device_with_data(
      options, [&](const ReadOptions& o) { return import_snapshot(bytes, name, o, bytes.size(), {}); });
}

Trace parse_pytorch_snapshot_complete(std::string_view bytes, const std::string& name, const ReadOptions& options) {
  if (starts_as_json(bytes)) return parse_json_snapshot(bytes, name, options);
  Importer importer(name, options, bytes.size(), false);
  Document doc = Document::parse(bytes, name);
  importer.attach(&doc);
  bool history = importer.collect();
  importer.attach(nullptr);
  return importer.finish(history);
}

namespace {

// A binary pickle parsed while the file is read on another thread. Errors come out as they would from reading
// first: a parse error waits for the end of the reading, and a file that changed while read is the error.
Trace import_while_reading(std::unique_ptr<FileBytes>& file, const std::string& path, const ReadOptions& options,
                           uint64_t disk_bytes) {
  BytesFeed<FileBytes> feed(*file);
  BackgroundTask releasing;  // the 200 MB buffer given back on the other core, as for inflated bytes
  auto release = [&] {
    file->finish();
    releasing.start([f = std::move(file)]() mutable { f.reset(); });
  };
  try {
    return import_snapshot(file->bytes(), path, options, disk_bytes, release, &feed);
  } catch (const FormatError&) {
    if (file) file->finish();  // the file's own change, if any, is the error to report
    throw;
  }
}

// One device's reading of the snapshot file (OnlyOtherDevice: another device holds its data).
Trace read_device(const std::string& path, const ReadOptions& options) {
  std::unique_ptr<FileBytes> file = FileBytes::start_reading(path);
  const size_t first = file->wait_beyond(0);
  std::string_view bytes = file->bytes();
  uint64_t disk_bytes = bytes.size();
  // A binary pickle (PROTO first: what _dump_snapshot writes) is parsed as the file comes in; anything else
  // (gzip, JSON, protocol 0) is read whole first.
  if (first >= 1 && bytes[0] == '\x80') return import_while_reading(file, path, options, disk_bytes);
  file->finish();
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
      static_cast<unsigned char>(bytes[1]) == 0x8b) {
    try {
      if (std::optional<Trace> t = import_while_inflating(file, path, options, disk_bytes)) return std::move(*t);
    } catch (const FormatError& e) {
      if (e.where() != FormatError::Where::Offset) throw;
      throw FormatError::at_inflated_offset(e.file(), e.position(), e.detail());
    }
    auto raw = std::make_unique<InflatedBytes>(inflate_gzip(bytes, path));
    file.reset();  // the compressed bytes are not needed any more
    try {
      return import_snapshot(raw->bytes(), path, options, disk_bytes, [&raw] { raw.reset(); });
    } catch (const FormatError& e) {
      // Offsets into the pickle are offsets into the decompressed data: the message says so.
      if (e.where() != FormatError::Where::Offset) throw;
      throw FormatError::at_inflated_offset(e.file(), e.position(), e.detail());
    }
  }
  return import_snapshot(bytes, path, options, disk_bytes, [&file] { file.reset(); });
}

}  // namespace

Trace read_pytorch_snapshot(const std::string& path, const ReadOptions& options) {
  return reading_the_device_with_data(options, [&](const ReadOptions& o) { return read_device(path, o); });
}

}  // namespace fraglab
