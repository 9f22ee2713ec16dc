// RMM memory event logs: the CSV that rmm::mr::logging_resource_adaptor writes
// (include/rmm/mr/device/logging_resource_adaptor.hpp) and RMM's replay benchmark reads
// (benchmarks/replay/replay.cpp via benchmarks/utilities/log_parser.hpp):
//
//   Thread,Time,Action,Pointer,Size,Stream
//   140573312345856,13:45:12.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020
//   140573312345856,13:45:12.123501,free,0x7f8a40000000,1024,0x7f8a38001020
//
// Time is spdlog's %H:%M:%S.%f (wall clock, microseconds; a step back of more than 12 hours
// is taken as midnight passing). Action is `allocate`, `free`, or `allocate failure` (newer
// RMM logs failed allocations; they become Oom events). Pointers and streams are printed by
// fmt as hex (0x...); decimal is accepted too.
//
// Mapping: each live pointer gets a dense id (trace.h), the Stream column becomes the stream
// table, and the Thread column becomes the allocation's context: one interned "stack" per
// thread (a single frame named "thread <id>"), so views that group by stack group by thread.
// A free of a pointer never allocated in the log (allocated before logging began) is
// dropped and counted, as for PyTorch snapshots.
#pragma once

#include <string>

#include "traces/trace.h"

namespace fraglab {

Trace parse_rmm_log(const std::string& text, const std::string& name);
Trace read_rmm_log(const std::string& path);  // .csv, or .csv.gz

}  // namespace fraglab
