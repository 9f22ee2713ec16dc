// libFuzzer target for one trace reader, chosen at build time by FRAGLAB_FUZZ_FORMAT
// (a file extension: "pickle", "pickle.gz", "fltrace", "jsonl", "csv", "json"). The content picks
// the reader (traces/formats/format_sniff.h), so every target also exercises detection.
//
// The readers take paths (they stream from files), so each input is written to a
// file in /dev/shm first; that costs microseconds and keeps the target honest: it
// exercises exactly the code the CLI runs. Any exception other than FormatError, or
// any sanitizer report, is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "traces/io/format_error.h"
#include "traces/trace_io.h"

#ifndef FRAGLAB_FUZZ_FORMAT
#error "define FRAGLAB_FUZZ_FORMAT to the file extension of the reader under test"
#endif

static std::string input_path() {
  const char* dir = std::getenv("FRAGLAB_FUZZ_TMP");
  return std::string(dir ? dir : "/dev/shm") + "/fraglab-fuzz-" + std::to_string(getpid()) + "." + FRAGLAB_FUZZ_FORMAT;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = input_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    fraglab::Trace trace = fraglab::read_trace(path);
    (void)trace;
  } catch (const fraglab::FormatError&) {
    // The expected outcome for bad input.
  }
  return 0;
}
