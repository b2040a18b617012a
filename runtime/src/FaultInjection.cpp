// FaultInjection.cpp - the NPU_SIM_FAULT grammar and when each injected fault fires.
#include "FaultInjection.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "Device.h"
#include "Error.h"

namespace npu::runtime {
namespace {

constexpr std::string_view kGrammar =
    "expected faults separated by ';', each `kind[:key=value]...` with kind one of task_fail, oom, "
    "memcpy_fail, hang, device_lost, slow and keys op=<device op>, device=<index>, after=<n>, "
    "count=<k|inf>, factor=<x> (slow), e.g. NPU_SIM_FAULT='task_fail:op=mm:after=2;slow:factor=3'; "
    "keys by kind: task_fail op, after, count, device; oom and memcpy_fail after, count, device; hang and "
    "device_lost op, after, device; slow factor, op, device";

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

// The keys each kind takes (docs/reliability.md); anything else is refused when the spec is read,
// because a key that is silently ignored makes a test pass without testing what it says.
std::string_view KeysOf(FaultKind kind) {
  switch (kind) {
    case FaultKind::kTaskFail: return "op, after, count, device";
    case FaultKind::kOom: return "after, count, device";
    case FaultKind::kMemcpyFail: return "after, count, device";
    case FaultKind::kHang: return "op, after, device";
    case FaultKind::kDeviceLost: return "op, after, device";
    case FaultKind::kSlow: return "factor, op, device";
  }
  return "";
}

std::string_view KindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kTaskFail: return "task_fail";
    case FaultKind::kOom: return "oom";
    case FaultKind::kMemcpyFail: return "memcpy_fail";
    case FaultKind::kHang: return "hang";
    case FaultKind::kDeviceLost: return "device_lost";
    case FaultKind::kSlow: return "slow";
  }
  return "";
}

// Why a kind has no such key, when there is a reason worth saying.
std::string_view WhyNot(FaultKind kind, std::string_view key) {
  if (key == "count" && (kind == FaultKind::kHang || kind == FaultKind::kDeviceLost)) {
    return " (it fires once: the first task it hits never finishes, or the device is gone)";
  }
  if (key == "op" && (kind == FaultKind::kOom || kind == FaultKind::kMemcpyFail)) {
    return " (allocations and copies are not ops; use after= to pick one)";
  }
  if ((key == "after" || key == "count") && kind == FaultKind::kSlow) return " (it slows every matching task)";
  return "";
}

bool TakesKey(FaultKind kind, std::string_view key) {
  const std::string_view keys = KeysOf(kind);
  for (size_t start = 0; start < keys.size();) {
    size_t end = keys.find(',', start);
    if (end == std::string_view::npos) end = keys.size();
    if (Trim(keys.substr(start, end - start)) == key) return true;
    start = end + 1;
  }
  return false;
}

constexpr size_t kMaxRules = 32;  // one bit each in a task's match mask
constexpr size_t kMaxTaskNames = 64;

thread_local LaunchOrigins t_origins;

}  // namespace

LaunchOrigins& CurrentLaunchOrigins() { return t_origins; }

std::string LaunchSuffix(const char* site) {
  if (site == nullptr || *site == '\0') return "";
  if (*site == '(') return StrCat(" ", site);
  return StrCat("\n  launched from ", site);
}

bool FaultRule::Fires() {
  const uint64_t index = seen.fetch_add(1, std::memory_order_relaxed);
  return index >= after && (count == 0 || index - after < count);
}

namespace {
// The injector of the running runtime, so that faults that matched nothing are reported at exit
// (a Python process usually exits without finalizing the runtime).
std::atomic<FaultInjector*> g_live{nullptr};

void ReportUnmatched(const FaultInjector& injector) {
  const std::string report = injector.UnmatchedReport();
  if (!report.empty()) std::fprintf(stderr, "npu runtime: %s", report.c_str());
}

void ReportAtExit() {
  if (FaultInjector* injector = g_live.exchange(nullptr)) ReportUnmatched(*injector);
}
}  // namespace

FaultInjector::~FaultInjector() {
  FaultInjector* self = this;
  if (g_live.compare_exchange_strong(self, nullptr)) ReportUnmatched(*this);
}

std::unique_ptr<FaultInjector> FaultInjector::FromEnv() {
  const char* text = std::getenv("NPU_SIM_FAULT");
  if (text == nullptr || Trim(text).empty()) return nullptr;
  std::string error;
  auto injector = Parse(text, &error);
  if (!injector) {
    // The runtime does not start: a fault that silently does not fire makes an error-handling test
    // pass without testing anything.
    throw std::invalid_argument(StrCat("NPU_SIM_FAULT=\"", text, "\" is malformed: ", error,
                                       ". The software NPU does not start with faults it cannot inject as written: "
                                       "fix or unset NPU_SIM_FAULT"));
  }
  static const bool registered = std::atexit(&ReportAtExit) == 0;
  (void)registered;
  g_live.store(injector.get());
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
      const bool known = key == "op" || key == "after" || key == "count" || key == "device" || key == "factor";
      if (known && !TakesKey(*kind, key)) {
        *error = StrCat("`", item, "`: ", KindName(*kind), " takes no `", key, "`", WhyNot(*kind, key), "; its keys are ",
                        KeysOf(*kind));
        return nullptr;
      }
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
    if (injector->rules_.size() == kMaxRules) {
      *error = StrCat("more than ", kMaxRules, " faults; combine them");
      return nullptr;
    }
    injector->has_memcpy_ |= *kind == FaultKind::kMemcpyFail;
    injector->has_op_rules_ |= !rule->op.empty();
    injector->rules_.push_back(std::move(rule));
  }
  if (injector->rules_.empty()) {
    *error = StrCat("no fault given; ", kGrammar);
    return nullptr;
  }
  return injector;
}

uint32_t FaultInjector::MatchAtLaunch(const char* op) const {
  const LaunchOrigins& origins = t_origins;
  uint32_t matches = 0;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const std::string& wanted = rules_[i]->op;
    bool match = MatchesOp(wanted, op);
    for (int k = 0; !match && k < origins.count && k < LaunchOrigins::kMax; ++k) {
      match = MatchesOp(wanted, origins.names[k]);
    }
    if (match) matches |= uint32_t{1} << i;
  }
  return matches;
}

TaskFault FaultInjector::OnTask(int device, const char* op, uint32_t matches, const std::string& stream_name) {
  TaskFault fault;
  const std::string task = op != nullptr ? std::string(op) : std::string("host task");
  if (has_op_rules_) {
    std::lock_guard<std::mutex> lock(names_mu_);
    if (task_names_.size() < kMaxTaskNames) task_names_.insert(task);
  }
  if (Lost(device)) {
    fault.failure = StrCat(task, " failed on ", stream_name, ": ", LostMessage(device));
    return fault;
  }
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& rule = rules_[i];
    if ((rule->device >= 0 && rule->device != device) || !(matches & (uint32_t{1} << i))) continue;
    rule->matched.fetch_add(1, std::memory_order_relaxed);
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

std::string FaultInjector::UnmatchedReport() const {
  std::string report;
  for (const auto& rule : rules_) {
    if (rule->op.empty() || rule->matched.load(std::memory_order_relaxed) > 0) continue;
    report += StrCat("NPU_SIM_FAULT fault `", rule->text, "` matched no task, so nothing was injected");
    if (rule->device >= 0) report += StrCat(" (device=", rule->device, ")");
    report += "\n";
  }
  if (report.empty()) return report;
  std::lock_guard<std::mutex> lock(names_mu_);
  std::string names;
  for (const std::string& name : task_names_) names += (names.empty() ? "" : ", ") + name;
  return report + StrCat("  op= takes an ATen op as written in Python (mul, conv2d, all_reduce) or a device op ",
                         "(aclnnMuls, Muls, muls); the tasks that ran were: ", names.empty() ? "none" : names,
                         "\n");
}

nrtError_t FaultInjector::OnAllocate(int device, size_t size) {
  if (Lost(device)) return FailLost(device, "allocation");
  for (const auto& rule : rules_) {
    if (rule->kind != FaultKind::kOom || (rule->device >= 0 && rule->device != device)) continue;
    rule->matched.fetch_add(1, std::memory_order_relaxed);
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
    rule->matched.fetch_add(1, std::memory_order_relaxed);
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
