// OpCommand.cpp - registry lookup, workspace, launch and error reporting for named device ops.
#include "csrc/framework/OpCommand.h"

#include <ATen/ops/empty.h>

#include <npu/kernel_launch.h>

#include <string>
#include <vector>

#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGraph.h"
#include "csrc/core/NPUStream.h"
#include "csrc/core/NPUThreadTeams.h"
#include "csrc/framework/DeviceTask.h"
#include "csrc/framework/ExecutionPolicy.h"
#include "csrc/framework/OpStats.h"

extern "C" int npu_opslib_aten_package_loaded(void);

namespace at_npu::native {

const aclnnOpEntry& findDeviceOp(const char* name) {
  // Naming the ATen-backed package keeps it linked, so its ops are registered before this lookup.
  static const bool aten_package = npu_opslib_aten_package_loaded() != 0;
  (void)aten_package;
  const aclnnOpEntry* op = aclnnFindOp(name);
  // The registry's message names the symbols it looked for and the packages it searched.
  TORCH_CHECK(op != nullptr, "device op ", name, " is not available: ", aclnnGetRecentErrMsg());
  return *op;
}

namespace {

std::vector<std::string> splitNames(const char* names) {
  std::vector<std::string> out;
  std::string current;
  for (const char* p = names == nullptr ? "" : names;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!current.empty()) out.push_back(current);
      current.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      current += *p;
    }
  }
  return out;
}

// What to pass for a parameter of this kind, from C++.
const char* cppSpelling(char kind) {
  switch (kind) {
    case 'T': return "an at::Tensor";
    case 'S': return "an at::Scalar (at::Scalar alpha = 1)";
    case 'I': return "an at::IntArrayRef";
    case 'L': return "an at::TensorList";
    case 'A': return "an at::ArrayRef<at::Scalar>";
    case 'f': return "a float (static_cast<float>(value))";
    case 'd': return "a double";
    case 's': return "a const char*";
    default: return npu::opslib::IsIntegerKind(kind) ? "an integer" : "a value of the parameter's type";
  }
}

}  // namespace

void checkDeviceOpArguments(const aclnnOpEntry& op, const char* given) {
  if (op.param_kinds == nullptr) return;
  const std::string expected = op.param_kinds;
  const std::vector<std::string> names = splitNames(op.param_names);
  const size_t count = std::char_traits<char>::length(given);
  std::string listed;
  for (size_t i = 0; i < names.size(); ++i) listed += (i ? ", " : "") + names[i];
  TORCH_CHECK(count == expected.size(), op.name, " takes ", expected.size(), " arguments (", listed, "), got ",
              count, "; pass them in the order of ", op.name, "GetWorkspaceSize, without workspaceSize and executor");
  for (size_t i = 0; i < count; ++i) {
    if (npu::opslib::KindAccepts(expected[i], given[i])) continue;
    TORCH_CHECK(false, op.name, " argument ", i + 1, i < names.size() ? " (" + names[i] + ")" : std::string(),
                " expects ", npu::opslib::KindName(expected[i]), ", got ", npu::opslib::KindName(given[i]),
                ": pass ", cppSpelling(expected[i]));
  }
}

void throwDeviceOpError(const char* name, const char* phase, aclnnStatus status) {
  const char* msg = aclnnGetRecentErrMsg();
  TORCH_CHECK(false, name, phase, " failed with status ", status, ": ",
              (msg && *msg) ? msg : "(no details)");
}

void tagDeviceOpLaunch() {
  const LaunchSite* site = currentLaunchSite();
  const std::string& context = graphContext();
  if (context.empty()) {  // the common case: a tag that lives for the process, nothing formatted
    aclnnSetLaunchTagStatic(site ? site->op_tag.c_str() : nullptr);
    return;
  }
  std::string tag = "(in " + context;
  if (site != nullptr) tag += ", launched from " + site->location;
  aclnnSetLaunchTag((tag + ")").c_str());
}

void launchDeviceOp(const aclnnOpEntry& op, uint64_t workspace_size, aclOpExecutor* executor) {
  c10_npu::noteDeviceLaunch();
  const c10::DeviceIndex device = c10_npu::current_device();
  at::Tensor workspace;
  if (workspace_size > 0) {
    // Freed right after the launch: its block returns to this stream's pool and is reused only by
    // work queued after the op.
    workspace = at::empty({static_cast<int64_t>(workspace_size)},
                          at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, device));
  }
  using Launch = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, nrtStream_t);
  const aclnnStatus status =
      reinterpret_cast<Launch>(op.launch)(workspace_size > 0 ? workspace.data_ptr() : nullptr, workspace_size,
                                          executor, c10_npu::currentStreamHandle(device));
  if (status != ACLNN_SUCCESS) throwDeviceOpError(op.name, "", status);
  static thread_local const char* last_name = nullptr;
  static thread_local OpCounters* last_counters = nullptr;
  if (last_name != op.name) {
    last_counters = &opCounters(std::string(op.name));
    last_name = op.name;
  }
  countOp(*last_counters, OpPath::kDeviceOp);
  // Hook point for launch-side activity records (op name, stream, launch site): here every named
  // device op has been queued exactly once.
  const ExecutionPolicy& policy = executionPolicy();
  if ((!policy.task_queue || policy.launch_blocking || c10_npu::currentStreamIsSyncLaunch(device)) &&
      !c10_npu::anyCaptureUnderway()) {
    c10_npu::getCurrentNPUStream(device).synchronize();
  }
}

}  // namespace at_npu::native

namespace at_npu::native {

void OpCommand::RunOpApi(const std::string& name, const PROC_FUNC& func, bool sync) {
  TORCH_CHECK_VALUE(static_cast<bool>(func), "OpCommand::RunOpApi(\"", name, "\"): the function is empty");
  const LaunchSite* site = currentLaunchSite();
  const char* tag = site ? site->op_tag.c_str() : "";
  nrtSetKernelLaunchTag(tag);
  aclnnSetLaunchTag(tag);
  int status = 0;
  try {
    status = func();
  } catch (...) {
    nrtSetKernelLaunchTag(nullptr);
    throw;
  }
  nrtSetKernelLaunchTag(nullptr);
  if (status != 0) {
    const char* runtime_msg = nrtGetRecentErrMsg();
    TORCH_CHECK(false, name, " failed to launch (status ", status, ")",
                (runtime_msg && *runtime_msg) ? std::string(": ") + runtime_msg : std::string());
  }
  countOp(opCounters(name), OpPath::kDeviceOp);
  const ExecutionPolicy& policy = executionPolicy();
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream();
  // The launch policies' syncs step aside while a graph captures; an op's own sync does not.
  if (sync || ((!policy.task_queue || policy.launch_blocking || stream.isSyncLaunch()) &&
               !c10_npu::anyCaptureUnderway())) {
    stream.synchronize();
  }
}

}  // namespace at_npu::native
