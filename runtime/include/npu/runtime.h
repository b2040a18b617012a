// npu/runtime.h - C API of the software NPU (an ACL-shaped subset); no PyTorch dependency.
#ifndef NPU_RUNTIME_H_
#define NPU_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NRT_API __attribute__((visibility("default")))
#else
#define NRT_API
#endif

// Error codes. Every call returns one; the matching text, with the values involved, is available
// from nrtGetRecentErrMsg() on the calling thread until the next failing call on that thread.
typedef enum {
  NRT_SUCCESS = 0,
  NRT_ERROR_INVALID_VALUE = 1,        // a null or out-of-range argument
  NRT_ERROR_INVALID_DEVICE = 2,       // device index outside [0, nrtGetDeviceCount())
  NRT_ERROR_OUT_OF_MEMORY = 3,        // device capacity (NPU_SIM_MEMORY) exhausted
  NRT_ERROR_INVALID_POINTER = 4,      // pointer not allocated by this runtime, or already freed
  NRT_ERROR_INVALID_MEMCPY_KIND = 5,  // memcpy kind does not match where src / dst live
  NRT_ERROR_INVALID_HANDLE = 6,       // unknown or destroyed stream / event
  NRT_ERROR_NOT_READY = 7,            // query: work still pending (not a failure)
  NRT_ERROR_TASK_FAILED = 8,          // a task on a stream failed; reported once, at the next sync
  NRT_ERROR_NOT_INITIALIZED = 9,      // call made while nrtFinalize() is running
  NRT_ERROR_EVENT_NOT_RECORDED = 10,  // elapsed time of an event that never completed
  NRT_ERROR_TASK_TIMEOUT = 11,        // a task ran longer than NPU_SIM_TASK_TIMEOUT (watchdog)
  NRT_ERROR_DEVICE_LOST = 12,         // the device is lost (injected); every later call on it fails
  NRT_ERROR_CAPTURE_UNSUPPORTED = 13,  // the call is not allowed while a stream captures (npu/graph.h)
  // The two bounds make every int32 a value of the type (here and in the enums below): callers may
  // pass codes this library does not know, and C++ must be able to hold them to refuse them.
  NRT_ERROR_RANGE_MIN_ = -0x7fffffff - 1,
  NRT_ERROR_RANGE_MAX_ = 0x7fffffff,
} nrtError_t;

typedef enum {
  NRT_MEMCPY_HOST_TO_HOST = 0,
  NRT_MEMCPY_HOST_TO_DEVICE = 1,
  NRT_MEMCPY_DEVICE_TO_HOST = 2,
  NRT_MEMCPY_DEVICE_TO_DEVICE = 3,
  NRT_MEMCPY_KIND_RANGE_MIN_ = -0x7fffffff - 1,
  NRT_MEMCPY_KIND_RANGE_MAX_ = 0x7fffffff,
} nrtMemcpyKind;

typedef struct nrtStreamImpl* nrtStream_t;  // NULL means the current device's default stream
typedef struct nrtEventImpl* nrtEvent_t;

// A host function run on a stream's worker thread, in stream order. Returning non-zero marks the
// stream failed: the message set with nrtSetTaskErrMsg() inside the function (or a generic one) is
// returned once by the next synchronising call on that stream / device, after which it is usable.
typedef int (*nrtHostFunc)(void* user_data);

// Lifecycle. Init is implicit on first use; Finalize destroys streams, events and frees memory,
// and the next call initialises again, re-reading the environment.
NRT_API nrtError_t nrtInit(void);
NRT_API nrtError_t nrtFinalize(void);

// Devices. The count comes from NPU_SIM_DEVICES (default 8); the current device is per host thread.
NRT_API nrtError_t nrtGetDeviceCount(int32_t* count);
NRT_API nrtError_t nrtSetDevice(int32_t device);
NRT_API nrtError_t nrtGetDevice(int32_t* device);
NRT_API nrtError_t nrtDeviceSynchronize(void);  // all streams of the current device

// What the software NPU poses as: the SoC from NPU_SIM_SOC_VERSION (default Ascend910B1; any name
// aclrtGetSocName() reports, e.g. Ascend910B3, Ascend910_9391, Ascend310P3) and the CANN version from
// NPU_SIM_CANN_VERSION (default 8.5.0). An unknown value fails these calls with a message that
// lists what is accepted. The returned strings live until nrtFinalize().
typedef struct {
  char name[64];          // the SoC name
  size_t total_memory;    // bytes (NPU_SIM_MEMORY)
  int32_t cube_core_num;  // nominal core counts of that SoC
  int32_t vector_core_num;
} nrtDeviceProp;
NRT_API nrtError_t nrtGetSocName(const char** name);
NRT_API nrtError_t nrtGetCannVersion(const char** version);
NRT_API nrtError_t nrtGetDeviceProperties(int32_t device, nrtDeviceProp* prop);

// Device memory, bounded by NPU_SIM_MEMORY per device (bytes, or with K/M/G/T suffix; default 16G),
// committed lazily. Device memory is host-addressable (the software NPU computes on the host).
NRT_API nrtError_t nrtMalloc(void** ptr, size_t size);  // on the current device
NRT_API nrtError_t nrtFree(void* ptr);
NRT_API nrtError_t nrtMemGetInfo(size_t* free_bytes, size_t* total_bytes);  // current device
// The software NPU's device memory is host memory: how much more the host can back (after the
// device memory this process mapped but has not touched, and NPU_SIM_HOST_RESERVE), and the host's
// (or its cgroup's, or NPU_SIM_HOST_MEMORY's) limit. Device and pinned allocations beyond it fail.
NRT_API nrtError_t nrtHostMemGetInfo(size_t* free_bytes, size_t* total_bytes);
// Which device owns ptr (anywhere inside an allocation); NRT_ERROR_INVALID_POINTER if none.
NRT_API nrtError_t nrtPointerGetDevice(const void* ptr, int32_t* device);
// The same lookup, also giving the whole device allocation (or mapped run of a reserved range) that
// holds ptr, [*base, *base + *size): callers checking several pointers test the rest against it.
NRT_API nrtError_t nrtPointerGetRange(const void* ptr, int32_t* device, void** base, size_t* size);

// Virtual memory, for allocators that grow a block in place (expandable segments): reserve an
// address range on the current device (costs no capacity), then map and unmap page-aligned parts of
// it; mapped pages count against NPU_SIM_MEMORY like nrtMalloc's and read as zeros when mapped.
// Mapped parts are device memory for every other call (copies, nrtPointerGetDevice); a contiguous
// mapped run acts as one allocation. On ACL: aclrtReserveMemAddress, aclrtMallocPhysical +
// aclrtMapMem, aclrtUnmapMem + aclrtFreePhysical, aclrtReleaseMemAddress.
NRT_API nrtError_t nrtMemGetAllocationGranularity(size_t* granularity);  // page size of map/unmap
NRT_API nrtError_t nrtReserveMemAddress(void** ptr, size_t size);
NRT_API nrtError_t nrtReleaseMemAddress(void* ptr);  // unmaps what is still mapped, then releases
NRT_API nrtError_t nrtMapMem(void* ptr, size_t size);    // maps unmapped pages of a reservation
NRT_API nrtError_t nrtUnmapMem(void* ptr, size_t size);  // unmaps mapped pages of a reservation

// Page-locked ("pinned") host memory; async copies from / to it do not block the caller.
NRT_API nrtError_t nrtMallocHost(void** ptr, size_t size);
NRT_API nrtError_t nrtFreeHost(void* ptr);
NRT_API int nrtIsPinnedHostPtr(const void* ptr);  // 1 if inside an nrtMallocHost or registered block

// Registers existing host memory (a CPU tensor's, a shared-memory segment) as pinned: async copies
// from / to it then do not block the caller, as for nrtMallocHost memory. flags: NRT_HOST_REGISTER_*
// (pinned, mapped, or both). Ranges must not overlap a registered one; unregister by the base pointer.
#define NRT_HOST_REGISTER_MAPPED 0x2u
#define NRT_HOST_REGISTER_PINNED 0x10000000u
NRT_API nrtError_t nrtHostRegister(void* ptr, size_t size, uint32_t flags);
NRT_API nrtError_t nrtHostUnregister(void* ptr);

// Copies. The kind must match: device pointers must lie inside live device allocations with room
// for count bytes, host pointers must not be device memory.
NRT_API nrtError_t nrtMemcpy(void* dst, const void* src, size_t count, nrtMemcpyKind kind);
NRT_API nrtError_t nrtMemcpyAsync(void* dst, const void* src, size_t count, nrtMemcpyKind kind,
                                  nrtStream_t stream);
NRT_API nrtError_t nrtMemsetAsync(void* dst, int value, size_t count, nrtStream_t stream);
// Large synchronous copies (nrtMemcpy from a host thread) of 256 KiB and more that do not overlap
// are done by `copy` when one is installed: a host with an intra-op thread pool copies with all its
// cores, as its own tensor copies do. NULL restores memmove.
typedef void (*nrtHostCopyFn)(void* dst, const void* src, size_t count);
NRT_API void nrtSetHostCopy(nrtHostCopyFn copy);

// Streams: each executes its tasks in order on its own worker thread.
NRT_API nrtError_t nrtStreamCreate(nrtStream_t* stream);  // on the current device
NRT_API nrtError_t nrtStreamDestroy(nrtStream_t stream);  // waits for pending work first
NRT_API nrtError_t nrtStreamSynchronize(nrtStream_t stream);
NRT_API nrtError_t nrtStreamQuery(nrtStream_t stream);  // NRT_SUCCESS or NRT_ERROR_NOT_READY
NRT_API nrtError_t nrtStreamGetDevice(nrtStream_t stream, int32_t* device);
// The number of tasks enqueued on the stream so far (host functions, kernels, copies, event waits):
// its position in the stream's order. Equal counts mean nothing was enqueued in between.
NRT_API nrtError_t nrtStreamGetTaskCount(nrtStream_t stream, uint64_t* count);
NRT_API nrtError_t nrtLaunchHostFunc(nrtStream_t stream, nrtHostFunc fn, void* user_data);
// The same, naming the task for failure messages, the watchdog and fault injection: `name` is the op
// ("aten::mm"), `site` where it was launched from ("train.py:42") or NULL. Both must stay valid for
// the life of the process (literals or interned strings).
NRT_API nrtError_t nrtLaunchHostFuncNamed(nrtStream_t stream, nrtHostFunc fn, void* user_data,
                                          const char* name, const char* site);
// The same for a function that runs for about a microsecond (a kernel over a few hundred elements):
// when the stream is idle (nothing queued or running) and no profiler, watchdog or injected fault
// watches it, `fn` runs at once on the calling thread instead of the stream's worker, which saves
// the hand-off between threads. Order, task counts, events and error reporting are as for a queued
// task: a failure is reported at the next sync, not returned here.
NRT_API nrtError_t nrtLaunchHostFuncShort(nrtStream_t stream, nrtHostFunc fn, void* user_data,
                                          const char* name, const char* site);
// Inside a host function: the message reported at the next sync if the function returns non-zero.
NRT_API void nrtSetTaskErrMsg(const char* message);
// Runs on a stream worker thread that ran out of work and found none for 2 ms, before it sleeps: a host that
// runs tasks whose code keeps per-thread resources (an OpenMP thread team started by a parallel
// kernel) releases them here, so that an idle stream leaves nothing behind that slows other work.
// Process-wide; NULL removes it.
typedef void (*nrtWorkerIdleHook)(void);
NRT_API void nrtSetWorkerIdleHook(nrtWorkerIdleHook hook);
// Runs on a stream worker before each task; host_waiting is 1 while a host thread is blocked
// synchronising that stream (it then needs no core), 0 otherwise. A host whose tasks run parallel
// kernels sizes their thread team here: one core fewer while its own threads are still launching.
typedef void (*nrtWorkerTaskHook)(int host_waiting);
NRT_API void nrtSetWorkerTaskHook(nrtWorkerTaskHook hook);
// 1 on a stream worker thread (running queued tasks), 0 elsewhere.
NRT_API int nrtOnStreamWorker(void);
// On a stream worker: 1 while a host thread is blocked synchronising its stream, else 0 (what the
// task hook was told, read again now: a long task can resize its thread team between parallel
// loops). -1 off stream workers.
NRT_API int nrtWorkerHostWaiting(void);

// The watchdog's limit on one task, in milliseconds (0: off; NPU_SIM_TASK_TIMEOUT sets the first
// value): a synchronising call that waits for a task running longer fails with
// NRT_ERROR_TASK_TIMEOUT naming it. Applies to every stream of the runtime from the next wait on.
NRT_API nrtError_t nrtSetTaskTimeout(uint64_t timeout_ms);
NRT_API nrtError_t nrtGetTaskTimeout(uint64_t* timeout_ms);

// Events: a recorded event completes when the stream reaches it; timing in milliseconds.
NRT_API nrtError_t nrtEventCreate(nrtEvent_t* event);
NRT_API nrtError_t nrtEventDestroy(nrtEvent_t event);
NRT_API nrtError_t nrtEventRecord(nrtEvent_t event, nrtStream_t stream);
NRT_API nrtError_t nrtEventSynchronize(nrtEvent_t event);  // no-op if never recorded
NRT_API nrtError_t nrtEventQuery(nrtEvent_t event);        // NRT_SUCCESS or NRT_ERROR_NOT_READY
NRT_API nrtError_t nrtEventElapsedTime(float* ms, nrtEvent_t start, nrtEvent_t end);
// When a completed event's task ran, in microseconds of the host's monotonic clock.
NRT_API nrtError_t nrtEventGetTimestamp(nrtEvent_t event, uint64_t* timestamp_us);
NRT_API nrtError_t nrtStreamWaitEvent(nrtStream_t stream, nrtEvent_t event);

// Overflow status: the float status register of the software NPU. While detection is on, kernels
// that produce inf/nan from finite inputs raise their device's flag (nrtRaiseOverflowStatus); it
// stays raised until reset. Reads and resets run in stream order, like the register's ops on a
// real device. Detection is off unless NPU_SIM_OVERFLOW_CHECK=1 or nrtSetOverflowDetection(1).
NRT_API nrtError_t nrtSetOverflowDetection(int enable);  // process-wide
NRT_API int nrtOverflowDetectionEnabled(void);           // cheap: kernels ask before checking
// Raises the current device's flag (in a host function: its stream's device).
NRT_API nrtError_t nrtRaiseOverflowStatus(void);
// Writes the stream's device status into `size` bytes (>= 4) of device memory at `output`, as
// float32 words: word 0 is 1.0 after an overflow, everything else 0.
NRT_API nrtError_t nrtGetOverflowStatus(void* output, size_t size, nrtStream_t stream);
NRT_API nrtError_t nrtResetOverflowStatus(nrtStream_t stream);

// Device health: NRT_DEVICE_OK, or NRT_DEVICE_LOST once an injected device_lost fault fired
// (NPU_SIM_FAULT); a lost device fails every later call with NRT_ERROR_DEVICE_LOST.
typedef enum { NRT_DEVICE_OK = 0, NRT_DEVICE_LOST = 1 } nrtDeviceStatus;
NRT_API nrtError_t nrtGetDeviceStatus(int32_t device, nrtDeviceStatus* status);
// Percent (0-100) of the time since the previous call for `device` (or since the runtime started) during
// which at least one of its streams was running a task.
NRT_API nrtError_t nrtGetDeviceUtilization(int32_t device, int32_t* percent);

// What launches a task, beyond its own name: the adapter pushes the ATen op it runs ("aten::mul")
// while fault rules name ops (nrtFaultsMatchLaunchOrigins() is 1), so that NPU_SIM_FAULT's op=mul
// matches the aclnnMuls that `x * 2` launches. Per thread; `name` must outlive the launches.
NRT_API void nrtPushLaunchOrigin(const char* name);
NRT_API void nrtPopLaunchOrigin(void);
NRT_API int nrtFaultsMatchLaunchOrigins(void);
// One line per NPU_SIM_FAULT fault with op= that has matched no task so far ("" when none), with the
// names of the tasks that ran; the same report is printed at exit.
NRT_API nrtError_t nrtGetUnmatchedFaults(char* text, size_t size);

// Errors and logging (ASCEND_GLOBAL_LOG_LEVEL 0 debug .. 3 error; ASCEND_SLOG_PRINT_TO_STDOUT=1).
NRT_API const char* nrtGetRecentErrMsg(void);  // thread-local; "" when none
NRT_API const char* nrtGetErrorName(nrtError_t error);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NPU_RUNTIME_H_
