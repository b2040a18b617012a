// HostMemory.h - how much more memory the host can give: the software NPU's device memory is host memory.
#ifndef NPU_RUNTIME_SRC_HOST_MEMORY_H_
#define NPU_RUNTIME_SRC_HOST_MEMORY_H_

#include <chrono>
#include <functional>
#include <cstddef>
#include <mutex>
#include <string>

namespace npu::runtime {

// A snapshot of what bounds the host: the kernel's MemAvailable, a cgroup (v2 or v1) limit, or
// NPU_SIM_HOST_MEMORY (a limit for this process, as a container would set one).
struct HostMemoryReading {
  size_t total = 0;      // the smallest limit that applies
  size_t available = 0;  // what that limit still allows, now
  size_t resident = 0;   // this process's anonymous resident memory
  std::string bound;     // which limit applies: "host", "cgroup" or "NPU_SIM_HOST_MEMORY"
};
HostMemoryReading ReadHostMemory();

// Device (and pinned) memory must never promise more than the host can back: an allocation is
// refused when it does not fit in what the host has available, after the device memory this
// process mapped but has not touched yet (counted page by page with mincore at each reading), keeping NPU_SIM_HOST_RESERVE (default: 5% of the host's
// memory, at least 256 MiB) free for the host's own work. Readings are cached for a short while;
// callers serialise (DeviceMemory's lock).
class HostBudget {
 public:
  HostBudget();
  // Counts the bytes of this process's device memory that are resident (touched), read with each
  // fresh reading of the host.
  using TouchedBytes = std::function<size_t()>;
  // Bytes that can still be mapped as device memory, with `mapped` bytes mapped by this process;
  // `fresh` reads the host now instead of using a recent reading. `total` receives the limit.
  size_t Headroom(size_t mapped, const TouchedBytes& touched, size_t request = 0, bool fresh = false,
                  size_t* total = nullptr);
  // The explanation of a refusal of `request` bytes, with `mapped` bytes mapped.
  std::string Explain(size_t request, size_t mapped, const TouchedBytes& touched);
  size_t reserve() const { return reserve_; }

 private:
  void Refresh(bool force, const TouchedBytes& touched);

  size_t reserve_ = 0;
  size_t limit_ = 0;  // NPU_SIM_HOST_MEMORY, 0 when unset
  HostMemoryReading reading_;
  size_t touched_ = 0;  // device bytes resident at the last reading (only grows until freed)
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_HOST_MEMORY_H_
