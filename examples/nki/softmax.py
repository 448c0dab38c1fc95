"""Row softmax with the rows on the partitions: per 128-row tile, the negated
row max (tensor_reduce), exp(x - max) with its row sum in the same ScalarE
instruction (activation's add-reduce), the reciprocal of the sum, and a
per-partition scale (tensor_scalar).

    python examples/nki/softmax.py
"""
import torch

import torch_neuron_sim

torch_neuron_sim.install_torch_neuronx_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import torch_neuronx  # noqa: E402


@nki.jit
def softmax_kernel(x):
    R, C = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((R, C), x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((R + P - 1) // P):
        r0, p = i * P, min(P, R - i * P)
        t = nl.ndarray((p, C), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + p, :])
        neg_max = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((p, C), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv, op=nl.reciprocal, data=total)
        y = nl.ndarray((p, C), x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[r0:r0 + p, :], src=y)
    return out


def main() -> None:
    x = torch.randn(300, 1000, device="neuron")
    out = torch_neuronx.wrap_nki(softmax_kernel)(x)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))
    print("softmax kernel matches torch.softmax:", tuple(out.shape))


if __name__ == "__main__":
    main()
