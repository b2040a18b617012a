// npu/graph.h - stream capture and graph replay on the software NPU (ACL's aclmdlRICapture* / CUDA's
// stream capture): work launched on a capturing stream is recorded instead of run, and the recorded
// graph replays it as one task. No PyTorch dependency.
#ifndef NPU_GRAPH_H_
#define NPU_GRAPH_H_

#include <stddef.h>
#include <stdint.h>

#include "npu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrtGraphImpl* nrtGraph_t;

// Which calls a capture forbids, as CUDA defines the modes. A synchronising call (nrtStreamSynchronize,
// nrtDeviceSynchronize, nrtEventSynchronize, nrtMemcpy) is refused with NRT_ERROR_CAPTURE_UNSUPPORTED:
// under GLOBAL, from any thread while the capture lasts; under THREAD_LOCAL, from the capturing thread;
// under RELAXED, never (only calls on the capturing streams themselves are refused). A thread whose own
// mode (nrtThreadExchangeCaptureMode) is RELAXED may always make them. As on Ascend (unlike CUDA), a
// refused call does nothing and the capture goes on: what was recorded stays valid.
typedef enum {
  NRT_CAPTURE_MODE_GLOBAL = 0,
  NRT_CAPTURE_MODE_THREAD_LOCAL = 1,
  NRT_CAPTURE_MODE_RELAXED = 2,
  NRT_CAPTURE_MODE_RANGE_MIN_ = -0x7fffffff - 1,
  NRT_CAPTURE_MODE_RANGE_MAX_ = 0x7fffffff,
} nrtCaptureMode;

typedef enum {
  NRT_CAPTURE_STATUS_NONE = 0,         // not capturing
  NRT_CAPTURE_STATUS_ACTIVE = 1,       // capturing
  NRT_CAPTURE_STATUS_RANGE_MIN_ = -0x7fffffff - 1,
  NRT_CAPTURE_STATUS_RANGE_MAX_ = 0x7fffffff,
} nrtCaptureStatus;

// Starts capturing on `stream` (not the default stream NULL, which cannot capture). From here on,
// host functions, kernels, async copies and memsets, overflow-status ops and event records launched
// on it are recorded, not run; a stream that waits for an event recorded during the capture joins
// it (fork) and must be joined back (the capturing stream waits for an event recorded on it) before
// the capture ends. Work launched before the call is not part of the graph.
NRT_API nrtError_t nrtStreamBeginCapture(nrtStream_t stream, nrtCaptureMode mode);
// Ends the capture begun on `stream` and returns its graph (the caller destroys it). Fails with
// NRT_ERROR_CAPTURE_UNSUPPORTED if a forked stream was not joined back; the capture is then over, its
// recorded work released and every stream usable again.
NRT_API nrtError_t nrtStreamEndCapture(nrtStream_t stream, nrtGraph_t* graph);
// The capture status of `stream` and, while capturing, its capture's id (unique in the process).
NRT_API nrtError_t nrtStreamGetCaptureInfo(nrtStream_t stream, nrtCaptureStatus* status, uint64_t* capture_id);
// Swaps the calling thread's capture interaction mode with *mode (see nrtCaptureMode; starts GLOBAL).
NRT_API nrtError_t nrtThreadExchangeCaptureMode(nrtCaptureMode* mode);

// Queues one replay of the graph on `stream` (any stream of the graph's device): its recorded tasks
// run in capture order as one task, on the same memory and arguments. A failing task ends the replay
// and fails the stream (reported at the next sync, naming the task and its place in the graph).
// Random kernels take their seeds from `replay_seeds` (count entries, copied): a capture gives each
// random op the seed NRT_REPLAY_SEED_SLOT(i) instead of a drawn one, and during a replay
// nrtReplaySeeded() turns that into replay_seeds[i], so that every replay draws what eager execution
// would (the caller draws them from its generators per replay). NULL / 0: seeds stay as captured.
NRT_API nrtError_t nrtGraphLaunch(nrtGraph_t graph, nrtStream_t stream, const uint64_t* replay_seeds, size_t count);
#define NRT_REPLAY_SEED_SLOT_BASE 0xA5A5A5A500000000ULL
#define NRT_REPLAY_SEED_SLOT(i) (NRT_REPLAY_SEED_SLOT_BASE + (uint64_t)(i))
// The seed a random kernel uses: in a replay, a slot seed NRT_REPLAY_SEED_SLOT(i) becomes the
// replay's seed i; any other seed (and every seed outside replays) is returned unchanged.
NRT_API uint64_t nrtReplaySeeded(uint64_t seed);
// Releases the graph's recorded work (queued replays still complete first).
NRT_API nrtError_t nrtGraphDestroy(nrtGraph_t graph);
NRT_API nrtError_t nrtGraphGetNodeCount(nrtGraph_t graph, size_t* count);
// Writes the graph as text to `path`: one line per recorded task (index, kind, name, stream, launch site).
NRT_API nrtError_t nrtGraphDebugDump(nrtGraph_t graph, const char* path);

// Task groups (ACL's aclmdlRICaptureTaskGrpBegin / End and TaskUpdateBegin / End): a run of tasks
// recorded on a capturing stream that can be replaced after the capture, e.g. to give an attention
// op new sequence lengths without capturing again. Begin and end on the capturing stream; the group
// lives as long as its graph.
typedef struct nrtTaskGroupImpl* nrtTaskGroup_t;
NRT_API nrtError_t nrtStreamBeginTaskGroup(nrtStream_t stream);
NRT_API nrtError_t nrtStreamEndTaskGroup(nrtStream_t stream, nrtTaskGroup_t* group);
// Between these two calls, the work launched on `stream` (a stream that is not capturing) is recorded
// as the group's new tasks instead of running. The end queues the swap on `stream`: replays that start
// after the stream reaches it run the new tasks (order them with an event, e.g. an external one).
NRT_API nrtError_t nrtStreamBeginTaskUpdate(nrtStream_t stream, nrtTaskGroup_t group);
NRT_API nrtError_t nrtStreamEndTaskUpdate(nrtStream_t stream);

// External events (ACL_EVENT_EXTERNAL): a flag set by a record, cleared by a reset, and waited for by
// streams (and by graph replays that captured the wait): a wait blocks until the flag is set, however
// many records came before. Record, wait and reset all run in stream order and may be captured.
NRT_API nrtError_t nrtEventCreateExternal(nrtEvent_t* event);
NRT_API nrtError_t nrtEventResetAsync(nrtEvent_t event, nrtStream_t stream);

// A host function whose data outlives one run: `fn` runs once when launched normally, or once per
// replay when a capturing stream recorded it; `release` (may be NULL) runs exactly once after that
// (after the run; when the graph is destroyed; or before returning when the launch is refused).
// short_run: as nrtLaunchHostFuncShort (may run at once on the caller when the stream is idle).
// Launches whose function frees its own data must use this call to be capturable.
typedef void (*nrtHostFuncRelease)(void* user_data);
NRT_API nrtError_t nrtLaunchHostFuncOwned(nrtStream_t stream, nrtHostFunc fn, void* user_data,
                                          nrtHostFuncRelease release, const char* name, const char* site,
                                          int short_run);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NPU_GRAPH_H_
