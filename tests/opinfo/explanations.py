"""Why an op differs from the CPU on `neuron`, per OpInfo entry (and
direction, "fwd"/"bwd", when only one differs). docs/op-coverage.md prints
these next to each difference; the suite fails on a difference without one."""

_SPARSE = ("sparse tensors are not supported on Trainium (docs/semantics.md, unsupported features): "
           "the device raises NotImplementedError where the CPU computes")
_CSR = ("sparse CSR samples: op_db builds the CSR tensor on neuron through a constructor that does not "
        "dispatch to the device, so it is not refused when made; its first use raises PyTorch's layout "
        "error instead of the emulator's 'sparse tensors are not supported' (a known gap: the device "
        "has no sparse layouts either way)")
_DECOMPOSED = ("no device kernel: PyTorch's decomposition runs op by op in the 16-bit dtype on neuron, as "
               "the device computes it; the CPU's fused kernel keeps float32 intermediates")

EXPLAINED: dict = {
    # the 64-bit rule: dtype=float64 is computed in float32
    "log_softmax.with_dtype": "dtype=torch.float64 computed in float32 by the 64-bit rule (docs/semantics.md), "
                              "then cast back; the CPU computes in float64",
    # 16-bit decompositions
    "addr": "addr in float16: " + _DECOMPOSED,
    "native_group_norm": "native_group_norm in bfloat16/float16: " + _DECOMPOSED,
    "nn.functional.group_norm": "group_norm in bfloat16/float16: " + _DECOMPOSED,
    ("nn.functional.mish", "bwd"): "mish_backward in bfloat16/float16: " + _DECOMPOSED,
    ("nn.functional.linear_cross_entropy.chunked", "bwd"): "chunked linear_cross_entropy backward in bfloat16/float16: "
                                                            + _DECOMPOSED,
    "nn.functional.linear_cross_entropy.chunked_none": "chunked linear_cross_entropy (reduction='none') in "
                                                       "bfloat16/float16: " + _DECOMPOSED,
    # unsupported layouts
    "to_sparse": _SPARSE,
    "sparse.mm.reduce": _CSR,
    "sparse.sampled_addmm": _CSR,
}
