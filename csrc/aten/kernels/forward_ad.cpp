// Forward-mode AD is not supported on neuron: TorchNeuron implements
// reverse mode only (its source registers no forward-AD formula or dual-tensor
// kernel; docs/semantics.md, "Unsupported features"). Every forward-AD
// entry point - torch.autograd.forward_ad.make_dual, torch.func.jvp, jacfwd -
// makes a dual tensor through aten::_make_dual, so refusing it there fails
// loudly at the first step instead of with a missing-kernel error later.
#include "aten/precompiled.h"  // first: precompiled (docs/building.md)
#include <torch/library.h>

#include "aten/execution/fallback_policy.h"

namespace neuron_sim {
namespace {

at::Tensor makeDual(const at::Tensor& primal, const at::Tensor& tangent, int64_t level) {
  noteUnsupported("forward-mode AD");
  TORCH_CHECK_NOT_IMPLEMENTED(false,
      "neuron: forward-mode AD (torch.autograd.forward_ad dual tensors, torch.func.jvp, torch.func.jacfwd) "
      "is not supported: Trainium (TorchNeuron) implements reverse-mode autograd only. Use reverse mode "
      "(loss.backward(), torch.autograd.grad, torch.func.vjp or torch.func.jacrev), or compute the "
      "forward-mode derivative on CPU tensors (.cpu()).");
}

}  // namespace

// On the autograd key: the generic autograd kernel of _make_dual never
// reaches the backend (it makes an alias below autograd).
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_make_dual", makeDual);
}

}  // namespace neuron_sim
