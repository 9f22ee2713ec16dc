// PyTorch memory snapshots encoded as JSON: the dict torch.cuda.memory._snapshot() returns,
// written with json.dump instead of pickle (PyTorch's MemoryViz opens both).
//
// One importer serves both encodings. The JSON text is transcoded, in a single SAX pass
// (nlohmann::json's SAX interface: no DOM is built), into the pickle *data* opcodes that
// Python's pickler writes for the same dict, and the result goes to parse_pytorch_snapshot()
// (traces/formats/pytorch/pytorch_snapshot.h) like any pickle. So whatever the importer learns, JSON snapshots
// learn too, and the two encodings of one snapshot give identical traces.
//
// What the transcoding keeps and loses: JSON arrays become lists (JSON has no tuple, so a
// segment_pool_id arrives as a list), numbers keep their kind (integers, up to 64 bits
// unsigned; floats), strings are memoized so repeated keys and frame texts are one object, as
// in a real pickle. Nesting deeper than kMaxJsonDepth (read_limits.h) is refused.
//
// Errors name the file and a byte offset in the JSON: syntax errors where nlohmann's parser
// stopped; the importer's errors at the opening brace of the entry, segment or block they are
// about (a side table maps the pickle's container offsets back to the JSON's).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "traces/io/read_limits.h"
#include "traces/trace_io.h"

namespace fraglab {

// `json` is the (already decompressed) text; `name` names it in errors. Throws FormatError.
Trace parse_json_snapshot(std::string_view json, const std::string& name, const ReadOptions& options);

// The transcoding step on its own (for tests): the pickle, and where its containers came from.
struct TranscodedSnapshot {
  std::string pickle;
  std::vector<std::pair<uint64_t, uint64_t>> origins;  // (pickle offset, JSON offset) of containers, ascending

  // The JSON offset of the container whose pickle opcode is at, or last before, `pickle_offset`.
  uint64_t json_offset(uint64_t pickle_offset) const;
};
TranscodedSnapshot transcode_json_snapshot(std::string_view json, const std::string& name);

}  // namespace fraglab
