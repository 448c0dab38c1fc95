"""RMSNorm with the rows on the partitions: y = x / sqrt(mean(x²) + eps) · w.
The squares and their row sum come from one ScalarE instruction
(activation with add-reduce); the weight row is DMA'd to every partition with
a broadcast access pattern.

    python examples/nki/rmsnorm.py
"""
import torch

import torch_neuron_sim

torch_neuron_sim.install_torch_neuronx_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import torch_neuronx  # noqa: E402


@nki.jit
def rmsnorm_kernel(x, weight, eps=1e-6):
    R, D = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((R, D), x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((P, D), weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight.reshape((1, D)).broadcast_to((P, D)))
    for i in nl.affine_range((R + P - 1) // P):
        r0, p = i * P, min(P, R - i * P)
        t = nl.ndarray((p, D), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + p, :])
        squares = nl.ndarray((p, D), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares, op=nl.square, data=t, reduce_op=nl.add, reduce_res=total,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        mean_eps = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean_eps, data=total, op0=nl.multiply, operand0=1.0 / D, op1=nl.add,
                           operand1=eps)
        inv_rms = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_rms, op=nl.rsqrt, data=mean_eps)
        normed = nl.ndarray((p, D), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=t, op0=nl.multiply, operand0=inv_rms)
        y = nl.ndarray((p, D), x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=normed, data2=w[0:p, :], op=nl.multiply)
        nisa.dma_copy(dst=out[r0:r0 + p, :], src=y)
    return out


def main() -> None:
    x = torch.randn(200, 768, device="neuron")
    w = torch.randn(768, device="neuron")
    out = torch_neuronx.wrap_nki(rmsnorm_kernel)(x, w)
    ref = torch.nn.functional.rms_norm(x, (768,), w, eps=1e-6)
    torch.testing.assert_close(out, ref)
    print("RMSNorm kernel matches F.rms_norm:", tuple(out.shape))


if __name__ == "__main__":
    main()
