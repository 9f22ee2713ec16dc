// Corpus expansion: the trace files a headless run covers, from what the user named.
//
// A path may be a trace file (any supported format; always taken, a bad one fails the
// run with its FormatError), a directory (searched recursively, not through symbolic links to
// directories, for files with a trace
// extension; `.json`, `.jsonl` and `.csv` files there are taken only when their content is
// a trace (traces/formats/format_sniff.h), so a corpus's stats.jsonl is skipped), or a glob pattern
// (`traces/*.pickle.gz`, expanded by POSIX glob(3), each match then treated as above). The result is sorted and free of
// duplicates, so the job matrix, its shards and the report are the same whatever order the file system lists things in.
#pragma once

#include <string>
#include <vector>

namespace fraglab {

// Throws std::invalid_argument when a path matches nothing or the result is empty.
std::vector<std::string> expand_corpus(const std::vector<std::string>& paths);

// Short display name: the file name without its trace extension ("gpt2_train.default").
std::string trace_display_name(const std::string& path);

}  // namespace fraglab
