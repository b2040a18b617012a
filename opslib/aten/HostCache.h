// HostCache.h - host memory of the ATen-backed kernels: large CPU allocations made on stream
// workers come from a cache, and a kernel's result can be placed straight into its device output.
// The C functions are for the adapter (it installs the cache and empties it with the device cache).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace npu::opslib::aten {

// While alive, one CPU allocation of exactly out.nbytes() bytes on the calling thread is `out`'s
// own memory, for each of `outputs` that is dense, aligned as CPU allocations are and apart from
// every input: a kernel that returns new tensors then writes its results where the op's outputs
// live, and storeResult() has nothing to copy. Which allocation: the first of that size, until
// storeResult() has seen which one the kernel returned for this site and these shapes (a kernel
// may allocate temporaries of its result's size first). Why: host kernels returning fresh tensors
// (convolution, matmul) cost an extra pass over each result to copy it into device memory.
// `site` names the call (a string literal); outputs are matched to storeResult() calls by address.
using Tensors = std::initializer_list<at::Tensor>;

class ResultPlacement {
 public:
  ResultPlacement(const char* site, Tensors outputs, Tensors inputs);
  ~ResultPlacement();
  ResultPlacement(const ResultPlacement&) = delete;
  ResultPlacement& operator=(const ResultPlacement&) = delete;
};

// out = result: nothing when result already lies in out's memory with out's layout (a placement),
// else a copy (through a temporary when result overlaps out in another layout).
void storeResult(const at::Tensor& out, const at::Tensor& result);

// Several outputs at once (undefined outputs are skipped): a result that lies in another output's
// memory (a kernel's same-sized block placed there) is read out before any output is written, so
// placements are safe whatever the kernel allocates (results of another type included).
void storeResults(Tensors outputs, Tensors results);

}  // namespace npu::opslib::aten

extern "C" {
#endif

// Installs the cache in front of PyTorch's CPU allocator (idempotent). Allocations of other
// threads, and small ones, go to PyTorch's allocator unchanged.
void npu_opslib_aten_install_host_cache(void);
// Frees the cached blocks nothing uses.
void npu_opslib_aten_empty_host_cache(void);
// cached (free) bytes, bytes in use, hits, misses.
void npu_opslib_aten_host_cache_stats(size_t* cached, size_t* in_use, size_t* hits, size_t* misses);
// Kernel results stored where their outputs live with no copy (placed), and with a copy.
void npu_opslib_aten_result_store_counts(size_t* in_place, size_t* by_copy);

#ifdef __cplusplus
}
#endif
