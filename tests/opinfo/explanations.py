"""Why an op differs from the CPU on `neuron`, per OpInfo entry (and
direction, "fwd"/"bwd", when only one differs). docs/op-coverage.md prints
these next to each difference; the suite fails on a difference without one."""

_SPARSE = ("sparse COO layout: the CPU computes to_sparse, and putting its sparse result on the device fails, "
           "as on TorchNeuron (no sparse kernels: PyTorch's 'Could not run ... SparsePrivateUse1'); the emulator "
           "raises NotImplementedError naming the limitation at that step (docs/semantics.md, unsupported features)")
_CSR = ("sparse CSR samples: op_db makes them on neuron with to_sparse_csr(), whose result PyTorch builds on the "
        "device without dispatching to it (as on TorchNeuron); their first use - the op, or the copy to the CPU for "
        "the reference - raises NotImplementedError naming the limitation, where TorchNeuron fails with PyTorch's "
        "dispatcher or layout error (docs/semantics.md, unsupported features)")
_DECOMPOSED = ("no device kernel: PyTorch's decomposition runs op by op in the 16-bit dtype on neuron, as "
               "the device computes it; the CPU's fused kernel keeps float32 intermediates")

EXPLAINED: dict = {
    # 16-bit decompositions
    "addr": "addr in bfloat16/float16: " + _DECOMPOSED,
    "native_group_norm": "native_group_norm in bfloat16/float16: " + _DECOMPOSED,
    "nn.functional.group_norm": "group_norm in bfloat16/float16: " + _DECOMPOSED,
    ("nn.functional.mish", "bwd"): "mish_backward in bfloat16/float16: " + _DECOMPOSED,
    ("nn.functional.linear_cross_entropy.chunked", "bwd"): "chunked linear_cross_entropy backward in bfloat16/float16: "
                                                            + _DECOMPOSED,
    "nn.functional.linear_cross_entropy.chunked_none": "chunked linear_cross_entropy (reduction='none') in "
                                                       "bfloat16/float16: " + _DECOMPOSED,
    # the device's mixed-device check
    "index_put": ("op_db's mask sample builds the boolean mask on the CPU (torch.zeros(S, dtype=torch.bool), not on "
                  "the device): TorchNeuron's index_put (its _index_put_impl_) refuses a non-0-dim CPU tensor among "
                  "its inputs with this message (docs/semantics.md, 'a CPU tensor among neuron inputs'); only reads "
                  "(x[cpu_index]) take CPU indices"),
    # unsupported layouts
    "to_sparse": _SPARSE,
    "sparse.mm.reduce": _CSR,
    "sparse.sampled_addmm": _CSR,
}
