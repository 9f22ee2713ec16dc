#include "device/address_space.h"

#include "device/cuda_address_space.h"

namespace fraglab {

namespace {

// Addresses only grow; a gap of one alignment unit follows every allocation. Since they are never
// reused, a long enough run reaches kAddressSpaceEnd: from then on every placement fails.
class BumpAddressSpace final : public AddressSpace {
 public:
  explicit BumpAddressSpace(uint64_t alignment) : alignment_(alignment) {}
  std::optional<Addr> place_segment(uint64_t size) override { return take(size); }
  void free_segment(Addr) override {}
  std::optional<Addr> place_range(uint64_t size) override { return take(size); }
  void free_range(Addr) override {}

 private:
  std::optional<Addr> take(uint64_t size) {
    Addr addr = next_;
    // Room for the allocation and the gap after it, checked without overflowing.
    if (addr > kAddressSpaceEnd || size > kAddressSpaceEnd - addr || kAddressSpaceEnd - addr - size < 2 * alignment_)
      return std::nullopt;
    next_ = (addr + size + alignment_ - 1) / alignment_ * alignment_ + alignment_;
    return addr;
  }
  uint64_t alignment_;
  Addr next_ = 1ull << 32;
};

}  // namespace

std::optional<AddressModel> parse_address_model(std::string_view name) {
  if (name == "cuda") return AddressModel::Cuda;
  if (name == "bump") return AddressModel::Bump;
  return std::nullopt;
}

const char* address_model_name(AddressModel model) { return model == AddressModel::Cuda ? "cuda" : "bump"; }

std::unique_ptr<AddressSpace> make_address_space(AddressModel model, uint64_t alignment) {
  if (model == AddressModel::Bump) return std::make_unique<BumpAddressSpace>(alignment);
  return std::make_unique<CudaAddressSpace>();
}

}  // namespace fraglab
