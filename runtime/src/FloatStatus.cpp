// FloatStatus.cpp - the per-device overflow flag (the software NPU's float status register) and
// whether kernels check for overflow at all.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "DeviceMemory.h"
#include "Error.h"
#include "Capture.h"
#include "Runtime.h"
#include "Stream.h"
#include "StreamRegistry.h"

namespace npu::runtime {
namespace {

constexpr int kMaxDevices = 128;  // NPU_SIM_DEVICES' upper bound

// A raised flag holds the generation of the runtime that raised it, so nrtFinalize() clears every
// flag without a hook into the runtime's teardown. 0: clear.
std::atomic<uint64_t> g_flags[kMaxDevices];

std::atomic<int>& Detection() {
  static std::atomic<int> enabled{[] {
    const char* env = std::getenv("NPU_SIM_OVERFLOW_CHECK");
    return env != nullptr && std::strcmp(env, "1") == 0 ? 1 : 0;
  }()};
  return enabled;
}

bool Raised(const Runtime& rt, int device) {
  return g_flags[device].load(std::memory_order_acquire) == rt.generation();
}

}  // namespace
}  // namespace npu::runtime

using npu::runtime::Runtime;

extern "C" {

nrtError_t nrtSetOverflowDetection(int enable) {
  npu::runtime::Detection().store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  return NRT_SUCCESS;
}

int nrtOverflowDetectionEnabled(void) {
  return npu::runtime::Detection().load(std::memory_order_relaxed);
}

nrtError_t nrtRaiseOverflowStatus(void) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    npu::runtime::g_flags[rt.current_device()].store(rt.generation(), std::memory_order_release);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetOverflowStatus(void* output, size_t size, nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    std::shared_ptr<npu::runtime::Stream> found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    if (output == nullptr || size < sizeof(float)) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetOverflowStatus: output ", output, " of ",
                         size, " bytes cannot hold a status word (4 bytes)");
    }
    const std::optional<npu::runtime::Block> block = rt.memory().Find(output);
    if (!block || block->device == npu::runtime::kPinnedHost ||
        static_cast<char*>(output) + size >
            static_cast<char*>(block->base) + block->size) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, "nrtGetOverflowStatus: output ", output, " (",
                         size, " bytes) is not inside one device allocation from nrtMalloc");
    }
    Runtime* runtime = &rt;
    const int device = found->device();
    return npu::runtime::EnqueueOrRecord(*found, [runtime, device, output, size] {
      std::memset(output, 0, size);
      const float word = npu::runtime::Raised(*runtime, device) ? 1.0f : 0.0f;
      std::memcpy(output, &word, sizeof word);
      return 0;
    }, "get overflow status", "status");
  });
}

nrtError_t nrtResetOverflowStatus(nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    std::shared_ptr<npu::runtime::Stream> found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    const int device = found->device();
    return npu::runtime::EnqueueOrRecord(*found, [device] {
      npu::runtime::g_flags[device].store(0, std::memory_order_release);
      return 0;
    }, "reset overflow status", "status");
  });
}

}  // extern "C"
