// CommNames.cpp - names of hccl groups: set once per group (by _set_hccl_comm_name, or a default by the first
// get_hccl_comm_name), unique in the process, and looked up by the communication-fused ops.
#include "csrc/distributed/CommNames.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "csrc/distributed/ProcessGroupHCCL.h"

namespace c10d_npu {
namespace {

// Upstream's limit: a name is a C string of at most 127 characters.
constexpr size_t kMaxCommName = 127;

std::mutex& registryMutex() {
  static std::mutex mutex;
  return mutex;
}

// Weak: a destroyed group's name stops resolving (and may be taken again).
std::unordered_map<std::string, c10::weak_intrusive_ptr<ProcessGroupHCCL>>& registry() {
  static std::unordered_map<std::string, c10::weak_intrusive_ptr<ProcessGroupHCCL>> names;
  return names;
}

// Registers `name` for `group` (registry lock held); false if another live group has it.
bool claim(const std::string& name, ProcessGroupHCCL* group) {
  auto& names = registry();
  auto it = names.find(name);
  if (it != names.end()) {
    c10::intrusive_ptr<ProcessGroupHCCL> owner = it->second.lock();
    if (owner && owner.get() != group) return false;
  }
  // The group is owned by intrusive_ptrs (its Python object holds one): take a weak reference to it.
  names.insert_or_assign(name, c10::weak_intrusive_ptr<ProcessGroupHCCL>(
                                   c10::intrusive_ptr<ProcessGroupHCCL>::reclaim_copy(group)));
  return true;
}

}  // namespace

std::string ProcessGroupHCCL::hcclCommName() {
  std::lock_guard<std::mutex> guard(comm_name_mutex_);
  if (!comm_name_.empty()) return comm_name_;
  static std::atomic<uint64_t> serial{0};
  std::lock_guard<std::mutex> names(registryMutex());
  std::string name;
  do {
    name = "hccl_comm_" + std::to_string(serial++) + "_rank_" + std::to_string(getRank());
  } while (!claim(name, this));
  comm_name_ = name;
  return comm_name_;
}

void ProcessGroupHCCL::setHcclCommName(const std::string& name) {
  TORCH_CHECK(!name.empty(), "_set_hccl_comm_name: the name must not be empty");
  TORCH_CHECK(name.size() <= kMaxCommName, "_set_hccl_comm_name: the name must have at most ", kMaxCommName,
              " characters, got ", name.size());
  std::lock_guard<std::mutex> guard(comm_name_mutex_);
  if (comm_name_ == name) return;
  TORCH_CHECK(comm_name_.empty(), "_set_hccl_comm_name: this group is already named '", comm_name_,
              "' (a group's name is set once, by _set_hccl_comm_name or the first get_hccl_comm_name)");
  std::lock_guard<std::mutex> names(registryMutex());
  TORCH_CHECK(claim(name, this), "_set_hccl_comm_name: another group of this process is named '", name, "'");
  comm_name_ = name;
}

c10::intrusive_ptr<ProcessGroupHCCL> groupByCommName(const std::string& name) {
  std::lock_guard<std::mutex> guard(registryMutex());
  auto it = registry().find(name);
  if (it == registry().end()) return {};
  return it->second.lock();
}

}  // namespace c10d_npu
