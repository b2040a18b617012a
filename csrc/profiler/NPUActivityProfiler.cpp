// NPUActivityProfiler.cpp - the npu plugin of PyTorch's Kineto profiler: a session records the runtime's
// device activity and hands it to Kineto as device events linked to the ops that launched them, so that
// torch.profiler (ProfilerActivity.PrivateUse1) and torch.autograd.profiler.profile(use_device="npu")
// show npu time per op and device rows in their traces.
#define USE_KINETO 1  // the plugin registry is compiled only for Kineto builds, which the torch wheel is
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>  // CpuTraceBuffer
#include <output_base.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/Logging.h>

#include "csrc/profiler/NPUActivityCollector.h"

namespace torch_npu::profiler {
namespace {

using libkineto::ActivityType;

ActivityType kinetoType(uint32_t kind) {
  switch (kind) {
    case NRT_ACTIVITY_MEMCPY: return ActivityType::GPU_MEMCPY;
    case NRT_ACTIVITY_MEMSET: return ActivityType::GPU_MEMSET;
    case NRT_ACTIVITY_EVENT_RECORD:
    case NRT_ACTIVITY_EVENT_WAIT: return ActivityType::CUDA_SYNC;
    default: return ActivityType::CONCURRENT_KERNEL;  // device ops, kernels, host tasks, collectives
  }
}

const char* kindName(uint32_t kind) {
  switch (kind) {
    case NRT_ACTIVITY_HOST_TASK: return "host_task";
    case NRT_ACTIVITY_DEVICE_OP: return "device_op";
    case NRT_ACTIVITY_KERNEL: return "kernel";
    case NRT_ACTIVITY_MEMCPY: return "memcpy";
    case NRT_ACTIVITY_MEMSET: return "memset";
    case NRT_ACTIVITY_EVENT_RECORD: return "event_record";
    case NRT_ACTIVITY_EVENT_WAIT: return "event_wait";
    case NRT_ACTIVITY_COLLECTIVE: return "collective";
    default: return "task";
  }
}

class NPUActivitySession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    NPUActivityCollector::get().start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    auto& collector = NPUActivityCollector::get();
    collector.stop();
    records_ = collector.records();
    const std::string warning = collector.warning();
    if (!warning.empty()) {
      errors_.push_back(warning);
      LOG(WARNING) << "npu profiler: " << warning;
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { emit(logger, nullptr); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t /*start_time*/, int64_t /*end_time*/) override {
    emit(logger, &linked);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int32_t device = records_.empty() ? 0 : records_.front().device;
    // Sorted after the host process rows.
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, 0x1000000 + device, "NPU " + std::to_string(device), "npu:" + std::to_string(device)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int32_t, uint64_t>> seen;
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& r : records_) {
      if (!seen.emplace(r.device, r.stream_id).second) continue;
      const std::string name = r.stream_id == 0 ? std::string("synchronous copies")
                                                : "stream " + std::to_string(r.stream_id);
      out.push_back(libkineto::ResourceInfo{static_cast<int64_t>(r.stream_id), static_cast<int64_t>(r.stream_id),
                                            r.device, name});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  // Kineto calls these on the thread running each profiled op: the runtime stamps that op's id on the
  // device work the thread launches meanwhile.
  void pushCorrelationId(uint64_t id) override { nrtActivityPushCorrelationId(id); }
  void popCorrelationId() override { nrtActivityPopCorrelationId(); }

 private:
  void emit(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback* linked) {
    static const libkineto::TraceSpan span(0, 0, "npu");
    for (const auto& r : records_) {
      libkineto::GenericTraceActivity a(span, kinetoType(r.kind), r.name);
      a.startTime = static_cast<int64_t>(r.start_ns);
      a.endTime = static_cast<int64_t>(r.end_ns);
      a.device = r.device;
      a.resource = static_cast<int32_t>(r.stream_id);
      a.id = static_cast<int32_t>(r.correlation_id);
      if (r.correlation_id != 0) {
        if (linked != nullptr) a.linked = (*linked)(static_cast<int32_t>(r.correlation_id));
        a.flow.id = static_cast<uint32_t>(r.correlation_id);
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = 0;
      }
      // Quoted values only: addMetadata formats numbers with fmt, which the torch wheel does not export.
      a.addMetadataQuoted("kind", kindName(r.kind));
      a.addMetadataQuoted("stream", std::to_string(r.stream_id));
      a.addMetadataQuoted("correlation", std::to_string(r.correlation_id));
      if (r.bytes != 0) a.addMetadataQuoted("bytes", std::to_string(r.bytes));
      if (r.block_dim != 0) a.addMetadataQuoted("block dim", std::to_string(r.block_dim));
      if (r.failed) a.addMetadataQuoted("failed", "true");
      a.log(logger);
    }
  }

  std::vector<nrtActivityRecord> records_;
  std::vector<std::string> errors_;
};

class NPUActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config& /*config*/) override {
    // Only sessions that asked for device activity (ProfilerActivity.PrivateUse1) record it.
    if (types.count(ActivityType::CONCURRENT_KERNEL) == 0) return nullptr;
    return std::make_unique<NPUActivitySession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"npu"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_MEMSET, ActivityType::CUDA_SYNC};
};

}  // namespace

REGISTER_PRIVATEUSE1_PROFILER(NPUActivityProfiler);

}  // namespace torch_npu::profiler
