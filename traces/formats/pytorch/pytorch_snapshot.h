// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot / _snapshot()), read by
// fraglab's own data-only pickle reader (traces/formats/pytorch/pickle_reader.h) into the trace model.
//
// The snapshot's device_traces[device] becomes the event stream: alloc, free_requested,
// free_completed (-> Free), segment_alloc/free/map/unmap and oom as reference events.
// Frees of blocks allocated before recording began are dropped and counted; frees
// requested but never completed leave the block live; runs of segment releases that no
// allocation explains become EmptyCache events (torch.cuda.empty_cache()).
// Frames (when recorded) are interned into TraceMeta::stacks for every event; the
// snapshot's `segments` go to TraceMeta::segments and `allocator_settings` to
// TraceMeta::allocator_settings, nested dicts flattened to dotted keys
// ("roundup_power2_divisions.1024" -> "4") and scalars in Python's spelling ("True", "-1",
// "0.0"). Errors (FormatError, with the byte offset of the offending opcode or trace
// entry): any non-data opcode, truncation, a negative or absurd (> 1 PiB) size, an alloc
// at an address still allocated, an unknown action, a device the snapshot has no trace for.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "traces/trace_io.h"

namespace fraglab {

// `bytes` is the (already decompressed) pickle, or the same dict JSON-encoded (then it goes
// through traces/formats/pytorch/json_snapshot.h, which transcodes it to pickle and comes back here);
// `name` names it in errors.
// The format table's recognisers (snapshot_recognise.cpp): pickled, or JSON-encoded.
bool looks_like_pickle(std::string_view head);
bool looks_like_json_snapshot(std::string_view head);
Trace parse_pytorch_snapshot(std::string_view bytes, const std::string& name, const ReadOptions& options);
// Reads a snapshot file, pickle or JSON, plain (memory-mapped, not copied) or gzipped.
Trace read_pytorch_snapshot(const std::string& path, const ReadOptions& options);

// Whether the last snapshot import on this thread read its entries streaming (else it read the
// complete document: another layout, an error, or no history), for tests and benchmarks.
bool last_snapshot_import_streamed();
// How many of its entries the parser's fast path read (pickle_reader.h, "Flat entries").
uint64_t last_snapshot_import_flat_entries();
// Whether its history's allocation ids were given as the entries were read, on another thread (the history
// began with nothing live, as a recording from the program's start), rather than once the whole was read.
bool last_snapshot_import_resolved_ahead();
// Whether its history was checked as the entries were read (ReadOptions::check_history_ahead) and the clean
// verdict kept for check_history() (traces/history_check.h).
bool last_snapshot_import_checked_ahead();
// Tests: the cores the import plans its threads for (the fields' worker from 2, the history check's thread from
// 4), whatever the machine has; 0: the machine's.
void set_snapshot_import_cores(unsigned cores);
// Tests: the importer checks what it knows without a pass (the built events' survey for the pools' inference)
// against the pass, and throws std::logic_error where they differ.
void set_snapshot_import_self_check(bool on);
// The complete (never streaming) reading of a pickle, which decides results and messages: what
// the streaming one is checked against.
Trace parse_pytorch_snapshot_complete(std::string_view bytes, const std::string& name, const ReadOptions& options);

}  // namespace fraglab
