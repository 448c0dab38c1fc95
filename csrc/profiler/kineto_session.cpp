// The neuron device's rows in torch.profiler. PyTorch's Kineto integration
// lets a PrivateUse1 backend register a child activity profiler
// (REGISTER_PRIVATEUSE1_PROFILER, torch/csrc/profiler/standalone/
// privateuse1_profiler.h). For each profile Kineto asks it for a session,
// starts and stops it with the capture window, forwards the correlation id of
// every CPU op as it begins and ends, and finally calls processTrace, where
// the session hands each device activity to the logger. Those activities end
// up in the Chrome trace and in key_averages() as device time.
//
// The header compiles to nothing unless USE_KINETO is defined: this file is
// built as its own extension, torch_neuron_sim._kineto, with that define and
// torch's bundled Kineto headers (setup.py), so they reach no other file. It
// reads the device timeline of torch_neuron_sim._C through TimelineApi,
// which bindings/kineto_module.cpp (the module's Python side) connects.
#ifndef USE_KINETO
#error "kineto_session.cpp must be built with USE_KINETO (setup.py); without it there would be no device rows"
#endif
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>    // CpuTraceBuffer
#include <output_base.h>  // ActivityLogger

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "profiler/kineto_session.h"
#include "profiler/timeline_api.h"

namespace neuron_sim::profiler {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

// Set once at import (_connect); until then no session is created.
std::atomic<const TimelineApi*> g_api{nullptr};

// The activity types a profile with ProfilerActivity.PrivateUse1 selects;
// PyTorch maps the GPU ones to the PrivateUse1 device in key_averages().
const std::set<ActivityType>& deviceTypes() {
  static const std::set<ActivityType> types = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                               ActivityType::PRIVATEUSE1_RUNTIME};
  return types;
}

ActivityType deviceActivityType(runtime::EventKind k) {
  switch (k) {
    case runtime::EventKind::kCopyH2D:
    case runtime::EventKind::kCopyD2H:
    case runtime::EventKind::kCopyD2D:
      return ActivityType::GPU_MEMCPY;
    default:
      return ActivityType::CONCURRENT_KERNEL;
  }
}

// The host-side call that launched a device event, as the real runtime names it.
const char* runtimeCallName(runtime::EventKind k) {
  switch (k) {
    case runtime::EventKind::kKernel: return "nrt_execute";
    case runtime::EventKind::kGraph: return "nrt_execute";
    case runtime::EventKind::kFallback: return "neuron cpu fallback";
    case runtime::EventKind::kCopyH2D: return "nrt_tensor_write";
    case runtime::EventKind::kCopyD2H: return "nrt_tensor_read";
    case runtime::EventKind::kCopyD2D: return "nrt_tensor_copy";
    case runtime::EventKind::kCompile: return "neuronx-cc";
    case runtime::EventKind::kCollective: return "nrt_cc";
  }
  return "nrt";
}

class NeuronSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit NeuronSession(const TimelineApi* api, bool with_runtime) : api_(api), with_runtime_(with_runtime) {}
  ~NeuronSession() override {
    if (recording_) api_->remove_recorder();
  }

  void start() override {
    if (!recording_) {
      api_->add_recorder();
      recording_ = true;
    }
    first_ = api_->event_count();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    last_ = api_->event_count();
    api_->events(first_, last_, &events_);
    if (recording_) {
      api_->remove_recorder();
      recording_ = false;
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, INT64_MAX); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t window_start, int64_t window_end) override {
    // Kineto and PyTorch keep pointers to the activities after this session
    // is gone: they live in a CpuTraceBuffer handed to Kineto afterwards
    // (getTraceBuffer), which the finished trace owns.
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(window_start, window_end, "neuron");
    const int32_t pid = libkineto::processId();
    for (const auto& e : events_) {
      // Modelled times can run past the end of the capture window: clamp.
      const int64_t start = std::clamp(e.start_ns, window_start, window_end);
      const int64_t end = std::clamp(e.end_ns, start, window_end);
      if (e.issue_ns < window_start || e.issue_ns > window_end) continue;
      const libkineto::ITraceActivity* cpu_op = (linked && e.correlation) ? linked(e.correlation) : nullptr;
      const uint32_t flow = ++flow_id_;

      buffer_->emplace_activity(buffer_->span, deviceActivityType(e.kind), *e.name);
      auto& dev = *buffer_->activities.back();
      dev.startTime = start;
      dev.endTime = end;
      dev.id = static_cast<int32_t>(e.correlation);
      dev.device = e.device;
      dev.resource = static_cast<int32_t>(e.stream);
      dev.threadId = static_cast<int32_t>(e.stream);
      dev.linked = cpu_op;
      dev.addMetadataQuoted("device", "neuron:" + std::to_string(e.device));
      dev.addMetadata("stream", e.stream);
      dev.addMetadataQuoted("kind", runtime::eventKindName(e.kind));
      dev.addMetadataQuoted("bound", runtime::regimeName(e.regime));
      dev.addMetadata("modelled us", e.seconds * 1e6);
      if (e.flops > 0) dev.addMetadata("flops", e.flops);
      if (e.bytes > 0) dev.addMetadata("bytes", e.bytes);
      if (e.in_fallback) dev.addMetadata("cpu fallback", "true");
      dev.addMetadataQuoted("estimate", "cost model, docs/profiling.md");
      streams_.insert({e.device, e.stream});

      if (with_runtime_) {
        // The launch on the issuing host thread, nested in its CPU op; the
        // flow arrow goes from it to the device event, as for cudaLaunchKernel.
        buffer_->emplace_activity(buffer_->span, ActivityType::PRIVATEUSE1_RUNTIME, runtimeCallName(e.kind));
        auto& rt = *buffer_->activities.back();
        rt.startTime = std::clamp(e.issue_ns, window_start, window_end);
        rt.endTime = std::clamp(std::max(e.host_end_ns, e.issue_ns), rt.startTime, window_end);
        rt.id = static_cast<int32_t>(e.correlation);
        rt.device = pid;
        rt.resource = e.thread;
        rt.threadId = e.thread;
        rt.linked = cpu_op;
        rt.flow.id = flow;
        rt.flow.type = libkineto::kLinkAsyncCpuGpu;
        rt.flow.start = true;
        logger.handleActivity(rt);
        dev.flow.id = flow;
        dev.flow.type = libkineto::kLinkAsyncCpuGpu;
        dev.flow.start = false;
      }
      logger.handleActivity(dev);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int device = streams_.empty() ? 0 : streams_.begin()->first;
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        device, device + 0x1000000, "neuron", "neuron:" + std::to_string(device) + " (simulated, cost model)"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : streams_)
      out.push_back({stream, stream, device, "neuron:" + std::to_string(device) + " stream " + std::to_string(stream)});
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { api_->push_correlation(id); }
  void popCorrelationId() override { api_->pop_correlation(); }

 private:
  const TimelineApi* api_;
  bool with_runtime_;
  bool recording_ = false;
  uint64_t first_ = 0, last_ = 0;
  uint32_t flow_id_ = 0;
  std::vector<runtime::DeviceEvent> events_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<std::pair<int, int64_t>> streams_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return deviceTypes(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    // PRIVATEUSE1_RUNTIME is also among a CPU-only profile's types: device
    // rows are wanted only when the kernel or memcpy types are.
    const bool wanted = types.count(ActivityType::CONCURRENT_KERNEL) || types.count(ActivityType::GPU_MEMCPY);
    const TimelineApi* api = g_api.load();
    if (!wanted || !api) return nullptr;  // a CPU-only profile: nothing to record
    return std::make_unique<NeuronSession>(api, types.count(ActivityType::PRIVATEUSE1_RUNTIME) > 0);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
};

}  // namespace

void connectTimeline(const TimelineApi* api) { g_api.store(api); }

}  // namespace neuron_sim::profiler

using NeuronActivityProfiler = neuron_sim::profiler::NeuronActivityProfiler;
REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);
