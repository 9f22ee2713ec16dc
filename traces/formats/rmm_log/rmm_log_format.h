// RMM memory event logs: the CSV that rmm::mr::logging_resource_adaptor writes
// (include/rmm/mr/device/logging_resource_adaptor.hpp) and RMM's replay benchmark reads
// (benchmarks/replay/replay.cpp via benchmarks/utilities/log_parser.hpp):
//
//   Thread,Time,Action,Pointer,Size,Stream
//   140573312345856,13:45:12.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020
//   140573312345856,13:45:12.123501,free,0x7f8a40000000,1024,0x7f8a38001020
//
// What each RMM version writes (rapidsai/rmm, include/rmm/mr/device/logging_resource_adaptor.hpp,
// since 2026 cpp/src/mr/detail/logging_resource_adaptor_impl.cpp; all read here):
//  - the header line, written once through the pattern "%v"; some tools print the rows
//    without it, so a log may start with a row (the columns are always in the header's order);
//  - Time from the spdlog pattern "%t,%H:%M:%S.%f,%v": HH:MM:SS.ffffff, wall clock, no date (a
//    step back of more than 12 hours is taken as midnight passing); before 288e8beb (April
//    2021, "fix log timestamp format to use a decimal point") HH:MM:SS:ffffff. RMM's user
//    guide (docs/user_guide/logging.md, 2026) shows and describes epoch seconds instead
//    (1634567890.123456), read to the microsecond;
//  - Action `allocate`, `free`, or `allocate failure` (since 6856d867, March 2022; they become
//    Oom events); the user guide's example spells the free `deallocate`, accepted as `free`;
//  - Pointer and Stream in hexadecimal: fmt's {} and fmt::ptr up to 6729deff (0x...; a null
//    pointer "0x0"), then printf's %p for the pointer (a null one "(nil)") and an ostream's
//    std::hex of the stream handle since 52d61c52 (November 2024; the default stream "0").
//    Bare hexadecimal without 0x, which some builds print, and decimal are accepted too. A
//    failure's pointer is nullptr: "0x0", "(nil)", or left empty by tools that rewrite logs.
//
// Mapping: each live pointer gets a dense id (trace.h), the Stream column becomes the stream
// table, and the Thread column becomes the allocation's context: one interned "stack" per
// thread (a single frame named "thread <id>"), so views that group by stack group by thread.
// A free of a pointer never allocated in the log (allocated before logging began) is
// dropped and counted, as for PyTorch snapshots.
#pragma once

#include <string>
#include <string_view>

#include "traces/trace.h"

namespace fraglab {

// The format table's recogniser (rmm_log_recognise.cpp).
bool looks_like_rmm_log(std::string_view head);
Trace parse_rmm_log(const std::string& text, const std::string& name);
Trace read_rmm_log(const std::string& path);  // .csv, or .csv.gz

}  // namespace fraglab
