// NPUPrivatePools.cpp - private pools of the caching allocator: the memory of graph captures and of
// torch.npu.MemPool, kept apart from the shared pools by a token in the blocks' stream field.
#include <c10/util/Exception.h>

#include <algorithm>

#include "csrc/core/NPUDeviceCachingAllocator.h"

namespace c10_npu::NPUCachingAllocator {
namespace {

// Tokens are addresses no stream handle can have (runtime handles are small integers).
nrtStream_t nextToken() {
  static std::atomic<uintptr_t> next{0};
  return reinterpret_cast<nrtStream_t>((uintptr_t{0xfffe} << 48) | next.fetch_add(1));
}

}  // namespace

DeviceCachingAllocator::PrivatePool& DeviceCachingAllocator::poolFor(c10::MempoolId_t id) {
  auto it = private_pools_.find(id);
  if (it == private_pools_.end()) {
    it = private_pools_.emplace(id, PrivatePool{nextToken(), 0}).first;
    pool_of_token_[it->second.token] = id;
  }
  return it->second;
}

void DeviceCachingAllocator::retainPool(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  poolFor(id).use_count++;
}

void DeviceCachingAllocator::beginAllocateToPool(c10::MempoolId_t id, std::function<bool(nrtStream_t)> filter) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& route : pool_routes_) {
    TORCH_CHECK(route.first != id, "memory pool (", id.first, ", ", id.second,
                ") already receives allocations on npu:", device_, "; end that first");
  }
  poolFor(id).use_count++;
  pool_routes_.emplace_back(id, std::move(filter));
}

void DeviceCachingAllocator::endAllocateToPool(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_routes_.erase(std::remove_if(pool_routes_.begin(), pool_routes_.end(),
                                    [&](const auto& route) { return route.first == id; }),
                     pool_routes_.end());
}

void DeviceCachingAllocator::releasePool(c10::MempoolId_t id, bool release_now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = private_pools_.find(id);
  if (it == private_pools_.end() || it->second.use_count == 0) return;
  if (--it->second.use_count > 0 || !release_now) return;
  releasePoolMemory(it->second.token);
  forgetIfEmpty(it);
}

void DeviceCachingAllocator::forgetIfEmpty(std::map<c10::MempoolId_t, PrivatePool>::iterator pool) {
  for (const auto& segment : segments_) {
    if (segment->stream == pool->second.token) return;  // blocks still held (a graph's outputs)
  }
  pool_of_token_.erase(pool->second.token);
  private_pools_.erase(pool);
}

bool DeviceCachingAllocator::hasDeadPools() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, pool] : private_pools_) {
    if (pool.use_count == 0) return true;
  }
  return false;
}

void DeviceCachingAllocator::releaseDeadPools() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = private_pools_.begin(); it != private_pools_.end();) {
    auto next = std::next(it);
    if (it->second.use_count == 0) {
      releasePoolMemory(it->second.token);
      forgetIfEmpty(it);
    }
    it = next;
  }
}

// Under the lock, with the device synchronised: the free memory of a pool without users.
void DeviceCachingAllocator::releasePoolMemory(nrtStream_t token) {
  for (BlockPool* pool : {&small_, &large_, &expandable_}) {
    std::vector<Block*> free_blocks;
    for (auto b = pool->blocks.lower_bound(BlockKey{token, 0, nullptr});
         b != pool->blocks.end() && (*b)->stream == token; ++b) {
      free_blocks.push_back(*b);
    }
    for (Block* block : free_blocks) {
      if (block->segment->expandable) {
        unmapFreePages(block);  // releases the range once nothing in it is mapped
      } else if (!block->is_split()) {
        pool->blocks.erase(block);
        releaseSegment(block->segment);
      }
    }
  }
}

int DeviceCachingAllocator::poolUseCount(c10::MempoolId_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = private_pools_.find(id);
  return it == private_pools_.end() ? 0 : it->second.use_count;
}

nrtStream_t DeviceCachingAllocator::routeToPool(nrtStream_t stream) {
  // The latest route wins (a MemPool inside a capture takes that thread's allocations).
  for (auto route = pool_routes_.rbegin(); route != pool_routes_.rend(); ++route) {
    if (route->second(stream)) return poolFor(route->first).token;
  }
  return stream;
}

bool DeviceCachingAllocator::inLivePool(const Block* block) const {
  if (pool_of_token_.empty()) return false;
  auto token = pool_of_token_.find(block->stream);
  if (token == pool_of_token_.end()) return false;
  auto pool = private_pools_.find(token->second);
  return pool != private_pools_.end() && pool->second.use_count > 0;
}

}  // namespace c10_npu::NPUCachingAllocator
