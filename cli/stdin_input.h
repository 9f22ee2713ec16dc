// `-` as a trace: standard input, as PyTorch's _memory_viz.py reads it (`gunzip -c s.pickle.gz | fraglab info -`).
// The readers open a trace by path and read it more than once (the format is sniffed from its first bytes, then
// read), so standard input becomes a file: itself where it is one (`fraglab info - < s.pickle`), else a copy
// written in 1 MiB pieces to a temporary file that is unlinked at once (nothing is left behind, whatever ends
// the process) and put in standard input's place. Readers open /dev/stdin, which outputs name. Memory stays bounded,
// and the readers' limits (docs/limits.md) apply to the bytes received, as they do to a file of that size; gzip and the
// format are recognised from the bytes, as for any file.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace fraglab::cli {

// The path a reader opens for `path`: `path` itself, or for "-" standard input as a file (/dev/stdin).
// Throws std::invalid_argument when "-" is given twice (standard input is read once) or cannot be read.
std::string input_path(const std::string& path);

// Makes a trace argument read standard input for "-" (each value, for a list of traces).
CLI::Option* dash_reads_stdin(CLI::Option* option);

// `message` with the file standard input became named "-" again, so errors name what the user typed.
std::string name_stdin(std::string message);

}  // namespace fraglab::cli
