// Tensor.record_stream(s): the caller promises the tensor's memory is used by
// work queued on stream s, so on hardware the allocator must not hand the
// block out again before that work is done. Here kernels finish when they
// are launched: no stream ever has pending work on a block, so the
// allocator's recordStream has nothing to hold back and does nothing
// (allocator.cpp). This kernel checks the call as torch_neuronx's kernel
// does - a neuron stream - and forwards it to the allocator.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/library.h>

#include "aten/neuron.h"

namespace neuron_sim {
namespace {

void recordStream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "record_stream: a neuron tensor can only be recorded on a neuron "
              "stream, got a stream of device type ", c10::DeviceTypeName(stream.device_type(), true));
  if (!self.has_storage() || !self.storage().data()) return;  // nothing allocated, nothing to protect
  c10::getDeviceAllocator(kNeuron)->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", recordStream);
}

}  // namespace neuron_sim
