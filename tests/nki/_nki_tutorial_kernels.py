"""Kernels in the dialect of AWS's NKI tutorials (tensor addition, SPMD addition over two
cores, matrix multiplication, transpose2d, average_pool2d, a fused Mamba scan), written
for these tests as users write them: `neuronxcc.nki` module paths, nl.arange / nl.mgrid
index arithmetic, nl.par_dim block tiles, nl.spmd_dim grids, legacy ISA calls that return
their result. Imported after the `neuronxcc` alias is installed."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def add_tiles(a, b):
    """a + b over [128, 512] tiles addressed by shifted nl.arange index tiles."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    ip = nl.arange(128)[:, None]
    jf = nl.arange(512)[None, :]
    for r in nl.affine_range(rows // 128):
        for c in nl.affine_range(cols // 512):
            x = nl.load(a[r * 128 + ip, c * 512 + jf])
            y = nl.load(b[r * 128 + ip, c * 512 + jf])
            nl.store(out[r * 128 + ip, c * 512 + jf], value=x + y)
    return out


@nki.jit
def add_block(a, b):
    """One [128, 512] block of a + b per SPMD instance: nl.mgrid indices offset by program_id."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    row0 = nl.program_id(0) * 128
    col0 = nl.program_id(1) * 512
    i, j = nl.mgrid[0:128, 0:512]
    x = nl.load(a[row0 + i, col0 + j])
    y = nl.load(b[row0 + i, col0 + j])
    nl.store(out[row0 + i, col0 + j], value=nl.add(x, y))
    return out


def add_on_two_cores(a, b):
    """The grid's first dimension sharded over two NeuronCores, as the SPMD tutorial launches it."""
    grid_rows = a.shape[0] // (128 * 2)
    grid_cols = a.shape[1] // 512
    return add_block[nl.spmd_dim(grid_rows, nl.nc(2)), grid_cols](a, b)


@nki.jit
def matmul_psum(lhsT, rhs):
    """lhsT.T @ rhs, K tiled by 128, accumulated in PSUM with the legacy `+=` form."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    ik = nl.arange(128)[:, None]
    im = nl.arange(M)[None, :]
    i_n = nl.arange(N)[None, :]
    acc = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        s = nl.load(lhsT[k * 128 + ik, im])
        m = nl.load(rhs[k * 128 + ik, i_n])
        acc += nisa.nc_matmul(s, m)
    nl.store(out, value=nl.copy(acc, dtype=nl.float32))
    return out


@nki.jit
def transpose_rows(x, shape2d):
    """Each row of x holds a row-major (f1, f2) matrix; the result holds it transposed,
    by an SBUF-to-SBUF copy through two access patterns of a rank-3 nl.mgrid."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, _ = x.shape
    f1, f2 = shape2d
    tile = nl.load(x)
    ip, i1, i2 = nl.mgrid[0:rows, 0:f1, 0:f2]
    moved = nl.ndarray((rows, f1 * f2), dtype=x.dtype)
    moved[ip, i2 * f1 + i1] = nl.copy(tile[ip, i1 * f2 + i2])
    nl.store(out, value=moved)
    return out


@nki.jit
def avg_pool(x, pool):
    """2-D average pooling of a [C, H, W] tensor by pool x pool windows: a rank-5 index
    (channel, row block, row in window, column block, column in window) reduced over the
    window axes."""
    C, H, W = x.shape
    Ho, Wo = H // pool, W // pool
    out = nl.ndarray((C, Ho, Wo), dtype=x.dtype, buffer=nl.shared_hbm)
    ic = nl.arange(C)[:, None, None]
    ih = nl.arange(H)[None, :, None]
    iw = nl.arange(W)[None, None, :]
    tile = nl.ndarray([C, H, W], dtype=x.dtype)
    tile[...] = nl.load(x[ic, ih, iw])
    c5 = nl.arange(C)[:, None, None, None, None]
    hb = nl.arange(Ho)[None, :, None, None, None]
    hw = nl.arange(pool)[None, None, :, None, None]
    wb = nl.arange(Wo)[None, None, None, :, None]
    ww = nl.arange(pool)[None, None, None, None, :]
    windows = tile[c5, pool * hb + hw, pool * wb + ww]
    pooled = nl.sum(windows, axis=[2, 4]) / (pool * pool)
    oh = nl.arange(Ho)[None, :, None]
    ow = nl.arange(Wo)[None, None, :]
    nl.store(out[ic, oh, ow], value=pooled)
    return out


@nki.jit
def mamba_blocks(delta, u, A, B, C):
    """The Mamba selective scan, out[b, c, t] = sum over states of C[b, s, t] * h[b, c, s, t]
    with h[t] = exp(delta * A) * h[t-1] + delta * u * B. The per-batch accumulator is one
    block tile: a block per 128 channels in front of nl.par_dim."""
    batch, channels, seq = delta.shape
    _, states = A.shape
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    blocks = channels // P
    for b in nl.affine_range(batch):
        acc = nl.zeros((blocks, nl.par_dim(P), seq), dtype=delta.dtype)
        for s in nl.affine_range(states):
            for blk in nl.affine_range(blocks):
                c0 = blk * P
                d = nl.load(delta[b, c0:c0 + P, 0:seq])
                a = nl.load(A[c0:c0 + P, s])
                decay = nisa.activation(op=nl.exp, data=d, scale=a)
                x = nl.load(u[b, c0:c0 + P, 0:seq])
                bs = nl.load(B[b, s:s + 1, 0:seq])
                drive = nisa.tensor_tensor(nisa.tensor_tensor(d, x, op=nl.multiply), bs.broadcast_to((P, seq)),
                                           op=nl.multiply)
                h = nisa.tensor_tensor_scan(decay, drive, initial=0, op0=np.multiply, op1=np.add)
                cs = nl.load(C[b, s:s + 1, 0:seq])
                acc[blk, 0:P, 0:seq] += nisa.tensor_tensor(h, cs.broadcast_to((P, seq)), op=nl.multiply)
        for blk in nl.affine_range(blocks):
            nl.store(out[b, blk * P:(blk + 1) * P, 0:seq], acc[blk, 0:P, 0:seq])
    return out


@nki.jit
def mamba_chunked(delta, u, A, B, C, chunk=512):
    """The same scan with the sequence in chunks: each chunk's scan starts from the last
    state of the one before (a per-partition `initial`), its product with C goes through
    PSUM into the accumulator."""
    batch, channels, seq = delta.shape
    _, states = A.shape
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for b in nl.affine_range(batch):
        for blk in nl.affine_range(channels // P):
            c0 = blk * P
            acc = nl.zeros((nl.par_dim(P), seq), dtype=delta.dtype)
            d = nl.load(delta[b, c0:c0 + P, 0:seq])
            x = nl.load(u[b, c0:c0 + P, 0:seq])
            for s in nl.affine_range(states):
                a = nl.load(A[c0:c0 + P, s])
                carry = nl.zeros((P, 1), dtype=d.dtype)
                for t in nl.static_range(seq // chunk):
                    t0 = t * chunk
                    decay = nisa.activation(op=nl.exp, data=d[0:P, t0:t0 + chunk], scale=a)
                    bs = nl.load(B[b, s:s + 1, t0:t0 + chunk])
                    drive = nisa.tensor_tensor(nisa.tensor_tensor(d[0:P, t0:t0 + chunk], x[0:P, t0:t0 + chunk],
                                                                  op=nl.multiply),
                                               bs.broadcast_to((P, chunk)), op=nl.multiply)
                    h = nisa.tensor_tensor_scan(decay, drive, initial=carry, op0=np.multiply, op1=np.add)
                    carry[...] = h[0:P, chunk - 1]
                    cs = nl.load(C[b, s:s + 1, t0:t0 + chunk])
                    product = nl.ndarray((P, chunk), dtype=delta.dtype, buffer=nl.psum)
                    product[...] = nisa.tensor_tensor(h, cs.broadcast_to((P, chunk)), op=nl.multiply)
                    acc[0:P, t0:t0 + chunk] += product
            nl.store(out[b, c0:c0 + P, 0:seq], acc[0:P, 0:seq])
    return out
