// Which allocator pool each allocation of a PyTorch snapshot went to.
//
// PyTorch routes an allocation to a private pool while a CUDA graph captures (torch.cuda.graph,
// torch.compile's reduce-overhead mode) or inside torch.cuda.use_mem_pool(pool) (PyTorch 2.11's
// get_pool: the newest entry of captures_underway whose filter takes the stream). Trace entries
// carry no pool id; the snapshot's final `segments` do (segment_pool_id). The pools are inferred:
//  1. a segment (for expandable segments: a mapped range) that still exists at the end belongs to the
//     pool its final segment names;
//  2. a segment gone by the end, or created and released during the history, on a stream whose final
//     segments all belong to one private pool belongs to it: graph captures run on their own capture
//     stream, so a capture pool's earlier segments are found on that stream;
//  3. an expandable range grows where it ended: a new mapping that starts where a mapped range of the
//     same stream ends, or ends where one starts, belongs to that range's pool;
//  4. otherwise the segment belongs to the default pools;
//  5. an allocation belongs to the pool of the segment it landed in (the recorded block address),
//     a recorded OOM to its stream's pool by rule 2;
//  6. a private pool whose segments an empty_cache returns was released before it (its graph was
//     destroyed or its MemPool deleted: releasePool, then emptyCache): a PoolRelease event goes before
//     that EmptyCache. 6b: a run of releases that begins with the segments of private pools not yet
//     released is each MemPool's destructor (~MemPool: releasePool, then emptyCache of that pool alone):
//     a PoolRelease before each such chunk, the pool marked empties_on_release, the importer's EmptyCache
//     after the chunks (or none, where the chunks are the whole run and malloc cannot have made it);
//  MemPool's arguments (PoolInfo): under expandable segments a cudaMalloc-style segment is a pool's with
//     an allocator of its own (own_allocator); the default stream (handle 0) is never a capture stream, so
//     rule 2 skips it;
//  7. rules 2 to 4 are guesses, which a model of the allocator checks when the import passes one
//     (SnapshotModel, traces/formats/pytorch/snapshot_model.h; the import layer passes PyTorch's): where the model
//     places a block elsewhere than the recording did because a guessed segment sat in the wrong pool, the guess is
//     revised (the new segment the request made goes to a pool of its own, or to the private pool the stream's previous
//     request used; failing that, the segment the model wrongly reused leaves its pool); where an empty_cache of the
//     model returns a guessed segment the recording kept, that segment goes to a pool still owned (a MemPool alive
//     across empty_cache) — unless the run after that empty_cache releases a private pool's segments right after
//     guessed default ones: then those guessed segments are the pool's (a deleted MemPool's small segment, released
//     before its large ones by ~MemPool's emptyCache of the pool), and rule 6b reads the run as the deletion —, as does
//     one that malloc's own releases (the collector, the release and retry, the recovery before an OOM) returned in the
//     model only (to the stream's last private pool), as does one whose cached block the model served a
//     request from that the recording ran out of memory on (a MemPool's reserve, say); where the model cut a request
//     from another segment of its own private pool and no two of that pool's allocations ever shared a segment, the
//     pool is no_split (R1); a request the recording put in a guessed segment it had before takes that segment to the
//     stream's last private pool (R2); and the pools are inferred again, until the model agrees or no guess is left to
//     revise. Where that order (a request's new segment revised first) ends without agreement, or a limit may show, the
//     other order (the segment the model reused first) is tried.
//  8. requests that try_mempool_fallback served (a MemPool(use_on_oom=True) at the limit) land in the
//     pool's cached blocks; the model's fallback reader (SnapshotModel::find_fallbacks) reads them as default-pool
//     requests where the model agrees, and marks the pool use_on_oom.
// A pass with nothing to infer (the segments name one pool, no revision, no expandable segments) does not walk
// the events: every request is then the default pools', and nothing goes in.
// Limits (docs/pytorch-model.md): pools that no rule or model disagreement tells apart stay one pool
// (replaying them as one changes nothing the recording shows); a MemPool whose segments are all gone
// by the end may be named as an inferred pool (id (-1, k)) while the default pools' segments beside it
// are not, as either reading replays the same.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "traces/formats/pytorch/snapshot_model.h"
#include "traces/trace.h"

namespace fraglab {

// An EmptyCache event's id says where it came from: 0, the importer's (a run of segment releases that
// only torch.cuda.empty_cache() explains); kInferredEmptyCache, rule 6's (torch.cuda.graph() before a
// capture); kEmptyCacheOrCollector, the importer's where garbage collection could also have made the run
// (the recorded settings turn it on, or do not say): malloc's collector frees cached segments before a
// new one, which an empty_cache() right before that allocation does too. Only a replay of the
// allocator tells them apart: the model's resolver (SnapshotModel::resolve_collector_runs) keeps or
// drops those events (without one they are dropped: malloc's reading), and every mark is 0 once infer_pools()
// returns.
constexpr AllocId kInferredEmptyCache = 1;
constexpr AllocId kEmptyCacheOrCollector = 2;
// While the pools are inferred, a PoolRelease of pool 0 with this id stands for an importer's EmptyCache
// that rule 6b read as none: the run it stood before was MemPools' destructors alone (each emptying its
// own pool). The checker counts it among the importer's EmptyCaches; infer_pools() removes it.
constexpr AllocId kDroppedEmptyCache = 3;

// Sets TraceMeta::pools, every Alloc and Oom event's pool, and inserts PoolRelease events (and the
// EmptyCache events rule 6's torch.cuda.graph() case needs). The trace's Alloc events carry recorded
// block addresses; device events their segments.
// PoolCheck::Deferrable skips the check where the rules inferred no private pool (ReadOptions::
// defer_pool_check): the trace is then exactly what the check starts from, and pools_confirmed()
// can run it later on the trace as it is.
enum class PoolCheck { Now, Deferrable };
// Whether collector marks that neither reading explains are read run by run (an import), or left as the
// better reading has them (a candidate of a search over settings, compared as it stands).
enum class RunReading { OneByOne, AsTaken };
// What an inference's passes ask of the events before it begins, in one read of them (three passes that asked
// were most of the pools' time on a 2.4M-event import, and the answer is nearly always no).
struct EventsSurvey {
  bool collector_marks = false;  // an EmptyCache marked kEmptyCacheOrCollector
  bool inferred = false;         // an earlier pass's inferences: a pool named, a PoolRelease, an inferred EmptyCache
  bool marks = false;            // an EmptyCache, or a PoolRelease of pool 0: marks the inference clears
  bool operator==(const EventsSurvey&) const = default;
};
EventsSurvey survey_events(const std::vector<Event>& events);
// The same, told by a reader that wrote the events and knows the only EmptyCache events among them are those at
// `empty_caches` (no event names a pool or is a PoolRelease): no pass over them.
EventsSurvey survey_empty_caches(const std::vector<Event>& events, const std::vector<size_t>& empty_caches);

// `model` judges the guesses (rule 7), the collector marks and the fallbacks (rule 8); with none (an empty
// SnapshotModel) the rules' reading stands. `told`: the events' survey where the caller knows it (else one pass
// finds it).
void infer_pools(Trace& trace, const SnapshotModel& model, PoolCheck check = PoolCheck::Now,
                 RunReading runs = RunReading::OneByOne, const EventsSurvey* told = nullptr);

// Whether a trace read with PoolCheck::Deferrable still awaits its check.
bool pool_check_pending(const Trace& trace, const SnapshotModel& model);
// The deferred check: true when the model's checker agrees with the rules (the trace is what
// infer_pools(PoolCheck::Now) gives), false when it would revise them (read the trace again without
// deferring). Thread-safe on a const trace.
bool pools_confirmed(const Trace& trace, const SnapshotModel& model);

}  // namespace fraglab
