// NPUGraph.cpp - capture, replay and reset of NPU graphs over the runtime's stream capture, and the
// private memory pools they allocate from.
#include "csrc/core/NPUGraph.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/core/NPUStream.h"
#include "csrc/core/NPUThreadTeams.h"

namespace c10_npu {
namespace {

std::atomic<int> g_captures{0};
std::atomic<uint64_t> g_next_pool{1};
// The graph capturing on this thread, or null.
thread_local NPUGraph* t_capturing = nullptr;
// Every graph capturing now. Random draws ask which of them the launching thread's current stream
// records into: the autograd engine runs a captured backward on a thread of its own.
std::mutex g_capturing_mu;
std::vector<NPUGraph*>* g_capturing = new std::vector<NPUGraph*>;  // leaked

uint64_t currentCaptureId() {
  nrtCaptureStatus status = NRT_CAPTURE_STATUS_NONE;
  uint64_t id = 0;
  if (nrtStreamGetCaptureInfo(currentStreamHandle(current_device()), &status, &id) != NRT_SUCCESS) return 0;
  return status == NRT_CAPTURE_STATUS_NONE ? 0 : id;
}

}  // namespace

void releasePoolUser(c10::DeviceIndex device, c10::MempoolId_t id) {
  // The last user gives the pool's memory back at once, once no queued work can touch it (a device
  // sync); while some capture is underway no sync is allowed, and the memory waits for the next
  // capture or emptying of the cache.
  const bool release_now = !anyCaptureUnderway() && NPUCachingAllocator::poolUseCount(device, id) == 1;
  if (release_now) {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
    NPU_CHECK(nrtDeviceSynchronize());
  }
  NPUCachingAllocator::releasePool(device, id, release_now);
}

c10::MempoolId_t graphPoolHandle() { return {0, g_next_pool.fetch_add(1)}; }

bool anyCaptureUnderway() { return g_captures.load(std::memory_order_relaxed) > 0; }

bool currentStreamCapturing() {
  if (!anyCaptureUnderway()) return false;
  nrtCaptureStatus status = NRT_CAPTURE_STATUS_NONE;
  NPU_CHECK(nrtStreamGetCaptureInfo(currentStreamHandle(current_device()), &status, nullptr));
  return status != NRT_CAPTURE_STATUS_NONE;
}

std::optional<std::pair<c10::DeviceIndex, c10::MempoolId_t>> capturingPool() {
  if (t_capturing == nullptr) return std::nullopt;
  return std::make_pair(t_capturing->device_, t_capturing->mempool_id_);
}

NPUGraph* NPUGraph::capturingOnCurrentStream() {
  if (!anyCaptureUnderway()) return nullptr;
  const uint64_t id = currentCaptureId();
  if (id == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_capturing_mu);
  for (NPUGraph* graph : *g_capturing) {
    if (graph->capture_id_ == id) return graph;
  }
  return nullptr;
}

std::optional<uint64_t> captureRandomSlot(c10::GeneratorImpl* generator) {
  NPUGraph* graph = NPUGraph::capturingOnCurrentStream();
  if (graph == nullptr) return std::nullopt;
  for (size_t g = 0; g < graph->generators_.size(); ++g) {
    NPUGraph::CapturedGenerator& captured = graph->generators_[g];
    if (captured.impl.get() != generator) continue;
    const std::pair<size_t, uint64_t> draw{g, captured.next++};
    captured.count = std::max(captured.count, captured.next);
    auto [it, fresh] = graph->slot_of_.emplace(draw, graph->slots_.size());
    if (fresh) graph->slots_.push_back(draw);
    return NRT_REPLAY_SEED_SLOT(it->second);
  }
  return std::nullopt;
}

uint64_t* captureDrawPosition(c10::GeneratorImpl* generator) {
  NPUGraph* graph = NPUGraph::capturingOnCurrentStream();
  if (graph == nullptr) return nullptr;
  for (NPUGraph::CapturedGenerator& captured : graph->generators_) {
    if (captured.impl.get() == generator) return &captured.next;
  }
  return nullptr;
}

void NPUGraph::registerGeneratorState(const at::Generator& generator) {
  TORCH_CHECK_VALUE(generator.defined() && generator.device().type() == c10::DeviceType::PrivateUse1,
                    "register_generator_state expects an npu generator, got ",
                    generator.defined() ? generator.device().str() : std::string("an undefined one"));
  TORCH_CHECK(!capturing_, "register_generator_state must be called before capture_begin()");
  for (const at::Generator& known : registered_) {
    if (known.unsafeGetGeneratorImpl() == generator.unsafeGetGeneratorImpl()) return;
  }
  registered_.push_back(generator);
}

NPUGraph::~NPUGraph() {
  try {
    if (capturing_) {
      // Destroyed mid-capture (an exception unwound the capture): end it so the stream is usable.
      nrtGraph_t dropped = nullptr;
      if (nrtStreamEndCapture(capture_stream_, &dropped) == NRT_SUCCESS) nrtGraphDestroy(dropped);
      NPUCachingAllocator::endAllocateToPool(device_, mempool_id_);
      g_captures.fetch_sub(1, std::memory_order_relaxed);
      if (t_capturing == this) t_capturing = nullptr;
      std::lock_guard<std::mutex> lock(g_capturing_mu);
      std::erase(*g_capturing, this);
    }
    reset();
  } catch (...) {
  }
}

void NPUGraph::captureBegin(c10::MempoolId_t pool, nrtCaptureMode mode) {
  TORCH_CHECK(graph_ == nullptr && !capturing_,
              "This NPUGraph instance already owns a captured graph (or is capturing). To capture a new graph, "
              "create a new instance or call reset() first.");
  TORCH_CHECK(t_capturing == nullptr, "another NPUGraph is already capturing on this thread; end it first");
  const NPUStream stream = getCurrentNPUStream();
  TORCH_CHECK(stream != getDefaultNPUStream(stream.device_index()),
              "NPU graphs must be captured on a non-default stream (torch.npu.graph uses a side stream; with "
              "capture_begin, enter `with torch.npu.stream(torch.npu.Stream()):` first). After capture, the graph "
              "may replay on any stream, the default one included.");
  TORCH_CHECK((pool.first == 0) || (pool.second == 0),
              "pool must be None, another graph's pool() or a torch.npu.graph_pool_handle(); got (", pool.first, ", ",
              pool.second, ")");
  device_ = stream.device_index();
  capture_stream_ = stream.handle();
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  if (!anyCaptureUnderway() && NPUCachingAllocator::hasDeadPools(device_)) {
    // Graphs reset before their outputs were freed left memory in pools nobody replays: give it back
    // now, while a sync is still allowed (a capture cannot reuse it, and could not sync for it later).
    NPU_CHECK(nrtDeviceSynchronize());
    NPUCachingAllocator::releaseDeadPools(device_);
  }
  NPU_CHECK(nrtStreamBeginCapture(capture_stream_, mode));
  nrtCaptureStatus status = NRT_CAPTURE_STATUS_NONE;
  NPU_CHECK(nrtStreamGetCaptureInfo(capture_stream_, &status, &capture_id_));
  // A pool of its own is named after the capture, as CUDA names private pools {capture id, 0}.
  mempool_id_ = (pool.first != 0 || pool.second != 0) ? pool : c10::MempoolId_t{capture_id_, 0};
  const uint64_t capture_id = capture_id_;
  try {
    // Allocations on streams recording into this capture (the capturing stream and those forked
    // from it) come from the graph's pool.
    NPUCachingAllocator::beginAllocateToPool(device_, mempool_id_, [capture_id](nrtStream_t s) {
      nrtCaptureStatus st = NRT_CAPTURE_STATUS_NONE;
      uint64_t id = 0;
      return nrtStreamGetCaptureInfo(s, &st, &id) == NRT_SUCCESS && st != NRT_CAPTURE_STATUS_NONE &&
             id == capture_id;
    });
  } catch (...) {
    nrtGraph_t dropped = nullptr;
    if (nrtStreamEndCapture(capture_stream_, &dropped) == NRT_SUCCESS) nrtGraphDestroy(dropped);
    throw;
  }
  pool_held_ = true;
  capturing_ = true;
  generators_.clear();
  slots_.clear();
  slot_of_.clear();
  generators_.push_back({getDefaultNPUGenerator(device_).getIntrusivePtr()});
  for (const at::Generator& generator : registered_) {
    if (generator.unsafeGetGeneratorImpl() != generators_[0].impl.get()) generators_.push_back({generator.getIntrusivePtr()});
  }
  t_capturing = this;
  {
    std::lock_guard<std::mutex> lock(g_capturing_mu);
    g_capturing->push_back(this);
  }
  g_captures.fetch_add(1, std::memory_order_relaxed);
}

void NPUGraph::captureEnd() {
  TORCH_CHECK(capturing_, "NPUGraph::capture_end() called without a preceding capture_begin()");
  const NPUStream stream = getCurrentNPUStream(device_);
  TORCH_CHECK(stream.handle() == capture_stream_,
              "capture_end() must be called on the stream capture_begin() was called on (the capture's current "
              "stream); the current stream changed in between");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  NPUCachingAllocator::endAllocateToPool(device_, mempool_id_);
  capturing_ = false;
  t_capturing = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_capturing_mu);
    std::erase(*g_capturing, this);
  }
  g_captures.fetch_sub(1, std::memory_order_relaxed);
  const nrtError_t error = nrtStreamEndCapture(capture_stream_, &graph_);
  if (error != NRT_SUCCESS) {
    const std::string message = nrtGetRecentErrMsg();
    graph_ = nullptr;
    reset();  // gives the pool back
    TORCH_CHECK(false, "NPU graph capture failed: ", message);
  }
}

void NPUGraph::replay() {
  TORCH_CHECK(graph_ != nullptr, "NPUGraph::replay() called without a preceding successful capture");
  noteDeviceLaunch();  // like any launch: this thread stops computing, its OpenMP team goes
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  // The captured random ops' seeds: each generator's next draws, in the order eager would make them.
  std::vector<uint64_t> seeds(slots_.size());
  for (size_t g = 0; g < generators_.size(); ++g) {
    if (generators_[g].count == 0) continue;
    std::vector<uint64_t> draws(generators_[g].count);
    const at::Generator generator(generators_[g].impl);
    at::Generator engine = generator.get<NPUGeneratorImpl>()->engine();
    {
      std::lock_guard<std::mutex> lock(engine.mutex());
      for (uint64_t& draw : draws) draw = engine.get<at::CPUGeneratorImpl>()->random64();
    }
    for (size_t slot = 0; slot < slots_.size(); ++slot) {
      if (slots_[slot].first == g) seeds[slot] = draws[slots_[slot].second];
    }
  }
  NPU_CHECK(nrtGraphLaunch(graph_, currentStreamHandle(device_), seeds.data(), seeds.size()));
}

void NPUGraph::reset() {
  if (graph_ != nullptr) {
    nrtGraphDestroy(graph_);
    graph_ = nullptr;
  }
  if (pool_held_) {
    pool_held_ = false;
    releasePoolUser(device_, mempool_id_);
  }
}

c10::MempoolId_t NPUGraph::pool() const {
  TORCH_CHECK(graph_ != nullptr || capturing_,
              "Called NPUGraph::pool() without a preceding successful capture_begin()");
  return mempool_id_;
}

void NPUGraph::debugDump(const std::string& path) const {
  TORCH_CHECK(graph_ != nullptr, "NPUGraph::debug_dump() called without a captured graph");
  NPU_CHECK(nrtGraphDebugDump(graph_, path.c_str()));
}

size_t NPUGraph::taskCount() const {
  if (graph_ == nullptr) return 0;
  size_t count = 0;
  NPU_CHECK(nrtGraphGetNodeCount(graph_, &count));
  return count;
}

}  // namespace c10_npu
