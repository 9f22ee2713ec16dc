#include "allocators/plugin.h"

#include <dlfcn.h>

namespace fraglab {

namespace {

class RegistryRegistrar final : public PluginRegistrar {
 public:
  explicit RegistryRegistrar(std::string path) : path_(std::move(path)) {}
  void add(PolicyInfo info) override {
    if (!info.make) throw PolicyConfigError("plugin " + path_ + ": policy '" + info.name + "' has no factory");
    add_policy(std::move(info), "plugin " + path_);
  }

 private:
  std::string path_;
};

}  // namespace

void load_policy_plugin(const std::string& path) {
  auto fail = [&](const std::string& why) { throw PolicyConfigError("plugin " + path + ": " + why); };
  // RTLD_NOW: a symbol the executable does not provide is reported here, not at the first call.
  // RTLD_LOCAL: two plugins' own helpers do not collide.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail(std::string("cannot load: ") + dlerror());
  using EntryFn = const PluginEntry* (*)();
  auto entry_fn = reinterpret_cast<EntryFn>(dlsym(handle, "fraglab_plugin_entry"));
  if (!entry_fn) fail("not a fraglab plugin (no fraglab_plugin_entry; write one with FRAGLAB_PLUGIN)");
  const PluginEntry* entry = entry_fn();
  if (!entry) fail("its entry point returned nothing");
  if (entry->api_version != FRAGLAB_PLUGIN_API_VERSION)
    fail("built for plugin API version " + std::to_string(entry->api_version) + ", this fraglab has version " +
         std::to_string(FRAGLAB_PLUGIN_API_VERSION) + ": rebuild it against this fraglab's headers");
  if (std::string(entry->abi_tag ? entry->abi_tag : "") != FRAGLAB_PLUGIN_ABI_TAG ||
      entry->policy_info_size != sizeof(PolicyInfo))
    fail(std::string("built with another C++ ABI (") + (entry->abi_tag ? entry->abi_tag : "?") + ", this fraglab " +
         FRAGLAB_PLUGIN_ABI_TAG + "): rebuild it with the compiler fraglab was built with");
  if (!entry->register_policies) fail("its entry point names no registration function");
  RegistryRegistrar registrar(path);
  entry->register_policies(registrar);
  // Never dlclose: the registered factories and the policies they make are the plugin's code.
}

}  // namespace fraglab
