// size_class_cache: a caching allocator that never splits: each request is rounded up to a size
// class, a freed block waits in its (stream, class) bin for the next request of that class, and a
// miss is one new device segment of the class's size. empty_cache() returns every waiting block.
//
// Models the simplest caching allocators (Chainer's and early CuPy's memory pools before they
// learned to split, many hand-written tensor caches): no fragmentation *inside* segments, at the
// price of the rounding and of blocks stranded in classes nobody asks for again. The classes are
// PyTorch's roundup_power2_divisions: each power of two cut into `divisions` equal steps.
//
// It is the example of a policy written outside fraglab (docs/architecture.md, "Writing a policy
// out of tree"): one file, built against the installed package, loaded with --plugin.
#include <fraglab/allocators/plugin.h>  // via fraglab::plugin; "allocators/plugin.h" works too

#include <bit>
#include <map>
#include <vector>

namespace {

using namespace fraglab;

class SizeClassCache final : public Policy {
 public:
  SizeClassCache(Device& device, uint64_t divisions) : device_(device), divisions_(divisions) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    uint64_t size = size_class(req.size);
    auto& bin = bins_[{req.stream, size}];
    if (!bin.empty()) {
      Block block = bin.back();
      bin.pop_back();
      return block;
    }
    auto addr = device_.allocate_segment(size, req.stream);
    if (!addr) {  // out of memory: give the cache back and try once more, as caching allocators do
      empty_cache();
      addr = device_.allocate_segment(size, req.stream);
      if (!addr) return std::nullopt;
    }
    return Block{*addr, size, req.stream};  // the handle remembers the stream for deallocate
  }

  void deallocate(const Block& block) override {
    bins_[{static_cast<StreamIndex>(block.handle), block.size}].push_back(block);
  }

  void empty_cache() override {
    for (auto& [key, bin] : bins_)
      for (const Block& block : bin) device_.free_segment(block.addr, block.size);
    bins_.clear();
  }

 private:
  // 512 B granularity below 1 MiB; above, the next of `divisions` steps between two powers of two.
  uint64_t size_class(uint64_t size) const {
    size = std::max<uint64_t>(size, 1);
    if (size <= (1u << 20)) return (size + 511) / 512 * 512;
    uint64_t low = std::bit_floor(size);
    uint64_t step = std::max<uint64_t>(low / divisions_, 512);
    return (size + step - 1) / step * step;
  }

  Device& device_;
  uint64_t divisions_;
  std::map<std::pair<StreamIndex, uint64_t>, std::vector<Block>> bins_;
};

void register_policies(PluginRegistrar& registrar) {
  PolicyInfo info;
  info.name = "size_class_cache";
  info.summary = "never splits: requests round up to a size class and reuse freed blocks of that class";
  info.origin = "Chainer/early CuPy memory pools; classes from PyTorch's roundup_power2_divisions";
  info.options = {{"divisions", "4", "steps each power of two is cut into above 1 MiB (1-64)"}};
  info.make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
    auto divisions = static_cast<uint64_t>(ctx.options.get_int("divisions", 4, 1, 64));
    return std::make_unique<SizeClassCache>(ctx.device, divisions);
  };
  registrar.add(std::move(info));
}

}  // namespace

FRAGLAB_PLUGIN("size_class_cache", register_policies)
