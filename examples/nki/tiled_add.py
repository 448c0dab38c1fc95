"""Tiled addition, the first NKI kernel: out = a + b for [M, N] tensors, in
128 x 512 tiles (128 rows on the partitions). Two forms: a loop over the
tiles inside one kernel instance, and an SPMD grid with one instance per
tile reading its position from nl.program_id.

    python examples/nki/tiled_add.py
"""
import torch

import torch_neuron_sim

torch_neuron_sim.install_torch_neuronx_alias()  # `import nki` -> the simulator unless nki is installed
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import torch_neuronx  # noqa: E402

TILE_P, TILE_F = 128, 512


@nki.jit
def add_kernel(a, b):
    """Loop form: one instance walks every tile (edge tiles may be smaller)."""
    M, N = a.shape
    out = nl.ndarray((M, N), a.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range((M + TILE_P - 1) // TILE_P):
        for n in nl.affine_range((N + TILE_F - 1) // TILE_F):
            rows, cols = min(TILE_P, M - m * TILE_P), min(TILE_F, N - n * TILE_F)
            r = slice(m * TILE_P, m * TILE_P + rows)
            c = slice(n * TILE_F, n * TILE_F + cols)
            ta = nl.ndarray((rows, cols), a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((rows, cols), b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta, src=a[r, c])
            nisa.dma_copy(dst=tb, src=b[r, c])
            tc = nl.ndarray((rows, cols), a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
            nisa.dma_copy(dst=out[r, c], src=tc)
    return out


@nki.jit
def add_kernel_spmd(a, b):
    """Grid form: launched as add_kernel_spmd[M // 128, N // 512]; each instance adds its tile."""
    m, n = nl.program_id(0), nl.program_id(1)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    r = slice(m * TILE_P, (m + 1) * TILE_P)
    c = slice(n * TILE_F, (n + 1) * TILE_F)
    ta = nl.load(a[r, c])
    tb = nl.load(b[r, c])
    nl.store(out[r, c], value=nl.add(ta, tb))
    return out


def main() -> None:
    a = torch.randn(256, 1024, device="neuron")
    b = torch.randn(256, 1024, device="neuron")
    loop = torch_neuronx.wrap_nki(add_kernel)(a, b)
    grid = torch_neuronx.wrap_nki(add_kernel_spmd)[a.shape[0] // TILE_P, a.shape[1] // TILE_F](a, b)
    torch.testing.assert_close(loop, a + b)
    torch.testing.assert_close(grid, a + b)
    print("tiled add (loop and grid) match a + b on", loop.device)
    print("executed:", [n for n in torch_neuronx.get_executed_ops() if n.startswith("nki_")])


if __name__ == "__main__":
    main()
