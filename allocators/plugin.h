// Policy plugins: policies compiled outside fraglab and loaded at run time (`--plugin PATH.so`).
//
// A plugin is a shared library built against the installed package alone (find_package(fraglab),
// target fraglab::plugin; examples/out_of_tree_policy/) whose one entry point is written by
// FRAGLAB_PLUGIN. The loader (load_policy_plugin) dlopens it, reads the entry point's API version and
// C++ ABI tag, refuses a mismatch with a clear error, then lets the plugin add its policies to the
// registry, where every command finds them by name like the built-in ones.
//
// Why a version check and not a C interface: a policy *is* a C++ object (allocators/policy.h) handed
// a Device& and PolicyOptions, and PolicyInfo carries std::function factories; wrapping all of that in
// C would be a second API to keep in step. Instead the layouts are pinned by FRAGLAB_PLUGIN_API_VERSION
// (raised whenever Policy, PolicyInfo, PolicyContext, Device or PolicyOptions change) and the
// compiler's C++ ABI tag. The plugin resolves fraglab's own functions (PolicyOptions::get_size, ...)
// from the executable that loads it, which exports them (CMake ENABLE_EXPORTS).
#pragma once

#include <string>

#include "allocators/registry.h"

// Raise on any change to the layout or meaning of the types a plugin sees (see above).
#define FRAGLAB_PLUGIN_API_VERSION 1

// The C++ ABI a plugin was built with: libstdc++'s string/list ABI and the compiler's ABI version.
#define FRAGLAB_PLUGIN_STRINGIFY2(x) #x
#define FRAGLAB_PLUGIN_STRINGIFY(x) FRAGLAB_PLUGIN_STRINGIFY2(x)
#define FRAGLAB_PLUGIN_ABI_TAG \
  "gxx-abi-" FRAGLAB_PLUGIN_STRINGIFY(__GXX_ABI_VERSION) "-cxx11-" FRAGLAB_PLUGIN_STRINGIFY(_GLIBCXX_USE_CXX11_ABI)

namespace fraglab {

// Handed to a plugin's registration function: add() registers one policy (its name must be new).
class PluginRegistrar {
 public:
  virtual void add(PolicyInfo info) = 0;

 protected:
  ~PluginRegistrar() = default;
};

// What FRAGLAB_PLUGIN's entry point returns. `api_version` comes first and stays first in every
// version, so that a loader can read it from a plugin of any version.
struct PluginEntry {
  int api_version;
  const char* abi_tag;
  const char* name;
  unsigned policy_info_size;  // sizeof(PolicyInfo) as the plugin saw it: one more layout check
  void (*register_policies)(PluginRegistrar&);
};

// Loads the plugin at `path` (a path with a '/', or a name the dynamic loader searches for) and
// registers its policies. Throws PolicyConfigError naming the path: not loadable (the loader's
// message), no entry point, another API version or ABI, a policy name already taken. Call before
// anything holds a PolicyInfo pointer (registering may move the registry). A plugin stays loaded.
void load_policy_plugin(const std::string& path);

}  // namespace fraglab

// The plugin's entry point: FRAGLAB_PLUGIN("my-plugin", my_register) where
// `void my_register(fraglab::PluginRegistrar& r) { r.add({...}); }`.
#define FRAGLAB_PLUGIN(plugin_name, register_fn)                                                             \
  extern "C" __attribute__((visibility("default"))) const fraglab::PluginEntry* fraglab_plugin_entry() {     \
    static const fraglab::PluginEntry entry{FRAGLAB_PLUGIN_API_VERSION, FRAGLAB_PLUGIN_ABI_TAG, plugin_name, \
                                            sizeof(fraglab::PolicyInfo), register_fn};                       \
    return &entry;                                                                                           \
  }
