#include "device/address_space.h"

#include "device/cuda_address_space.h"
#include "device/tiered_map.h"

namespace fraglab {

namespace {

// Addresses only grow; a gap of one alignment unit follows every allocation. Since they are never
// reused, a long enough run reaches kAddressSpaceEnd: from then on every placement fails. Places
// taken by place_*_at (a recording's addresses, anywhere) are jumped over, gap included.
class BumpAddressSpace final : public AddressSpace {
 public:
  explicit BumpAddressSpace(uint64_t alignment) : alignment_(alignment) {}
  std::optional<Addr> place_segment(uint64_t size) override { return take(size); }
  void free_segment(Addr addr) override { live_.erase(addr); }
  std::optional<Addr> place_range(uint64_t size) override { return take(size); }
  void free_range(Addr addr) override { live_.erase(addr); }
  bool place_segment_at(Addr addr, uint64_t size) override { return take_at(addr, size); }
  bool place_range_at(Addr addr, uint64_t size) override { return take_at(addr, size); }

 private:
  std::optional<Addr> take(uint64_t size) {
    for (;;) {
      Addr addr = next_;
      // Room for the allocation and the gap after it, checked without overflowing.
      if (addr > kAddressSpaceEnd || size > kAddressSpaceEnd - addr || kAddressSpaceEnd - addr - size < 2 * alignment_)
        return std::nullopt;
      Addr next = (addr + size + alignment_ - 1) / alignment_ * alignment_ + alignment_;
      if (auto taken = overlap(addr, next - addr)) {  // a placed stretch is in the way: past it
        next_ = (taken->first + taken->second + alignment_ - 1) / alignment_ * alignment_ + alignment_;
        continue;
      }
      next_ = next;
      live_.emplace(addr, size);
      return addr;
    }
  }
  bool take_at(Addr addr, uint64_t size) {
    if (addr > kAddressSpaceEnd || size > kAddressSpaceEnd - addr || overlap(addr, size)) return false;
    live_.emplace(addr, size);
    return true;
  }
  // A live allocation that overlaps [addr, addr+size), if any.
  std::optional<std::pair<Addr, uint64_t>> overlap(Addr addr, uint64_t size) const {
    auto it = live_.lower_bound(addr);
    if (it != live_.end() && it->first < addr + size) return *it;
    if (it != live_.begin() && std::prev(it)->first + std::prev(it)->second > addr) return *std::prev(it);
    return std::nullopt;
  }

  uint64_t alignment_;
  Addr next_ = 1ull << 32;
  TieredMap<Addr, uint64_t> live_;  // what is handed out now (start -> bytes)
};

}  // namespace

namespace {
// The models by name: the table the option's parser and the reports share.
constexpr std::pair<AddressModel, const char*> kAddressModelNames[] = {{AddressModel::Cuda, "cuda"},
                                                                       {AddressModel::Bump, "bump"},
                                                                       {AddressModel::Recorded, "recorded"},
                                                                       {AddressModel::Auto, "auto"}};
}  // namespace

std::optional<AddressModel> parse_address_model(std::string_view name) {
  for (const auto& [model, text] : kAddressModelNames)
    if (name == text) return model;
  return std::nullopt;
}

const char* address_model_name(AddressModel model) {
  for (const auto& [m, text] : kAddressModelNames)
    if (m == model) return text;
  return "?";
}

std::unique_ptr<AddressSpace> make_address_space(AddressModel model, uint64_t alignment) {
  if (model == AddressModel::Bump || model == AddressModel::Recorded)
    return std::make_unique<BumpAddressSpace>(alignment);
  return std::make_unique<CudaAddressSpace>();
}

}  // namespace fraglab
