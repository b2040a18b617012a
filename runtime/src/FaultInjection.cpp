// FaultInjection.cpp - the NPU_SIM_FAULT grammar and when each injected fault fires.
#include "FaultInjection.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "Device.h"
#include "Error.h"

namespace npu::runtime {
namespace {

constexpr std::string_view kGrammar =
    "expected faults separated by ';', each `kind[:key=value]...` with kind one of task_fail, oom, "
    "memcpy_fail, hang, device_lost, slow and keys op=<device op>, device=<index>, after=<n>, "
    "count=<k|inf>, factor=<x> (slow), e.g. NPU_SIM_FAULT='task_fail:op=mm:after=2;slow:factor=3'";

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::optional<uint64_t> ParseCount(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::optional<FaultKind> ParseKind(std::string_view name) {
  if (name == "task_fail") return FaultKind::kTaskFail;
  if (name == "oom") return FaultKind::kOom;
  if (name == "memcpy_fail") return FaultKind::kMemcpyFail;
  if (name == "hang") return FaultKind::kHang;
  if (name == "device_lost") return FaultKind::kDeviceLost;
  if (name == "slow") return FaultKind::kSlow;
  return std::nullopt;
}

// `op` names an op as users write it: "mm" matches "aten::mm" and the op library's "aclnnMm", "add"
// matches "aten::add.Tensor", "copy_" matches "aten::copy_ (cpu -> npu)", "all_reduce" matches the
// collective "hccl all_reduce", "add_custom" the launched kernel "kernel add_custom"; the full name
// matches too.
bool MatchesOp(const std::string& wanted, const char* name) {
  if (wanted.empty()) return true;
  if (name == nullptr) return false;
  std::string_view full(name);
  if (full == wanted) return true;
  if (full.rfind("aclnn", 0) == 0) {
    // A device op of the op library: "aclnnMm" is mm, "aclnnAddmm" addmm (case and '_' ignored).
    std::string_view rest = full.substr(5);
    size_t i = 0;
    for (char c : wanted) {
      if (c == '_') continue;
      if (i >= rest.size() || std::tolower(static_cast<unsigned char>(rest[i])) != std::tolower(static_cast<unsigned char>(c))) {
        return false;
      }
      ++i;
    }
    return i == rest.size();
  }
  if (full.rfind("kernel ", 0) == 0) {  // launched kernels: "kernel add_custom"
    full.remove_prefix(7);
    if (full == wanted) return true;
  }
  if (const size_t ns = full.rfind("::"); ns != std::string_view::npos) full.remove_prefix(ns + 2);
  if (full.rfind("hccl ", 0) == 0) full.remove_prefix(5);  // collectives: "hccl all_reduce"
  if (full == wanted) return true;
  const size_t end = full.find_first_of(". ");
  return end != std::string_view::npos && full.substr(0, end) == wanted;
}

std::string Describe(const FaultRule& rule) { return StrCat("injected fault `", rule.text, "` (NPU_SIM_FAULT)"); }

}  // namespace

std::string LaunchSuffix(const char* site) {
  if (site == nullptr || *site == '\0') return "";
  if (*site == '(') return StrCat(" ", site);
  return StrCat("\n  launched from ", site);
}

bool FaultRule::Fires() {
  const uint64_t index = seen.fetch_add(1, std::memory_order_relaxed);
  return index >= after && (count == 0 || index - after < count);
}

std::unique_ptr<FaultInjector> FaultInjector::FromEnv() {
  const char* text = std::getenv("NPU_SIM_FAULT");
  if (text == nullptr || Trim(text).empty()) return nullptr;
  std::string error;
  auto injector = Parse(text, &error);
  if (!injector) {
    // Always printed: a fault that silently does not fire makes an error-handling test pass.
    std::fprintf(stderr, "npu runtime: ignoring NPU_SIM_FAULT=\"%s\": %s\n", text, error.c_str());
  }
  return injector;
}

std::unique_ptr<FaultInjector> FaultInjector::Parse(std::string_view spec, std::string* error) {
  auto injector = std::make_unique<FaultInjector>();
  for (std::string_view item : Split(spec, ';')) {
    item = Trim(item);
    if (item.empty()) continue;
    const std::vector<std::string_view> fields = Split(item, ':');
    const std::optional<FaultKind> kind = ParseKind(Trim(fields[0]));
    if (!kind) {
      *error = StrCat("unknown fault `", fields[0], "`; ", kGrammar);
      return nullptr;
    }
    auto rule = std::make_unique<FaultRule>();
    rule->kind = *kind;
    rule->text = std::string(item);
    rule->count = *kind == FaultKind::kSlow ? 0 : 1;
    bool has_factor = false;
    for (size_t i = 1; i < fields.size(); ++i) {
      const std::string_view field = Trim(fields[i]);
      const size_t eq = field.find('=');
      const std::string_view key = eq == std::string_view::npos ? field : field.substr(0, eq);
      const std::string_view value = eq == std::string_view::npos ? "" : field.substr(eq + 1);
      std::optional<uint64_t> number = ParseCount(value);
      if (key == "op" && !value.empty()) {
        rule->op = std::string(value);
      } else if (key == "after" && number) {
        rule->after = *number;
      } else if (key == "count" && (number || value == "inf")) {
        if (number && *number == 0) {
          *error = StrCat("`", item, "`: count must be at least 1 (or inf); ", kGrammar);
          return nullptr;
        }
        rule->count = number ? *number : 0;
      } else if (key == "device" && number && *number < kMaxDevices) {
        rule->device = static_cast<int>(*number);
      } else if (key == "factor" && *kind == FaultKind::kSlow) {
        char* end = nullptr;
        const std::string copy(value);
        rule->factor = std::strtod(copy.c_str(), &end);
        if (copy.empty() || *end != '\0' || !std::isfinite(rule->factor) || rule->factor < 1.0) {
          *error = StrCat("`", item, "`: factor must be a number >= 1, e.g. slow:factor=4");
          return nullptr;
        }
        has_factor = true;
      } else {
        *error = StrCat("`", item, "`: bad or unknown key `", field, "`; ", kGrammar);
        return nullptr;
      }
    }
    if (*kind == FaultKind::kSlow && !has_factor) {
      *error = StrCat("`", item, "`: slow needs factor=<x>, e.g. slow:factor=4");
      return nullptr;
    }
    if (*kind == FaultKind::kDeviceLost || *kind == FaultKind::kHang) rule->count = 1;
    if (!rule->op.empty() && (*kind == FaultKind::kOom || *kind == FaultKind::kMemcpyFail)) {
      *error = StrCat("`", item, "`: op= applies to task_fail, hang, device_lost and slow only");
      return nullptr;
    }
    injector->has_memcpy_ |= *kind == FaultKind::kMemcpyFail;
    injector->rules_.push_back(std::move(rule));
  }
  if (injector->rules_.empty()) {
    *error = StrCat("no fault given; ", kGrammar);
    return nullptr;
  }
  return injector;
}

TaskFault FaultInjector::OnTask(int device, const char* op, const std::string& stream_name) {
  TaskFault fault;
  const std::string task = op != nullptr ? std::string(op) : std::string("host task");
  if (Lost(device)) {
    fault.failure = StrCat(task, " failed on ", stream_name, ": ", LostMessage(device));
    return fault;
  }
  for (const auto& rule : rules_) {
    if ((rule->device >= 0 && rule->device != device) || !MatchesOp(rule->op, op)) continue;
    switch (rule->kind) {
      case FaultKind::kTaskFail:
        if (!fault.failure && rule->Fires()) {
          fault.failure = StrCat(task, " failed on ", stream_name, ": ", Describe(*rule));
        }
        break;
      case FaultKind::kHang:
        if (!fault.hang && rule->Fires()) fault.hang = true;
        break;
      case FaultKind::kDeviceLost:
        if (!Lost(device) && rule->Fires()) {
          MarkLost(device, *rule);
          fault.failure = StrCat(task, " failed on ", stream_name, ": ", LostMessage(device));
        }
        break;
      case FaultKind::kSlow:
        if (rule->Fires()) fault.slow_factor = std::max(fault.slow_factor, rule->factor);
        break;
      case FaultKind::kOom:
      case FaultKind::kMemcpyFail:
        break;
    }
  }
  return fault;
}

nrtError_t FaultInjector::OnAllocate(int device, size_t size) {
  if (Lost(device)) return FailLost(device, "allocation");
  for (const auto& rule : rules_) {
    if (rule->kind != FaultKind::kOom || (rule->device >= 0 && rule->device != device)) continue;
    if (rule->Fires()) {
      return NPU_RT_FAIL(NRT_ERROR_OUT_OF_MEMORY, "npu:", device, " cannot allocate ",
                         FormatBytes(size), ": ", Describe(*rule));
    }
  }
  return NRT_SUCCESS;
}

std::optional<std::string> FaultInjector::OnMemcpy(int device) {
  for (const auto& rule : rules_) {
    if (rule->kind != FaultKind::kMemcpyFail || (rule->device >= 0 && rule->device != device)) continue;
    if (rule->Fires()) return Describe(*rule);
  }
  return std::nullopt;
}

void FaultInjector::MarkLost(int device, const FaultRule& rule) {
  if (device < 0 || device >= kMaxDevices) return;
  lost_by_[device].store(&rule, std::memory_order_relaxed);
  lost_[device].store(true, std::memory_order_release);
}

std::string FaultInjector::LostMessage(int device) const {
  const FaultRule* rule = device >= 0 && device < kMaxDevices ? lost_by_[device].load() : nullptr;
  return StrCat("npu:", device, " is lost (", rule ? Describe(*rule) : std::string("injected fault"),
                "); every later call on it fails until the process restarts, other devices keep working");
}

nrtError_t FaultInjector::FailLost(int device, std::string_view call) const {
  return NPU_RT_FAIL(NRT_ERROR_DEVICE_LOST, call, " on ", LostMessage(device));
}

std::chrono::nanoseconds ReadTaskTimeoutFromEnv() {
  const char* text = std::getenv("NPU_SIM_TASK_TIMEOUT");
  if (text == nullptr || *text == '\0') return std::chrono::nanoseconds(0);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > 1e6) {
    std::fprintf(stderr,
                 "npu runtime: ignoring NPU_SIM_TASK_TIMEOUT=\"%s\": expected seconds >= 0 (e.g. 30 or "
                 "0.5; 0 turns the watchdog off)\n",
                 text);
    return std::chrono::nanoseconds(0);
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

}  // namespace npu::runtime
