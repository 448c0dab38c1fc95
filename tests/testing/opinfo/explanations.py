"""Why an op differs from the CPU on `neuron`, per cell of docs/op-coverage.md:
keyed by (OpInfo entry, dtype, direction "fwd"/"bwd"), so an explanation
covers exactly the cells it was written for and a new difference in another
dtype or direction needs its own. docs/op-coverage.md prints these next to
each difference; the suite fails on a difference without one, and on an
explanation of a cell that does not differ."""

_SPARSE = ("sparse COO layout: the CPU computes to_sparse, and putting its sparse result on the device fails, "
           "as on TorchNeuron (no sparse kernels: PyTorch's 'Could not run ... SparsePrivateUse1'); the emulator "
           "raises NotImplementedError naming the limitation at that step (docs/semantics.md, unsupported features)")
_CSR = ("sparse CSR samples: op_db makes them on neuron with to_sparse_csr(), whose result PyTorch builds on the "
        "device without dispatching to it (as on TorchNeuron); their first use - the op, or the copy to the CPU for "
        "the reference - raises NotImplementedError naming the limitation, where TorchNeuron fails with PyTorch's "
        "dispatcher or layout error (docs/semantics.md, unsupported features)")
_DECOMPOSED = ("no device kernel: PyTorch's decomposition runs op by op in the 16-bit dtype on neuron, as "
               "the device computes it; the CPU's fused kernel keeps float32 intermediates")


def _cells(op: str, why: str, *cells: str) -> dict:
    """{(op, dtype, direction): why} for cells spelled "dtype direction"."""
    return {(op, *cell.split()): why for cell in cells}


_F16 = ("bfloat16 fwd", "bfloat16 bwd", "float16 fwd", "float16 bwd")
_INDEX_PUT = ("op_db's mask sample builds the boolean mask on the CPU (torch.zeros(S, dtype=torch.bool), not on "
              "the device): TorchNeuron's index_put (its _index_put_impl_) refuses a non-0-dim CPU tensor among "
              "its inputs with this message (docs/semantics.md, 'a CPU tensor among neuron inputs'); only reads "
              "(x[cpu_index]) take CPU indices")

EXPLAINED: dict = {
    # 16-bit decompositions
    **_cells("addr", "addr in bfloat16/float16: " + _DECOMPOSED, "bfloat16 fwd", "float16 fwd"),
    **_cells("native_group_norm", "native_group_norm in bfloat16/float16: " + _DECOMPOSED,
             "bfloat16 fwd", "float16 fwd", "float16 bwd"),
    **_cells("nn.functional.group_norm", "group_norm in bfloat16/float16: " + _DECOMPOSED,
             "bfloat16 fwd", "float16 fwd", "float16 bwd"),
    **_cells("nn.functional.mish", "mish_backward in bfloat16/float16: " + _DECOMPOSED, "bfloat16 bwd", "float16 bwd"),
    **_cells("nn.functional.linear_cross_entropy.chunked_none",
             "chunked linear_cross_entropy (reduction='none') in bfloat16/float16: " + _DECOMPOSED, *_F16),
    # the device's mixed-device check
    **_cells("index_put", _INDEX_PUT, "float32 fwd", "float32 bwd", "bfloat16 fwd", "bfloat16 bwd",
             "float16 fwd", "float16 bwd", "int32 fwd"),
    # unsupported layouts
    **_cells("to_sparse", _SPARSE, "float32 fwd", "float32 bwd", "bfloat16 fwd", "float16 fwd", "int32 fwd"),
    **_cells("sparse.mm.reduce", _CSR, "float32 fwd", "float32 bwd", *_F16),
    **_cells("sparse.sampled_addmm", _CSR, "float32 fwd", "float32 bwd"),
}
