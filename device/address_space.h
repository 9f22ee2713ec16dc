// AddressSpace: where a simulated device puts its segments and reserved ranges.
//
// Allocators that break ties by address (PyTorch's pools order equal-sized free blocks by address,
// bestfit/firstfit/nextfit by position) decide differently depending on where cudaMalloc put their
// segments, so a prediction is only as good as its address model. Two models:
//  - Cuda (default): the CUDA driver's placement as measured on an H100 (device/cuda_address_space.h,
//    tools/cuda_addresses/README.md): a fresh context, chunks of 32 MiB carved top-down, small
//    allocations packed into the free tails of the newest chunks, freed chunks reused.
//  - Bump: addresses only grow and are never reused, with a gap between allocations so that no two
//    segments ever look contiguous (readable block maps; stale addresses in a policy stand out).
// Two more say where a replay of a recording takes its addresses from (SimulatedGpu, sim/replay_simulated.h);
// an AddressSpace itself is one of the two above:
//  - Recorded: the recording's own, wherever the replay asks for the segment the recording asked for next
//    (HintedDevice over the bump model, whose addresses keep away from the recorded ones).
//  - Auto: Recorded for the model of the allocator that made the recording under its own settings, which
//    makes the recorded calls; Cuda for everything else.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "traces/trace.h"

namespace fraglab {

enum class AddressModel { Cuda, Bump, Recorded, Auto };

// "cuda" / "bump" / "recorded" / "auto"; nullopt for anything else.
std::optional<AddressModel> parse_address_model(std::string_view name);
const char* address_model_name(AddressModel model);

// Every address either model hands out lies below 2^48, the most a GPU's virtual address space or a
// PyTorch block address holds: past it the device is out of memory, as a real one would be.
inline constexpr Addr kAddressSpaceEnd = Addr{1} << 48;

class AddressSpace {
 public:
  virtual ~AddressSpace() = default;
  // cudaMalloc / cudaFree: where a segment of `size` bytes goes (nullopt: no room left below
  // kAddressSpaceEnd); freeing gives the place back.
  virtual std::optional<Addr> place_segment(uint64_t size) = 0;
  virtual void free_segment(Addr addr) = 0;
  // cuMemAddressReserve / cuMemAddressFree.
  virtual std::optional<Addr> place_range(uint64_t size) = 0;
  virtual void free_range(Addr addr) = 0;
  // The same at a place the caller chose (a recording's): false, and nothing taken, when any of
  // [addr, addr+size) is handed out already or lies past kAddressSpaceEnd. Later placements go
  // around it; freed with free_segment / free_range.
  virtual bool place_segment_at(Addr addr, uint64_t size) = 0;
  virtual bool place_range_at(Addr addr, uint64_t size) = 0;
};

// `alignment`: the bump model's segment alignment (the CUDA model measures its own). Recorded is the
// bump model (the space under the recorded addresses), Auto the CUDA model.
std::unique_ptr<AddressSpace> make_address_space(AddressModel model, uint64_t alignment);

}  // namespace fraglab
