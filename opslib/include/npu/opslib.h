// npu/opslib.h - the software NPU's op library: tensor / scalar / int-array descriptors, named device
// ops in the two-phase style (XxxGetWorkspaceSize, then Xxx on a stream), and the op registry with
// built-in and custom packages. C API, no PyTorch dependency.
#ifndef NPU_OPSLIB_H_
#define NPU_OPSLIB_H_

#include <stddef.h>
#include <stdint.h>

#include "npu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NOP_API __attribute__((visibility("default")))
#else
#define NOP_API
#endif

typedef int32_t aclnnStatus;
#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001     // a required descriptor or out-pointer is NULL
#define ACLNN_ERR_PARAM_INVALID 161002     // shapes / dtypes / values the op does not accept
#define ACLNN_ERR_RUNTIME_ERROR 361001     // the runtime refused the launch
#define ACLNN_ERR_INNER_NOT_FOUND 561003   // no op of that name is registered
#define ACLNN_ERR_INNER 561000             // opslib itself failed (e.g. out of host memory)

// Element types (values as in ACL).
typedef enum {
  ACL_DT_UNDEFINED = -1,
  ACL_FLOAT = 0,
  ACL_FLOAT16 = 1,
  ACL_INT8 = 2,
  ACL_INT32 = 3,
  ACL_UINT8 = 4,
  ACL_INT16 = 6,
  ACL_INT64 = 9,
  ACL_DOUBLE = 11,
  ACL_BOOL = 12,
  ACL_BF16 = 27,
  // Makes every int32 a value of the type: callers pass codes this library does not know, and
  // C++ must be able to hold them to refuse them.
  ACL_DT_RANGE_ = 0x7fffffff,
} aclDataType;

// Storage formats (values as in ACL). The plain ones (ND, NCHW, NHWC, NCDHW, NDHWC) are strided
// views; the private ones are padded block layouts (npu/format_layout.h gives their shapes). A
// descriptor in a private format describes a whole tensor: its view is the logical shape
// (contiguous, offset 0) and storageDims must be the format's storage shape of that view.
typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33,
} aclFormat;

typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclScalarList aclScalarList;
typedef struct aclOpExecutor aclOpExecutor;
typedef nrtStream_t aclrtStream;  // ACL's name for a stream, as op API headers spell it

// Descriptors. A tensor is a strided view (sizes, strides and offset in elements) of device memory at
// `tensorData` (the storage base); descriptors are copied, so the caller may free its arrays.
NOP_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                   const int64_t* stride, int64_t offset, aclFormat format,
                                   const int64_t* storageDims, uint64_t storageDimsNum,
                                   void* tensorData);
NOP_API aclnnStatus aclDestroyTensor(const aclTensor* tensor);
NOP_API aclScalar* aclCreateScalar(void* value, aclDataType dataType);  // value: one element of dataType
NOP_API aclnnStatus aclDestroyScalar(const aclScalar* scalar);
NOP_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);
NOP_API aclnnStatus aclDestroyIntArray(const aclIntArray* array);
// A list of tensors (cat's inputs, index_put's indices). The list takes ownership of the tensors:
// aclDestroyTensorList destroys them too. Entries may be NULL (an absent optional tensor).
NOP_API aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size);
NOP_API aclnnStatus aclDestroyTensorList(const aclTensorList* array);
NOP_API aclnnStatus aclGetTensorListSize(const aclTensorList* array, uint64_t* size);
// A list of scalars (one per tensor of a foreach op); the list keeps copies of them.
NOP_API aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size);
NOP_API aclnnStatus aclDestroyScalarList(const aclScalarList* array);

// Descriptor accessors with ACL's names and semantics, so that custom op packages can read their
// arguments. The arrays returned through viewDims / stridesValue / storageDims are allocated with
// new[] and belong to the caller (delete[] them). NULL arguments -> ACLNN_ERR_PARAM_NULLPTR.
NOP_API aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum);
NOP_API aclnnStatus aclGetViewStrides(const aclTensor* tensor, int64_t** stridesValue,
                                      uint64_t* stridesNum);
NOP_API aclnnStatus aclGetViewOffset(const aclTensor* tensor, int64_t* offset);
NOP_API aclnnStatus aclGetStorageShape(const aclTensor* tensor, int64_t** storageDims,
                                       uint64_t* storageDimsNum);
NOP_API aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType);
NOP_API aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format);
NOP_API aclnnStatus aclGetRawTensorAddr(const aclTensor* tensor, void** addr);  // tensorData
// Rebinds a descriptor to other memory of the same layout (ACL's aclSetRawTensorAddr), so that a
// caller can reuse one descriptor for launches on tensors of one geometry. The descriptor is then
// unmarked (see aclIsOutputTensor) until an op binds it again.
NOP_API aclnnStatus aclSetRawTensorAddr(aclTensor* tensor, void* addr);
// Whether an op bound this descriptor as one it writes (its out, or an in-place operand) during its
// XxxGetWorkspaceSize. Built-in ops mark what they write; adapters read this before destroying the
// descriptors, to know which temporaries to copy back. 0 for NULL and for unmarked descriptors.
NOP_API int aclIsOutputTensor(const aclTensor* tensor);
// For op packages: marks `tensor` as written by the op being prepared (see aclIsOutputTensor).
NOP_API aclnnStatus aclMarkOutputTensor(const aclTensor* tensor);

// Errors: the message of the last failing call on this thread ("" if none), naming the op and values.
NOP_API const char* aclnnGetRecentErrMsg(void);
// For op packages: records `message` as this thread's recent error and returns `status`, so that a
// package's failing XxxGetWorkspaceSize reads like a built-in one.
NOP_API aclnnStatus aclnnSetRecentErrMsg(aclnnStatus status, const char* message);

// Launch context: text appended to the error of any op launched afterwards from this thread
// (adapters pass the Python line here, "launched from train.py:42"). NULL or "" clears it.
NOP_API void aclnnSetLaunchTag(const char* tag);
// The same without a copy, for callers whose tags live for the whole process (an adapter's interned
// launch sites): launching then costs no allocation. Replaces any tag set with aclnnSetLaunchTag.
NOP_API void aclnnSetLaunchTagStatic(const char* tag);

// The registry. Built-in ops register themselves; custom op packages are shared libraries found
// through ASCEND_CUSTOM_OPP_PATH (':'-separated; each entry is a package directory, a vendor
// directory with op_api/lib/lib*.so, or an install root with vendors/<name>/op_api/lib ordered by
// vendors/config.ini's load_priority). A package either exports
//   void npu_opslib_register_package(aclnnRegisterOpFn register_op);
// or, as Ascend's libcust_opapi.so does, the op functions themselves: every exported
// aclnnXxxGetWorkspaceSize with its aclnnXxx is op "aclnnXxx". A custom op with the name of a
// built-in one wins. A package that fails to load is skipped with a logged warning naming the file
// and the reason. Lookup is by launch name ("aclnnAdd"); the entry's function pointers have the
// op's own signatures (XxxGetWorkspaceSize(args..., uint64_t*, aclOpExecutor**) and
// Xxx(void*, uint64_t, aclOpExecutor*, nrtStream_t)).
typedef struct {
  const char* name;
  void* get_workspace_size;
  void* launch;
  int is_custom;
  // What XxxGetWorkspaceSize takes before workspaceSize and executor: one letter per parameter
  // (npu/op_signature.h: T tensor, S scalar, I int array, l int64, d double, ...) and the
  // parameters' names ("self, other, alpha, out"). NULL when unknown: a custom package that
  // registers through npu_opslib_register_package, or whose op_api/include has no header for it.
  const char* param_kinds;
  const char* param_names;
} aclnnOpEntry;
typedef void (*aclnnRegisterOpFn)(const char* name, void* get_workspace_size, void* launch);
// NULL if unknown; aclnnGetRecentErrMsg() then names the symbols looked for and the packages searched.
NOP_API const aclnnOpEntry* aclnnFindOp(const char* name);
// For built-in packages linked into the process (such as the ATen-backed op package): adds ops
// while libraries load, before the first lookup assembles the registry. Later calls fail with
// ACLNN_ERR_INNER, because handed-out entries must never change.
// param_kinds / param_names as in aclnnOpEntry (NULL if unknown); NPU_OPSLIB_PARAM_KINDS in
// npu/op_signature.h derives the kinds from the GetWorkspaceSize function.
NOP_API aclnnStatus aclnnRegisterBuiltinOp(const char* name, void* get_workspace_size, void* launch,
                                           const char* param_kinds, const char* param_names);
NOP_API int aclnnOpCount(void);
NOP_API const aclnnOpEntry* aclnnOpAt(int index);  // for listing the registry

// Where the op library's kernels run their parallel loops. By default on a small pool of its own;
// a host process with an intra-op pool of its own (PyTorch's) installs a function that runs
// fn(context, begin, end) over [0, n) in chunks of at least min_chunk on that pool, and returns when
// all have run (rethrowing a chunk's exception): two pools on the same cores would compete for them.
// NULL restores the op library's pool.
typedef void (*aclnnParallelRangeFn)(void* context, int64_t begin, int64_t end);
typedef void (*aclnnParallelForFn)(int64_t n, int64_t min_chunk, void* context, aclnnParallelRangeFn fn);
NOP_API void aclnnSetParallelFor(aclnnParallelForFn parallel_for);
// Runs fn(context, begin, end) over [0, n) in chunks of at least min_chunk where the op library's
// own kernels run theirs (the installed pool, else its own): for op packages' kernels, which
// cannot use an OpenMP pool of their own without competing for the cores. Returns when all chunks
// have run, rethrowing a chunk's C++ exception.
NOP_API void aclnnParallelFor(int64_t n, int64_t min_chunk, void* context, aclnnParallelRangeFn fn);

// Shared launch: every op's Xxx(workspace, size, executor, stream) is this; it queues the work
// prepared by XxxGetWorkspaceSize on the stream and takes ownership of the executor.
NOP_API aclnnStatus aclnnLaunchExecutor(void* workspace, uint64_t workspaceSize,
                                        aclOpExecutor* executor, nrtStream_t stream);

// For custom op packages: an executor running `kernel(userData, workspace, workspaceSize)` on the
// stream's worker when launched with aclnnLaunchExecutor, so that a package's Xxx is just
// aclnnLaunchExecutor and its failures read like a built-in op's ("<opName> failed: ...", launch
// tag). The kernel fails by returning non-zero or throwing a C++ exception. destroyUserData (may be
// NULL) is called once when the executor goes away (after it ran, or unlaunched). NULL opName or
// kernel -> NULL.
typedef int (*aclnnKernelFn)(void* userData, void* workspace, uint64_t workspaceSize);
NOP_API aclOpExecutor* aclnnCreateExecutor(const char* opName, aclnnKernelFn kernel, void* userData,
                                           void (*destroyUserData)(void* userData));
// Marks an executor whose kernel costs less than handing it to the stream's worker (a kernel over a
// few thousand elements): its launch runs it on the calling thread when the stream is idle, as it
// does for the op library's small elementwise ops; stream order, counts and errors stay the same.
NOP_API aclnnStatus aclnnSetExecutorShortRun(aclOpExecutor* executor, int short_run);
// Frees an executor that will not be launched (e.g. its workspace could not be allocated).
NOP_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor);

// ---- Operand hooks: the data dump and overflow detection see an op's tensors through its
// executor. Built-in ops declare them; an op package declares its own with
// aclnnSetExecutorOperands (cheap to skip while aclnnOperandHooksActive() is 0). Descriptors are
// copied; NULL entries are skipped. An op given an inf/nan scalar is not judged for overflow.
NOP_API int aclnnOperandHooksActive(void);
NOP_API aclnnStatus aclnnSetExecutorOperands(aclOpExecutor* executor, const aclTensor* const* inputs,
                                             uint64_t inputNum, const aclTensor* const* outputs,
                                             uint64_t outputNum);

// ---- Data dump (ACL's op dump): while a session runs, every op launched (or those named in
// opNames, by type "Add" or launch name "aclnnAdd") writes one file when it runs on its stream,
// {dumpPath}/{YYYYmmddHHMMSS}/{device}/0/0/{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp},
// with its inputs, outputs or both (format: docs/accuracy.md). Stop after synchronising so that
// every launched op has written; ops launched before the stop still write.
typedef enum {
  ACLNN_DUMP_OUTPUT = 0,
  ACLNN_DUMP_INPUT = 1,
  ACLNN_DUMP_ALL = 2,
  // Any int32 is a value (an unknown mode is refused, not UB).
  ACLNN_DUMP_MODE_RANGE_MIN_ = -0x7fffffff - 1,
  ACLNN_DUMP_MODE_RANGE_ = 0x7fffffff,
} aclnnDumpMode;
NOP_API aclnnStatus aclnnDumpStart(const char* dumpPath, aclnnDumpMode mode, const char* const* opNames,
                                   uint64_t opNameNum);
// ACLNN_ERR_INNER if a file could not be written (the message names it); the session ends anyway.
NOP_API aclnnStatus aclnnDumpStop(void);
NOP_API const char* aclnnDumpDirectory(void);  // the current or last session's directory, or ""
NOP_API uint64_t aclnnDumpFileCount(void);     // files it has written so far

// ---- Built-in ops (elementwise). Inputs broadcast to `out`'s shape (NumPy rules); inputs of any
// supported dtype are converted to the compute type of `out` (float for FLOAT16/BF16 outputs);
// supported dtypes: FLOAT, FLOAT16, BF16, DOUBLE, INT8, UINT8, INT16, INT32, INT64, BOOL.
// out = self + alpha * other
NOP_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                             const aclScalar* alpha, aclTensor* out,
                                             uint64_t* workspaceSize, aclOpExecutor** executor);
NOP_API aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                             nrtStream_t stream);
// out = self - alpha * other
NOP_API aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                             const aclScalar* alpha, aclTensor* out,
                                             uint64_t* workspaceSize, aclOpExecutor** executor);
NOP_API aclnnStatus aclnnSub(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                             nrtStream_t stream);
NOP_API aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                             aclTensor* out, uint64_t* workspaceSize,
                                             aclOpExecutor** executor);
NOP_API aclnnStatus aclnnMul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                             nrtStream_t stream);
// True division; `out` must be floating point.
NOP_API aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                             aclTensor* out, uint64_t* workspaceSize,
                                             aclOpExecutor** executor);
NOP_API aclnnStatus aclnnDiv(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                             nrtStream_t stream);
// Tensor op scalar (a host value, e.g. a Python number): the scalar is converted to out's compute
// type; dtype rules as the tensor forms, and an integral or BOOL out needs an integral scalar.
// out = self + alpha * other
NOP_API aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                              const aclScalar* alpha, aclTensor* out,
                                              uint64_t* workspaceSize, aclOpExecutor** executor);
NOP_API aclnnStatus aclnnAdds(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                              nrtStream_t stream);
// out = self - alpha * other
NOP_API aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                              const aclScalar* alpha, aclTensor* out,
                                              uint64_t* workspaceSize, aclOpExecutor** executor);
NOP_API aclnnStatus aclnnSubs(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                              nrtStream_t stream);
NOP_API aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                              aclTensor* out, uint64_t* workspaceSize,
                                              aclOpExecutor** executor);
NOP_API aclnnStatus aclnnMuls(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                              nrtStream_t stream);
NOP_API aclnnStatus aclnnDivsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                              aclTensor* out, uint64_t* workspaceSize,
                                              aclOpExecutor** executor);
NOP_API aclnnStatus aclnnDivs(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                              nrtStream_t stream);

// ---- Layer norm over the trailing dims (normalizedShape): out = (x - mean) * rstd * weight + bias
// per row, mean / rstd (may be NULL) hold one value per row. input and out contiguous and of one
// floating dtype; weight / bias (may be NULL) contiguous, of input's dtype or FLOAT.
NOP_API aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor* input,
                                                   const aclIntArray* normalizedShape,
                                                   const aclTensor* weight, const aclTensor* bias,
                                                   double eps, aclTensor* out, aclTensor* mean,
                                                   aclTensor* rstd, uint64_t* workspaceSize,
                                                   aclOpExecutor** executor);
NOP_API aclnnStatus aclnnLayerNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   nrtStream_t stream);

// ---- Foreach ops: one launch for a whole list of tensors (an optimizer's parameters). Every
// tensor contiguous, all of one floating dtype, the lists of equal lengths and shapes tensor by
// tensor; `out` may be the first input list (in place).
#define NOP_DECLARE_FOREACH(Name, ...)                                                              \
  NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(__VA_ARGS__, aclTensorList* out,               \
                                                    uint64_t* workspaceSize,                       \
                                                    aclOpExecutor** executor);                     \
  NOP_API aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, \
                                  nrtStream_t stream);
NOP_DECLARE_FOREACH(ForeachAddListV2, const aclTensorList* x1, const aclTensorList* x2,
                    const aclScalar* alpha)                       // x1 + alpha * x2
NOP_DECLARE_FOREACH(ForeachAddScalarV2, const aclTensorList* x, const aclScalar* scalar)
NOP_DECLARE_FOREACH(ForeachMulScalarV2, const aclTensorList* x, const aclScalar* scalar)
NOP_DECLARE_FOREACH(ForeachDivScalarList, const aclTensorList* x, const aclScalarList* scalars)
NOP_DECLARE_FOREACH(ForeachSqrt, const aclTensorList* x)
NOP_DECLARE_FOREACH(ForeachLerpScalar, const aclTensorList* x1, const aclTensorList* x2,
                    const aclScalar* weight)                      // x1 + weight * (x2 - x1)
NOP_DECLARE_FOREACH(ForeachAddcmulScalarV2, const aclTensorList* x1, const aclTensorList* x2,
                    const aclTensorList* x3, const aclScalar* scalar)     // x1 + scalar * x2 * x3
NOP_DECLARE_FOREACH(ForeachAddcdivScalarList, const aclTensorList* x1, const aclTensorList* x2,
                    const aclTensorList* x3, const aclScalarList* scalars)  // x1 + s * x2 / x3
#undef NOP_DECLARE_FOREACH

// Unary: out = f(self), self broadcast to out.
#define NOP_DECLARE_UNARY(Name)                                                                   \
  NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor* self, aclTensor* out,       \
                                                    uint64_t* workspaceSize,                     \
                                                    aclOpExecutor** executor);                   \
  NOP_API aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, \
                                  nrtStream_t stream);
NOP_DECLARE_UNARY(Relu)     // max(x, 0)
NOP_DECLARE_UNARY(Neg)
NOP_DECLARE_UNARY(Abs)
NOP_DECLARE_UNARY(Exp)      // floating out
NOP_DECLARE_UNARY(Sqrt)     // floating out
NOP_DECLARE_UNARY(Sigmoid)  // floating out
NOP_DECLARE_UNARY(Tanh)     // floating out
NOP_DECLARE_UNARY(Cast)     // dtype conversion: out = (out dtype) self
#undef NOP_DECLARE_UNARY

// selfRef = src (broadcast to selfRef's shape, converted to its dtype, any strides on both sides):
// the copy of Tensor.copy_ between tensors of one device.
NOP_API aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src,
                                                     uint64_t* workspaceSize, aclOpExecutor** executor);
NOP_API aclnnStatus aclnnInplaceCopy(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                     nrtStream_t stream);

// ---- Layout conversion. dst = src with both describing the same logical tensor (same view shape
// and dtype) in any two formats: plain (any strides) or private (whole tensors). Padding lanes of a
// private dst are zeroed. Private formats hold FLOAT, FLOAT16, BF16, INT8, UINT8, INT16, INT32.
NOP_API aclnnStatus aclnnTransDataGetWorkspaceSize(const aclTensor* src, aclTensor* dst,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor);
NOP_API aclnnStatus aclnnTransData(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   nrtStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NPU_OPSLIB_H_
