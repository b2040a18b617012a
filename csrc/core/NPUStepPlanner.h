// NPUStepPlanner.h - plans the addresses of a recurring training step's allocations in the
// expandable segments: it records one step's requests (sizes, order, lifetimes), places them offline
// (largest first, each at the lowest address free over its whole lifetime) and proposes those
// addresses to the next steps while their requests follow the recorded sequence.
#pragma once

#include <npu/runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace c10_npu::NPUCachingAllocator {

// Address space a plan may use: one stream's expandable segment, with what is unavailable in it
// for the whole of the next step (live blocks, pages that are not mapped).
struct PlanSpace {
  nrtStream_t stream;
  char* begin;
  char* end;
  std::vector<std::pair<char*, char*>> occupied;  // [first, last) ranges
};

// What the planner has done, for tests and the benchmark's analysis.
struct StepPlanStats {
  uint64_t steps = 0;        // step boundaries seen
  uint64_t plans = 0;        // plans built (that fit in the mapped pages)
  uint64_t planned_steps = 0;  // steps whose every request was served from the plan
  uint64_t hits = 0;         // requests served at their planned address
  uint64_t misses = 0;       // planned requests whose address was taken (served by best fit)
};

// Used under the allocator's lock. Steps are delimited by endStep() (torch_npu calls it after every
// optimizer step); without step boundaries it records at most kMaxRequests requests and proposes
// nothing.
class StepPlanner {
 public:
  static constexpr size_t kMaxRequests = 4096;  // larger steps are not planned (planning is O(n^2))

  // The planned address for the next request, or nullptr (no plan, the step left the recorded
  // sequence, or the request was not planned). A different size or stream than recorded ends the
  // plan's use for the rest of the step.
  char* propose(size_t size, nrtStream_t stream);
  // A request served (at `ptr`); `planned` says whether that is the proposed address. Returns the
  // request's index in this step, which the block keeps for onFree().
  uint32_t onAlloc(size_t size, nrtStream_t stream, bool proposed, bool planned);
  // The block of request `index` of step `step` is free again.
  void onFree(uint32_t step, uint32_t index);
  uint32_t step() const { return step_; }

  // Ends a step. `live` maps this step's requests still alive to their blocks' addresses (they keep
  // them in the next plan); `spaces` is where the plan may put the others. Keeps a plan the step
  // followed, else plans from this step's requests.
  void endStep(const std::vector<PlanSpace>& spaces,
               const std::vector<std::pair<uint32_t, char*>>& live);
  // Forgets the plan and the recording (the cache was emptied or the settings changed).
  void reset();
  const StepPlanStats& stats() const { return stats_; }

 private:
  static constexpr uint32_t kAlive = UINT32_MAX;
  struct Request {
    size_t size;
    nrtStream_t stream;
    uint32_t alloc_time;
    uint32_t free_time = kAlive;  // in this step's clock; kAlive: still allocated at its end
    // The previous step's request of the same index was still alive when this one was made, and
    // was freed later in this step (a loop variable such as `loss` holds the last step's tensor
    // until the new one replaces it).
    bool overlaps_previous = false;
  };
  struct Placement {
    size_t size;
    nrtStream_t stream;
    char* ptr;  // nullptr: left to best fit
    // A request that outlives its step and overlaps its next instance alternates between `ptr`
    // (where its live block is) and `alternate`, one step each; nullptr otherwise.
    char* alternate = nullptr;
  };
  void build(const std::vector<PlanSpace>& spaces,
             const std::vector<std::pair<uint32_t, char*>>& live);
  void backOff();

  std::vector<Request> requests_;  // this step's, in order
  std::vector<uint8_t> previous_alive_;  // per request of the previous step: not freed yet
  std::vector<Placement> plan_;
  uint32_t plan_step_ = 0;    // the step the plan was built from
  uint32_t step_ = 1;
  uint32_t clock_ = 0;        // allocations and frees so far in this step
  bool overflow_ = false;     // more than kMaxRequests requests in this step
  bool diverged_ = false;     // this step left the plan's sequence
  bool missed_ = false;       // a planned address was taken
  uint32_t failures_ = 0;     // plans in a row that the next step did not follow
  uint32_t wait_ = 0;         // steps to let pass before planning again
  StepPlanStats stats_;
};

}  // namespace c10_npu::NPUCachingAllocator
