#include "allocators/pool_adaptors.h"

#include <vector>

namespace fraglab {
namespace {

// One instance per pool. The engine hands back a block's handle on free, so the handle names a
// slot that remembers the block's pool and its instance's own handle.
class SeparatePoolsPolicy final : public Policy {
 public:
  SeparatePoolsPolicy(std::function<std::unique_ptr<Policy>()> make, std::vector<bool> emptied_on_release)
      : make_(std::move(make)), emptied_on_release_(std::move(emptied_on_release)) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    auto b = instance(req.pool).allocate(req);
    if (!b) return std::nullopt;
    return Block{b->addr, b->size, put(Slot{req.pool, b->handle})};
  }
  void deallocate(const Block& block) override {
    Slot s = take(block.handle);
    instances_[s.pool].policy->deallocate(Block{block.addr, block.size, s.handle});
  }
  void free_requested(const Block& block) override {
    const Slot& s = slots_[block.handle];
    instances_[s.pool].policy->free_requested(Block{block.addr, block.size, s.handle});
  }
  // The default pools and every released pool give their cache back; a pool still owned keeps it.
  void empty_cache() override {
    for (Instance& i : instances_)
      if (i.policy && (&i == &instances_[0] || i.released)) i.policy->empty_cache();
  }
  void release_pool(PoolIndex pool) override {
    if (pool >= instances_.size()) return;
    instances_[pool].released = true;
    // A MemPool's destructor empties its cache right after releasing it (~MemPool's emptyCache(id)).
    if (instances_[pool].policy && pool < emptied_on_release_.size() && emptied_on_release_[pool])
      instances_[pool].policy->empty_cache();
  }

 private:
  struct Instance {
    std::unique_ptr<Policy> policy;
    bool released = false;
  };
  struct Slot {
    PoolIndex pool;
    uint64_t handle;
  };

  Policy& instance(PoolIndex pool) {
    if (pool >= instances_.size()) instances_.resize(pool + 1u);
    Instance& i = instances_[pool];
    if (!i.policy) i.policy = make_();
    i.released = false;  // a request in a released pool means a new owner
    return *i.policy;
  }
  uint64_t put(Slot s) {
    if (free_.empty()) {
      slots_.push_back(s);
      return slots_.size() - 1;
    }
    uint64_t h = free_.back();
    free_.pop_back();
    slots_[h] = s;
    return h;
  }
  Slot take(uint64_t h) {
    free_.push_back(h);
    return slots_[h];
  }

  std::function<std::unique_ptr<Policy>()> make_;
  std::vector<bool> emptied_on_release_;
  std::vector<Instance> instances_;
  std::vector<Slot> slots_;
  std::vector<uint64_t> free_;
};

class MergedPoolsPolicy final : public Policy {
 public:
  explicit MergedPoolsPolicy(std::unique_ptr<Policy> inner) : inner_(std::move(inner)) {}
  std::optional<Block> allocate(const AllocRequest& req) override {
    AllocRequest merged = req;
    merged.pool = 0;
    return inner_->allocate(merged);
  }
  void deallocate(const Block& block) override { inner_->deallocate(block); }
  void free_requested(const Block& block) override { inner_->free_requested(block); }
  void empty_cache() override { inner_->empty_cache(); }
  std::optional<std::vector<Block>> adopt_initial_state(const InitialState& state) override {
    return inner_->adopt_initial_state(state);
  }

 private:
  std::unique_ptr<Policy> inner_;
};

}  // namespace

std::unique_ptr<Policy> make_separate_pools_policy(std::function<std::unique_ptr<Policy>()> make_instance,
                                                   std::vector<bool> emptied_on_release) {
  return std::make_unique<SeparatePoolsPolicy>(std::move(make_instance), std::move(emptied_on_release));
}

std::unique_ptr<Policy> make_merged_pools_policy(std::unique_ptr<Policy> inner) {
  return std::make_unique<MergedPoolsPolicy>(std::move(inner));
}

}  // namespace fraglab
