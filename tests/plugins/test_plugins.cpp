// Policy plugins that misbehave, one kind per build (tests/CMakeLists.txt defines the kind): the
// loader and the replay engine must turn each into a clear error (tests/traces/test_hardening.cpp).
//   null_factory       its factory returns a null pointer
//   register_throws    its registration function throws a std::runtime_error
//   register_throws_int  ... throws an int
//   abi_size           built "against other headers": PolicyInfo's size differs, the ABI tag is the same
//   misbehaving        policy 'misbehaving:mode=M' hands out wrong blocks (overlap, tiny, zero, outside,
//                      freed) or throws an int (throw_int) at its 3rd allocation; plain passthrough before
#include "allocators/plugin.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

using namespace fraglab;

class Misbehaving final : public Policy {
 public:
  Misbehaving(Device& device, std::string mode) : device_(device), mode_(std::move(mode)) {}
  // Each block its own segment of at least 16 MiB (so a block placed over the first one lies in memory).
  std::optional<Block> allocate(const AllocRequest& req) override {
    const uint64_t size = std::max<uint64_t>((req.size + 511) / 512 * 512, uint64_t{16} << 20);
    if (++allocs_ == 3) {
      if (mode_ == "overlap") return Block{first_, req.size, 0};
      if (mode_ == "tiny") {
        auto a = device_.allocate_segment(size, req.stream);
        return a ? std::optional<Block>(Block{*a, 1, size}) : std::nullopt;  // handle: the segment's size
      }
      if (mode_ == "zero") {
        auto a = device_.allocate_segment(size, req.stream);
        return a ? std::optional<Block>(Block{*a, 0, size}) : std::nullopt;
      }
      if (mode_ == "outside") return Block{uint64_t{1} << 46, size, 0};
      if (mode_ == "freed") {
        auto a = device_.allocate_segment(size, req.stream);
        if (!a) return std::nullopt;
        device_.free_segment(*a, size);
        return Block{*a, size, size};
      }
      if (mode_ == "throw_int") throw 42;
    }
    auto a = device_.allocate_segment(size, req.stream);
    if (!a) return std::nullopt;
    if (allocs_ == 1) first_ = *a;
    return Block{*a, size, size};
  }
  void deallocate(const Block& block) override { device_.free_segment(block.addr, block.handle); }
  void empty_cache() override {}

 private:
  Device& device_;
  std::string mode_;
  uint64_t allocs_ = 0;
  Addr first_ = 0;
};

void register_policies(PluginRegistrar& registrar) {
  PolicyInfo info;
  info.name = "misbehaving_" FRAGLAB_TEST_PLUGIN_KIND;
  info.summary = "a test plugin that misbehaves";
  info.options = {{"mode", "overlap", "what goes wrong"}};
#if defined(FRAGLAB_TEST_PLUGIN_null_factory)
  info.make = [](const PolicyContext&) -> std::unique_ptr<Policy> { return nullptr; };
#else
  info.make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
    return std::make_unique<Misbehaving>(ctx.device, ctx.options.get_string("mode", "overlap"));
  };
#endif
#if defined(FRAGLAB_TEST_PLUGIN_register_throws)
  throw std::runtime_error("the registration's own error");
#elif defined(FRAGLAB_TEST_PLUGIN_register_throws_int)
  throw 7;
#endif
  registrar.add(std::move(info));
}

}  // namespace

#if defined(FRAGLAB_TEST_PLUGIN_abi_size)
extern "C" __attribute__((visibility("default"))) const fraglab::PluginEntry* fraglab_plugin_entry() {
  static const fraglab::PluginEntry entry{FRAGLAB_PLUGIN_API_VERSION, FRAGLAB_PLUGIN_ABI_TAG, "test",
                                          sizeof(fraglab::PolicyInfo) + 8, register_policies};
  return &entry;
}
#else
FRAGLAB_PLUGIN("test", register_policies)
#endif
