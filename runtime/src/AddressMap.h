// AddressMap.h - live mappings ordered by address, answering "which block contains this pointer".
#ifndef NPU_RUNTIME_SRC_ADDRESS_MAP_H_
#define NPU_RUNTIME_SRC_ADDRESS_MAP_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

namespace npu::runtime {

struct Block {
  void* base;
  size_t size;         // what the caller asked for: the valid range is [base, base + size)
  size_t mapped_size;  // page-rounded; what is mapped and accounted
  int device;          // -1 for host memory
};

// Not thread-safe: the owner holds its own lock around every call.
class AddressMap {
 public:
  void Insert(const Block& block) { blocks_.emplace(Address(block.base), block); }

  // The block whose [base, base + size) contains p, if any.
  const Block* Find(const void* p) const {
    auto it = blocks_.upper_bound(Address(p));
    if (it == blocks_.begin()) return nullptr;
    --it;
    return Address(p) - it->first < it->second.size ? &it->second : nullptr;
  }

  // Removes the block starting exactly at base.
  std::optional<Block> Erase(const void* base) {
    auto it = blocks_.find(Address(base));
    if (it == blocks_.end()) return std::nullopt;
    Block block = it->second;
    blocks_.erase(it);
    return block;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& entry : blocks_) f(entry.second);
  }

  std::vector<Block> TakeAll() {
    std::vector<Block> all;
    all.reserve(blocks_.size());
    for (const auto& entry : blocks_) all.push_back(entry.second);
    blocks_.clear();
    return all;
  }

 private:
  static uintptr_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

  std::map<uintptr_t, Block> blocks_;
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_ADDRESS_MAP_H_
