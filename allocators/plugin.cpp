#include "allocators/plugin.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <set>
#include <stdexcept>

namespace fraglab {

namespace {

// A plugin's policy, seen through its plugin: what it throws comes out as a std::runtime_error naming
// the policy and the plugin (a plugin's bug is the plugin's error, exit 2, in every command), and
// something that is not a std::exception is caught here, where unwinding still removes temporary files.
class PluginPolicy final : public Policy {
 public:
  PluginPolicy(std::unique_ptr<Policy> inner, std::string who) : inner_(std::move(inner)), who_(std::move(who)) {}
  std::optional<Block> allocate(const AllocRequest& req) override {
    return guarded("allocate", [&] { return inner_->allocate(req); });
  }
  void deallocate(const Block& block) override {
    guarded("deallocate", [&] { inner_->deallocate(block); });
  }
  void free_requested(const Block& block) override {
    guarded("free_requested", [&] { inner_->free_requested(block); });
  }
  void empty_cache() override {
    guarded("empty_cache", [&] { inner_->empty_cache(); });
  }
  void release_pool(PoolIndex pool) override {
    guarded("release_pool", [&] { inner_->release_pool(pool); });
  }
  std::optional<std::vector<Block>> adopt_initial_state(const InitialState& state) override {
    return guarded("adopt_initial_state", [&] { return inner_->adopt_initial_state(state); });
  }
  bool enforces_capacity() const override { return inner_->enforces_capacity(); }

 private:
  template <class F>
  auto guarded(const char* call, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const std::exception& e) {  // the device's "device misuse" included: the plugin misused it
      throw std::runtime_error(who_ + " failed in " + call + ": " + e.what());
    } catch (...) {
      throw std::runtime_error(who_ + " threw something that is not a std::exception in " + call);
    }
  }
  std::unique_ptr<Policy> inner_;
  std::string who_;
};

class RegistryRegistrar final : public PluginRegistrar {
 public:
  explicit RegistryRegistrar(std::string path) : path_(std::move(path)) {}
  void add(PolicyInfo info) override {
    if (!info.make) throw PolicyConfigError("plugin " + path_ + ": policy '" + info.name + "' has no factory");
    std::string who = "policy '" + info.name + "' (plugin " + path_ + ")";
    info.make = [make = std::move(info.make), who](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
      std::unique_ptr<Policy> policy;
      try {
        policy = make(ctx);
      } catch (const PolicyConfigError&) {
        throw;  // its options, worded by PolicyOptions
      } catch (const std::exception& e) {
        throw PolicyConfigError(who + ": its factory failed: " + e.what());
      } catch (...) {
        throw PolicyConfigError(who + ": its factory threw something that is not a std::exception");
      }
      if (!policy) throw PolicyConfigError(who + ": its factory returned no policy (a null pointer)");
      return std::make_unique<PluginPolicy>(std::move(policy), who);
    };
    add_policy(std::move(info), "plugin " + path_);
  }

 private:
  std::string path_;
};

// The file's ELF header, program and section header tables, and loadable segments all lie inside the
// file: the dynamic loader maps a truncated library and faults (SIGBUS) on the pages past its end.
// Returns why not, or "" when it looks whole. A name without '/' is the loader's to search: not checked.
std::string elf_problem(const std::string& path) {
  if (path.find('/') == std::string::npos) return "";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  auto read_at = [&](uint64_t offset, void* out, size_t bytes) {
    return offset <= size && bytes <= size - offset &&
           ::pread(fd, out, bytes, static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes);
  };
  std::string why;
  Elf64_Ehdr h{};
  auto table_fits = [&](uint64_t offset, uint64_t count, uint64_t entry) {
    return count == 0 || (entry != 0 && offset <= size && count <= (size - offset) / entry);
  };
  if (!read_at(0, &h, sizeof h) || std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) {
    why = "not a shared library (no ELF header)";
  } else if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_phentsize != sizeof(Elf64_Phdr)) {
    why = "not a 64-bit ELF shared library";
  } else if (!table_fits(h.e_phoff, h.e_phnum, h.e_phentsize) ||
             (h.e_shnum != 0 && !table_fits(h.e_shoff, h.e_shnum, h.e_shentsize))) {
    why = "truncated or damaged: its header tables lie past the end of the file (" + std::to_string(size) + " bytes)";
  } else {
    for (uint64_t i = 0; i < h.e_phnum && why.empty(); ++i) {
      Elf64_Phdr ph{};
      if (!read_at(h.e_phoff + i * sizeof ph, &ph, sizeof ph)) {
        why = "truncated: cannot read its program headers";
      } else if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)) {
        why = "truncated: a loadable segment ends at byte " + std::to_string(ph.p_offset + ph.p_filesz) +
              ", past the end of the file (" + std::to_string(size) + " bytes)";
      }
    }
  }
  ::close(fd);
  return why;
}

}  // namespace

void load_policy_plugin(const std::string& path) {
  auto fail = [&](const std::string& why) { throw PolicyConfigError("plugin " + path + ": " + why); };
  if (std::string why = elf_problem(path); !why.empty()) fail(why);
  // RTLD_NOW: a symbol the executable does not provide is reported here, not at the first call.
  // RTLD_LOCAL: two plugins' own helpers do not collide.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail(std::string("cannot load: ") + dlerror());
  // The loader hands back the same handle for a library it has loaded (another path to the same file).
  static std::set<void*> loaded;
  if (!loaded.insert(handle).second)
    fail("already loaded (given twice, or by another path to the same file): its policies are registered once");
  using EntryFn = const PluginEntry* (*)();
  auto entry_fn = reinterpret_cast<EntryFn>(dlsym(handle, "fraglab_plugin_entry"));
  if (!entry_fn) fail("not a fraglab plugin (no fraglab_plugin_entry; write one with FRAGLAB_PLUGIN)");
  const PluginEntry* entry = entry_fn();
  if (!entry) fail("its entry point returned nothing");
  if (entry->api_version != FRAGLAB_PLUGIN_API_VERSION)
    fail("built for plugin API version " + std::to_string(entry->api_version) + ", this fraglab has version " +
         std::to_string(FRAGLAB_PLUGIN_API_VERSION) + ": rebuild it against this fraglab's headers");
  const std::string tag = entry->abi_tag ? entry->abi_tag : "(none)";
  if (tag != FRAGLAB_PLUGIN_ABI_TAG)
    fail("built with another C++ ABI (" + tag + "; this fraglab " + FRAGLAB_PLUGIN_ABI_TAG +
         "): rebuild it with the compiler fraglab was built with");
  if (entry->policy_info_size != sizeof(PolicyInfo))
    fail("built against other fraglab headers: PolicyInfo is " + std::to_string(entry->policy_info_size) +
         " bytes there, " + std::to_string(sizeof(PolicyInfo)) + " here (same ABI " + tag +
         "): rebuild it against this fraglab's headers");
  if (!entry->register_policies) fail("its entry point names no registration function");
  RegistryRegistrar registrar(path);
  try {
    entry->register_policies(registrar);
  } catch (const PolicyConfigError&) {
    throw;
  } catch (const std::exception& e) {
    fail(std::string("its registration function failed: ") + e.what());
  } catch (...) {
    fail("its registration function threw something that is not a std::exception");
  }
  // Never dlclose: the registered factories and the policies they make are the plugin's code.
}

}  // namespace fraglab
