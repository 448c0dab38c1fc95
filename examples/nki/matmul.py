"""Matrix multiplication on TensorE: out[M, N] = lhsT[K, M]ᵀ · rhs[K, N].

TensorE contracts over the partition dimension, so both operands hold K on
their 128 partitions and the left operand comes transposed. Each output tile
(128 x 512, one 2 KiB PSUM bank of fp32 per partition) accumulates the
products of K / 128 pairs of tiles in PSUM: the first nc_matmul into the bank
overwrites it, the later ones add. bf16 inputs, fp32 accumulation; the
result is copied from PSUM to SBUF and DMA'd to HBM. docs/nki.md walks
through it.

    python examples/nki/matmul.py
"""
import torch

import torch_neuron_sim

torch_neuron_sim.install_torch_neuronx_alias()
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import torch_neuronx  # noqa: E402


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_, f"contraction sizes differ: lhsT has K={K}, rhs has K={K_}"
    TK = nl.tile_size.pmax                   # 128: K on the partitions
    TM = nl.tile_size.gemm_stationary_fmax   # 128: stationary free size
    TN = nl.tile_size.psum_fmax              # 512: fp32 values in one PSUM bank
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range((M + TM - 1) // TM):
        m0, mt = m * TM, min(TM, M - m * TM)
        for n in nl.affine_range((N + TN - 1) // TN):
            n0, nt = n * TN, min(TN, N - n * TN)
            acc = nl.ndarray((mt, nt), nl.float32, buffer=nl.psum)
            for k in nl.affine_range((K + TK - 1) // TK):
                k0, kt = k * TK, min(TK, K - k * TK)
                stationary = nl.ndarray((kt, mt), lhsT.dtype, buffer=nl.sbuf)
                moving = nl.ndarray((kt, nt), rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=stationary, src=lhsT[k0:k0 + kt, m0:m0 + mt])
                nisa.dma_copy(dst=moving, src=rhs[k0:k0 + kt, n0:n0 + nt])
                nisa.nc_matmul(acc, stationary, moving)   # accumulates over k in PSUM
            result = nl.ndarray((mt, nt), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result, src=acc)
            nisa.dma_copy(dst=out[m0:m0 + mt, n0:n0 + nt], src=result)
    return out


def main() -> None:
    a = torch.randn(512, 384, dtype=torch.bfloat16, device="neuron")
    b = torch.randn(384, 1024, dtype=torch.bfloat16, device="neuron")
    out = torch_neuronx.wrap_nki(matmul_kernel)(a.T.contiguous(), b)
    ref = a.float() @ b.float()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-3)
    print("matmul kernel (bf16 in, fp32 PSUM accumulation) matches torch.matmul:", tuple(out.shape), out.dtype)
    est = torch_neuron_sim.estimate(lambda: torch_neuronx.wrap_nki(matmul_kernel)(a.T.contiguous(), b))
    print(est.table(row_limit=5))


if __name__ == "__main__":
    main()
