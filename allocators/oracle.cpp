// oracle: an offline planner that sees the whole trace and places every allocation by its
// lifetime, giving a near-optimal reserved peak to measure online policies against.
//
// Static memory planning as inference engines do it: greedy by size (Pisarchyk & Lee,
// "Efficient Memory Management for Deep Neural Net Inference", 2020; TFLite's
// GreedyBySizePlanner; XLA's GlobalDecreasingSizeBestFitHeap): see
// allocators/offline_plan.h. At replay it reserves one segment of the planned peak
// when the first block is needed and hands out the planned addresses; streams need no
// separate space because the plan already orders every lifetime. It gives the segment back
// on empty_cache when nothing is live.
#include <stdexcept>
#include <string>

#include "allocators/offline_plan.h"
#include "allocators/registry.h"

namespace fraglab {
namespace {

class Oracle final : public Policy {
 public:
  Oracle(Device& device, std::shared_ptr<const detail::OfflinePlan> plan) : device_(device), plan_(std::move(plan)) {}

  std::optional<Block> allocate(const AllocRequest& req) override {
    if (req.id == kTransientRequest) return std::nullopt;  // a recorded OOM: nothing planned for it
    if (req.event_index >= plan_->offset_at.size() || plan_->offset_at[req.event_index] == detail::kUnplanned ||
        plan_->size_at[req.event_index] < req.size)
      throw std::logic_error("oracle: allocation at event " + std::to_string(req.event_index) +
                             " is not in the planned trace");
    if (!base_) {
      base_ = device_.allocate_segment(std::max<uint64_t>(plan_->peak, 1), req.stream);
      if (!base_) return std::nullopt;
    }
    ++live_;
    return Block{*base_ + plan_->offset_at[req.event_index], plan_->size_at[req.event_index], 0};
  }

  void deallocate(const Block&) override { --live_; }

  void empty_cache() override {
    if (live_ || !base_) return;
    device_.free_segment(*base_, std::max<uint64_t>(plan_->peak, 1));
    base_.reset();
  }

 private:
  Device& device_;
  std::shared_ptr<const detail::OfflinePlan> plan_;  // shared with the bound's computation
  std::optional<Addr> base_;
  uint64_t live_ = 0;
};

}  // namespace

constexpr SizeOption kAlign{"align", 512, "block sizes round up to a multiple of this", kMaxOptionAlign};

PolicyInfo policy_info_oracle() {
  return {
      .name = "oracle",
      .summary = "offline planner: whole-trace lifetimes placed greedily by size in one segment (a near-optimal bound)",
      .origin =
          "Pisarchyk & Lee 2020, \"Efficient Memory Management for Deep Neural Net Inference\" (greedy by "
          "size); TFLite GreedyBySizePlanner; XLA GlobalDecreasingSizeBestFitHeap",
      .options = {kAlign},
      .make = [](const PolicyContext& ctx) -> std::unique_ptr<Policy> {
        uint64_t align = ctx.options.get(kAlign);
        if (align == 0 || (align & (align - 1))) throw PolicyConfigError("oracle: align must be a power of two");
        return std::make_unique<Oracle>(ctx.device, detail::shared_plan_greedy_by_size(*ctx.events, align));
      },
      .needs_whole_trace = true,
      .is_bound = true};  // it sees the future: what no online allocator can do
}

}  // namespace fraglab
