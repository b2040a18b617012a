// NPUStepPlanner.cpp - records a training step's expandable-segment requests and plans their addresses
// for the steps that repeat it.
#include "csrc/core/NPUStepPlanner.h"

#include <algorithm>

namespace c10_npu::NPUCachingAllocator {

char* StepPlanner::propose(size_t size, nrtStream_t stream) {
  if (plan_.empty() || diverged_) return nullptr;
  const size_t next = requests_.size();
  if (overflow_ || next >= plan_.size() || plan_[next].size != size || plan_[next].stream != stream) {
    diverged_ = true;  // the request order changed: the indices no longer line up
    return nullptr;
  }
  const Placement& p = plan_[next];
  return p.alternate != nullptr && (step_ - plan_step_) % 2 == 1 ? p.alternate : p.ptr;
}

uint32_t StepPlanner::onAlloc(size_t size, nrtStream_t stream, bool proposed, bool planned) {
  if (planned) {
    ++stats_.hits;
  } else if (proposed) {
    ++stats_.misses;
    missed_ = true;
  }
  const uint32_t time = clock_++;
  if (overflow_ || requests_.size() >= kMaxRequests) {
    overflow_ = true;
    return kAlive;
  }
  const size_t index = requests_.size();
  const bool overlaps = index < previous_alive_.size() && previous_alive_[index] != 0;
  requests_.push_back(Request{size, stream, time, kAlive, overlaps});
  return static_cast<uint32_t>(index);
}

void StepPlanner::onFree(uint32_t step, uint32_t index) {
  const uint32_t time = clock_++;
  if (step == step_ && index < requests_.size()) {
    requests_[index].free_time = time;
  } else if (step + 1 == step_ && index < previous_alive_.size()) {
    previous_alive_[index] = 0;
  }
}

void StepPlanner::endStep(const std::vector<PlanSpace>& spaces,
                          const std::vector<std::pair<uint32_t, char*>>& live) {
  ++stats_.steps;
  if (!plan_.empty()) {
    const bool followed = !diverged_ && !missed_ && !overflow_ && requests_.size() == plan_.size();
    if (followed) {
      ++stats_.planned_steps;
      failures_ = 0;
    } else {
      plan_.clear();
      backOff();
    }
  }
  // A request overlapped its previous instance only if that was freed during this step: a block of
  // the same index that stays alive (optimizer state made in the first step) is another tensor.
  for (size_t i = 0; i < requests_.size() && i < previous_alive_.size(); ++i) {
    if (previous_alive_[i] != 0) requests_[i].overlaps_previous = false;
  }
  if (plan_.empty() && !overflow_ && !requests_.empty()) {
    if (wait_ > 0) {
      --wait_;
    } else {
      build(spaces, live);
      if (plan_.empty()) backOff();
    }
  }
  previous_alive_.assign(requests_.size(), 0);
  for (const auto& entry : live) {
    if (entry.first < previous_alive_.size()) previous_alive_[entry.first] = 1;
  }
  requests_.clear();
  clock_ = 0;
  overflow_ = diverged_ = missed_ = false;
  ++step_;
}

// After a plan the next step did not follow, or one that did not fit: plan again from the next step
// the first three times (the first steps of a training loop differ: the optimizer creates its state,
// loop variables start holding the previous step's tensors), then less and less often: a loop whose
// steps never repeat is not worth planning.
void StepPlanner::backOff() {
  ++failures_;
  wait_ = failures_ >= 3 ? (1u << std::min(failures_ - 2, 6u)) - 1 : 0;
}

void StepPlanner::reset() {
  plan_.clear();
  requests_.clear();
  previous_alive_.clear();
  clock_ = 0;
  overflow_ = diverged_ = missed_ = false;
  failures_ = wait_ = 0;
  ++step_;  // blocks recorded before keep an old step number: their frees are ignored
}

namespace {

using Range = std::pair<char*, char*>;

// The lowest address from `begin` where `size` bytes overlap none of the ranges of either list
// (each sorted by start): walks both in address order, moving past every range that starts before
// the candidate's end.
char* lowestFit(char* begin, size_t size, const std::vector<Range>& a, const std::vector<Range>& b) {
  char* at = begin;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() || j != b.end()) {
    const Range& next = (j == b.end() || (i != a.end() && i->first <= j->first)) ? *i++ : *j++;
    if (next.first >= at + size) break;
    at = std::max(at, next.second);
  }
  return at;
}

}  // namespace

// Offline placement of the recorded step. Requests still alive at its end keep their addresses
// (the next step's request of the same index reuses it once they are freed); those that overlap
// their next instance get a second address for every other step. The others, largest first, each
// go to the lowest address that no live block, unmapped page, second address or already placed
// request overlapping it in time occupies. A plan that does not fit in the mapped pages is dropped:
// planning never maps more than best fit did.
void StepPlanner::build(const std::vector<PlanSpace>& spaces,
                        const std::vector<std::pair<uint32_t, char*>>& live) {
  const size_t n = requests_.size();
  plan_.clear();
  for (const Request& r : requests_) plan_.push_back(Placement{r.size, r.stream, nullptr});
  plan_step_ = step_;
  // Per space: what no request may use at any time of the step.
  std::vector<std::vector<Range>> taken;
  for (const PlanSpace& space : spaces) taken.push_back(space.occupied);
  auto spaceOf = [&](nrtStream_t stream) -> int {
    for (size_t s = 0; s < spaces.size(); ++s) {
      if (spaces[s].stream == stream) return static_cast<int>(s);
    }
    return -1;
  };
  const std::vector<Range> none;
  for (const auto& [index, ptr] : live) {
    if (index >= n) continue;
    plan_[index].ptr = ptr;
    const int s = spaceOf(requests_[index].stream);
    if (!requests_[index].overlaps_previous || s < 0) continue;
    char* at = lowestFit(spaces[s].begin, requests_[index].size, taken[s], none);
    if (at + requests_[index].size > spaces[s].end) {
      plan_.clear();  // no room for a second address in what is mapped
      return;
    }
    plan_[index].alternate = at;
    taken[s].insert(std::upper_bound(taken[s].begin(), taken[s].end(), Range{at, at}),
                    Range{at, at + requests_[index].size});
  }
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < n; ++i) {
    if (plan_[i].ptr == nullptr && requests_[i].free_time != kAlive) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return requests_[a].size > requests_[b].size; });
  std::vector<uint32_t> placed;
  std::vector<Range> busy;
  for (uint32_t i : order) {
    const Request& r = requests_[i];
    const int s = spaceOf(r.stream);
    if (s < 0) {
      plan_.clear();
      return;
    }
    busy.clear();
    for (uint32_t j : placed) {
      const Request& o = requests_[j];
      if (o.stream == r.stream && o.alloc_time < r.free_time && r.alloc_time < o.free_time) {
        busy.emplace_back(plan_[j].ptr, plan_[j].ptr + o.size);
      }
    }
    std::sort(busy.begin(), busy.end());
    char* at = lowestFit(spaces[s].begin, r.size, taken[s], busy);
    if (at + r.size > spaces[s].end) {
      // The plan would need pages that best fit did without: keep best fit (and try again later).
      plan_.clear();
      return;
    }
    plan_[i].ptr = at;
    placed.push_back(i);
  }
  ++stats_.plans;
}

}  // namespace c10_npu::NPUCachingAllocator
