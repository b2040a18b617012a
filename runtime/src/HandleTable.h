// HandleTable.h - maps opaque handles given to callers to live objects, so stale ones are caught.
#ifndef NPU_RUNTIME_SRC_HANDLE_TABLE_H_
#define NPU_RUNTIME_SRC_HANDLE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace npu::runtime {

// Handles are ids, never addresses, and never reused (not even across nrtFinalize()): a destroyed
// handle can then neither be dereferenced nor alias a newer object.
inline uint64_t NextHandleId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

template <typename Handle>
uint64_t HandleId(Handle handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

template <typename Handle>
Handle ToHandle(uint64_t id) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(id));
}

template <typename T>
class HandleTable {
 public:
  void Insert(uint64_t id, std::shared_ptr<T> object) {
    std::lock_guard<std::shared_mutex> lock(mu_);
    objects_.emplace(id, std::move(object));
  }

  std::shared_ptr<T> Find(uint64_t id) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = objects_.find(id);
    return it == objects_.end() ? nullptr : it->second;
  }

  std::shared_ptr<T> Remove(uint64_t id) {
    std::lock_guard<std::shared_mutex> lock(mu_);
    auto it = objects_.find(id);
    if (it == objects_.end()) return nullptr;
    std::shared_ptr<T> object = std::move(it->second);
    objects_.erase(it);
    return object;
  }

  template <typename Predicate>
  std::vector<std::shared_ptr<T>> Select(Predicate&& keep) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    std::vector<std::shared_ptr<T>> selected;
    for (const auto& entry : objects_) {
      if (keep(*entry.second)) selected.push_back(entry.second);
    }
    return selected;
  }

  std::vector<std::shared_ptr<T>> TakeAll() {
    std::lock_guard<std::shared_mutex> lock(mu_);
    std::vector<std::shared_ptr<T>> all;
    all.reserve(objects_.size());
    for (auto& entry : objects_) all.push_back(std::move(entry.second));
    objects_.clear();
    return all;
  }

 private:
  // Shared for lookups: every launch, copy and sync resolves its handle here, from many threads.
  mutable std::shared_mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<T>> objects_;
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_HANDLE_TABLE_H_
