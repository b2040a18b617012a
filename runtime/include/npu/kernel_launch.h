// npu/kernel_launch.h - direct kernel launch on the software NPU, modelled on Ascend C: a kernel is
// a function over global-memory addresses run as `blockDim` blocks on the device's simulated cores,
// in stream order. C API below; the C++ surface (GetBlockIdx, ACLRT_LAUNCH_KERNEL, ascendc_assert)
// at the end. No PyTorch dependency.
#ifndef NPU_KERNEL_LAUNCH_H_
#define NPU_KERNEL_LAUNCH_H_

#include <stdint.h>

#include "npu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

// Runs one block of a launch; GetBlockIdx() / nrtGetBlockIdx() tell which. Returns non-zero on
// failure, after nrtSetBlockErrMsg() said why.
typedef int (*nrtKernelBlockFn)(void* args);

#define NRT_MAX_BLOCK_DIM 65535

// Queues a kernel on `stream` (NULL: the current device's default stream). When the stream reaches
// it, blocks 0 .. blockDim-1 run in parallel on the stream's device's simulated cores
// (NPU_SIM_CORES per device, default 8) and the stream continues once all have finished. A failing
// block fails the task: the next synchronising call reports NRT_ERROR_TASK_FAILED with
// "kernel <name> failed in block i of n: <message>". destroyArgs (may be NULL) is called exactly
// once: after the last block, or before returning when the launch is refused
// (NRT_ERROR_INVALID_VALUE for a NULL name / block, blockDim outside [1, NRT_MAX_BLOCK_DIM];
// NRT_ERROR_INVALID_HANDLE for a dead stream).
NRT_API nrtError_t nrtLaunchKernel(const char* name, uint32_t blockDim, nrtStream_t stream,
                                   nrtKernelBlockFn block, void* args, void (*destroyArgs)(void* args));
// Inside a block: its index and the launch's blockDim. Outside any block: 0 and 1.
NRT_API uint32_t nrtGetBlockIdx(void);
NRT_API uint32_t nrtGetBlockNum(void);
// Inside a block: the message reported if the block then fails.
NRT_API void nrtSetBlockErrMsg(const char* message);
// Per thread: text appended to the error of kernels launched afterwards from this thread (torch_npu
// passes the Python line, "(launched from train.py:42)"). NULL or "" clears it.
NRT_API void nrtSetKernelLaunchTag(const char* tag);
// The number of simulated cores of the current device (NPU_SIM_CORES).
NRT_API nrtError_t nrtGetDeviceCoreCount(int32_t* count);

#ifdef __cplusplus
}  // extern "C"

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

typedef nrtStream_t aclrtStream;  // ACL's name for a stream

// Ascend C's kernel qualifiers mean nothing on the software NPU.
#ifndef __global__
#define __global__
#endif
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef GM_ADDR
#define GM_ADDR uint8_t*
#endif

// The running block's index in [0, GetBlockNum()) and the launch's block count.
inline int64_t GetBlockIdx() { return nrtGetBlockIdx(); }
inline int64_t GetBlockNum() { return nrtGetBlockNum(); }
namespace AscendC {
using ::GetBlockIdx;
using ::GetBlockNum;
}  // namespace AscendC

namespace npu::kernel {

// What a failing ascendc_assert throws; the launcher turns it into the block's error.
class KernelCheckError : public std::exception {
 public:
  explicit KernelCheckError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

[[noreturn]] inline void FailCheck(const char* expression, const char* file, int line,
                                   const char* format = nullptr, ...)
    __attribute__((format(printf, 4, 5)));

[[noreturn]] inline void FailCheck(const char* expression, const char* file, int line,
                                   const char* format, ...) {
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  std::string message = std::string("ascendc_assert(") + expression + ") failed at " + base + ":" +
                        std::to_string(line);
  if (format != nullptr) {
    char text[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof text, format, args);
    va_end(args);
    message += std::string(": ") + text;
  }
  throw KernelCheckError(std::move(message));
}

// ACLRT_LAUNCH_KERNEL(kernel) is one of these: call it with (blockDim, stream, kernel arguments...).
// The arguments are copied (converted to the kernel's parameter types) when the launch is queued.
template <typename... Params>
class KernelLauncher {
 public:
  KernelLauncher(const char* name, void (*kernel)(Params...)) : name_(name), kernel_(kernel) {}

  template <typename... Args>
  nrtError_t operator()(uint32_t blockDim, nrtStream_t stream, Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params),
                  "ACLRT_LAUNCH_KERNEL: pass exactly the kernel's arguments after blockDim and stream");
    auto* frame = new Frame{kernel_, Arguments(std::forward<Args>(args)...)};
    return nrtLaunchKernel(name_, blockDim, stream, &RunBlock, frame, &Destroy);
  }

 private:
  using Arguments = std::tuple<std::decay_t<Params>...>;
  struct Frame {
    void (*kernel)(Params...);
    Arguments arguments;
  };

  static int RunBlock(void* data) noexcept {
    try {
      Frame* frame = static_cast<Frame*>(data);
      std::apply(frame->kernel, frame->arguments);
      return 0;
    } catch (const std::exception& e) {
      nrtSetBlockErrMsg(e.what());
    } catch (...) {
      nrtSetBlockErrMsg("the kernel threw a non-standard exception");
    }
    return 1;
  }
  static void Destroy(void* data) { delete static_cast<Frame*>(data); }

  const char* name_;
  void (*kernel_)(Params...);
};

template <typename... Params>
KernelLauncher<Params...> MakeKernelLauncher(const char* name, void (*kernel)(Params...)) {
  return KernelLauncher<Params...>(name, kernel);
}

}  // namespace npu::kernel

// ACLRT_LAUNCH_KERNEL(add_custom)(blockDim, stream, x, y, z, totalLength) queues add_custom.
#define ACLRT_LAUNCH_KERNEL(kernel_fn) ::npu::kernel::MakeKernelLauncher(#kernel_fn, &kernel_fn)

// Inside a kernel: fails the block (and so the launch) unless `condition` holds, with an optional
// printf-style message: ascendc_assert(i < n, "index %d out of range", i).
#define ascendc_assert(condition, ...) \
  ((condition) ? (void)0 : ::npu::kernel::FailCheck(#condition, __FILE__, __LINE__, ##__VA_ARGS__))

#endif  // __cplusplus

#endif  // NPU_KERNEL_LAUNCH_H_
