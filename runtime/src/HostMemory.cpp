// HostMemory.cpp - host memory readings (/proc, cgroups) and the budget device memory must fit in.
#include "HostMemory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

#include "Device.h"
#include "Error.h"
#include "Log.h"

namespace npu::runtime {
namespace {

constexpr size_t kMinReserve = size_t{256} << 20;
// A cached reading serves allocations for this long (allocations of whole segments are rare).
constexpr auto kReadingLifetime = std::chrono::milliseconds(50);

std::optional<size_t> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || value >= (1ULL << 60)) return std::nullopt;  // "no limit" in v1
  return static_cast<size_t>(value);
}

// A "key value" line of a file such as memory.stat or /proc/meminfo (value scaled by `unit`).
std::optional<size_t> ReadKey(const std::string& path, const std::string& key, size_t unit) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
        (line[key.size()] != ' ' && line[key.size()] != ':')) {
      continue;
    }
    return static_cast<size_t>(std::strtoull(line.c_str() + key.size() + 1, nullptr, 10)) * unit;
  }
  return std::nullopt;
}

struct CgroupLimit {
  size_t limit;
  size_t used;  // without the inactive page cache, which the kernel reclaims before it kills
};

// The memory cgroup this process runs in, if it has a limit: v2 (memory.max) or v1
// (memory.limit_in_bytes), at the process's own path or at the mount's root (inside a container).
std::optional<CgroupLimit> ReadCgroupLimit() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::string v2_path, v1_path;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(3);
    const size_t memory = line.find(":memory:");
    if (memory != std::string::npos) v1_path = line.substr(memory + 8);
  }
  struct Layout {
    std::string dir, limit, usage, inactive;
  };
  std::vector<Layout> layouts;
  for (const std::string& dir : {"/sys/fs/cgroup" + v2_path, std::string("/sys/fs/cgroup")}) {
    layouts.push_back({dir, "memory.max", "memory.current", "inactive_file"});
  }
  for (const std::string& dir : {"/sys/fs/cgroup/memory" + v1_path, std::string("/sys/fs/cgroup/memory")}) {
    layouts.push_back({dir, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"});
  }
  for (const Layout& l : layouts) {
    const std::optional<size_t> limit = ReadNumber(l.dir + "/" + l.limit);
    if (!limit) continue;
    const std::optional<size_t> usage = ReadNumber(l.dir + "/" + l.usage);
    if (!usage) continue;
    const size_t inactive = ReadKey(l.dir + "/memory.stat", l.inactive, 1).value_or(0);
    return CgroupLimit{*limit, *usage - std::min(*usage, inactive)};
  }
  return std::nullopt;
}

size_t AnonymousResident() {
  std::ifstream in("/proc/self/statm");
  size_t size = 0, resident = 0, shared = 0;
  if (!(in >> size >> resident >> shared)) return 0;
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (resident - std::min(resident, shared)) * page;
}

size_t ProcessLimit() {
  const char* text = std::getenv("NPU_SIM_HOST_MEMORY");
  if (text == nullptr || *text == '\0') return 0;
  if (std::optional<size_t> bytes = ParseByteSize(text); bytes && *bytes > 0) return *bytes;
  NPU_RT_LOG(kWarning, "ignoring NPU_SIM_HOST_MEMORY=\"", text,
             "\": expected a size such as 8G (a host memory limit for this process)");
  return 0;
}

}  // namespace

HostMemoryReading ReadHostMemory() {
  HostMemoryReading r;
  r.total = ReadKey("/proc/meminfo", "MemTotal", 1024).value_or(SIZE_MAX);
  r.available = ReadKey("/proc/meminfo", "MemAvailable", 1024).value_or(r.total);
  r.bound = "host";
  r.resident = AnonymousResident();
  if (std::optional<CgroupLimit> cg = ReadCgroupLimit(); cg && cg->limit < r.total) {
    r.total = cg->limit;
    r.available = std::min(r.available, cg->limit - std::min(cg->limit, cg->used));
    r.bound = "cgroup";
  }
  return r;
}

HostBudget::HostBudget() : limit_(ProcessLimit()) {
  Refresh(/*force=*/true, [] { return size_t{0}; });
  reserve_ = std::max(kMinReserve, reading_.total / 20);
  if (const char* text = std::getenv("NPU_SIM_HOST_RESERVE"); text != nullptr && *text != '\0') {
    if (std::string_view(text) == "0") {
      reserve_ = 0;
    } else if (std::optional<size_t> bytes = ParseByteSize(text)) {
      reserve_ = *bytes;
    } else {
      NPU_RT_LOG(kWarning, "ignoring NPU_SIM_HOST_RESERVE=\"", text, "\": expected a size such as 1G; keeping ",
                 FormatBytes(reserve_), " of host memory free");
    }
  }
}

void HostBudget::Refresh(bool force, const TouchedBytes& touched) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - read_at_ < kReadingLifetime) return;
  reading_ = ReadHostMemory();
  if (limit_ != 0 && limit_ < reading_.total) {
    reading_.total = limit_;
    reading_.available = std::min(reading_.available, limit_ - std::min(limit_, reading_.resident));
    reading_.bound = "NPU_SIM_HOST_MEMORY";
  }
  touched_ = touched();
  read_at_ = now;
}

size_t HostBudget::Headroom(size_t mapped, const TouchedBytes& touched, size_t request, bool fresh, size_t* total) {
  Refresh(fresh, touched);
  // Device pages already touched are counted as used by the host; those not touched yet will be,
  // so they come off what is available. Pages mapped since the last reading count as untouched.
  auto headroom = [&] {
    const size_t untouched = mapped - std::min(mapped, touched_);
    const size_t promised = untouched + reserve_;
    return reading_.available > promised ? reading_.available - promised : 0;
  };
  size_t room = headroom();
  if (request > room / 2) {  // close to the limit: decide on a fresh reading
    Refresh(/*force=*/true, touched);
    room = headroom();
  }
  if (total != nullptr) *total = reading_.total;
  return room;
}

std::string HostBudget::Explain(size_t request, size_t mapped, const TouchedBytes& touched) {
  const size_t room = Headroom(mapped, touched, request);
  return StrCat("the host can back only ", FormatBytes(room), " more device memory (the software NPU's device ",
                "memory is host memory; ", reading_.bound, " limit ", FormatBytes(reading_.total), ", ",
                FormatBytes(reading_.available), " available, ", FormatBytes(mapped),
                " mapped as npu memory by this process, ", FormatBytes(reserve_),
                " kept free for the host (NPU_SIM_HOST_RESERVE)); tried to allocate ", FormatBytes(request));
}

}  // namespace npu::runtime
