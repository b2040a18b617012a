// FaultOrigins.cpp - ATen ops as launch origins for fault matching, and the sync-time report.
#include "csrc/framework/FaultOrigins.h"

#include <ATen/record_function.h>
#include <npu/runtime.h>

#include <mutex>
#include <string>

namespace at_npu::native {

void installFaultOrigins() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (nrtFaultsMatchLaunchOrigins() == 0) return;
    at::addGlobalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              nrtPushLaunchOrigin(fn.name());
              return nullptr;
            },
            [](const at::RecordFunction&, at::ObserverContext*) { nrtPopLaunchOrigin(); })
            .scopes({at::RecordScope::FUNCTION}));
  });
}

std::string unmatchedFaults() {
  char text[4096];
  if (nrtGetUnmatchedFaults(text, sizeof(text)) != NRT_SUCCESS) return "";
  return text;
}

}  // namespace at_npu::native
