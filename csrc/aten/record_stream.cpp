// Tensor.record_stream(s): the caller promises the tensor's memory is used by
// work queued on stream s, so the allocator must not hand the block out again
// before that work is done. The allocator owns the bookkeeping; this kernel
// only validates the call and forwards it (torch_neuronx has the same kernel).
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/library.h>

#include "neuron.h"

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
