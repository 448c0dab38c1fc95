"""What one NeuronCore generation allows an NKI kernel: tile sizes per engine
and the on-chip memory per partition. The generation follows the simulated
machine's profile (trn1 = NeuronCore-v2, trn2 = v3, trn3 = v4); docs/nki.md
lists the figures and where they come from (AWS's NKI architecture guides)."""
from __future__ import annotations

from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class Limits:
    profile: str            # trn1 / trn2 / trn3
    generation: str         # nki.isa.nc_version name: gen2 / gen3 / gen4
    pmax: int = 128         # partitions of SBUF and PSUM (tile_size.pmax)
    sbuf_bytes_per_partition: int = 192 * KIB
    psum_banks: int = 8
    psum_bank_bytes: int = 2 * KIB   # one bank holds 512 fp32 per partition
    stationary_fmax: int = 128       # nc_matmul stationary free size
    moving_fmax_fp32: int = 512      # nc_matmul moving free size (fp32 operands)
    moving_fmax_16bit: int = 512     # ... and for 16/8-bit operands
    pe_transpose_max: int = 128      # nc_transpose on TensorE: 128 x 128
    vector_transpose_max: int = 32   # nc_transpose on VectorE: 32 x 32
    vector_fmax_sbuf: int = 64 * KIB  # Vector/Scalar free size reading SBUF
    vector_fmax_psum: int = 4 * KIB   # ... reading PSUM

    @property
    def psum_bytes_per_partition(self) -> int:
        return self.psum_banks * self.psum_bank_bytes

    @property
    def psum_fmax(self) -> int:  # fp32 elements of one bank (tile_size.psum_fmax)
        return self.psum_bank_bytes // 4

    def moving_fmax(self, elem_bytes: int) -> int:
        return self.moving_fmax_fp32 if elem_bytes >= 4 else self.moving_fmax_16bit


_LIMITS = {
    "trn1": Limits("trn1", "gen2", sbuf_bytes_per_partition=192 * KIB),
    "trn2": Limits("trn2", "gen3", sbuf_bytes_per_partition=224 * KIB),
    # NeuronCore-v4 widens the moving tile: 4096 fp32 / 8192 16-bit elements.
    "trn3": Limits("trn3", "gen4", sbuf_bytes_per_partition=256 * KIB, moving_fmax_fp32=4096,
                   moving_fmax_16bit=8192),
}

PROFILES = tuple(_LIMITS)


def limits_for(profile: str) -> Limits:
    try:
        return _LIMITS[profile]
    except KeyError:
        raise ValueError(f"no NKI limits for profile '{profile}': expected one of {', '.join(PROFILES)}") from None


def active_profile() -> str:
    """The simulated machine's profile (NEURON_SIM_PROFILE, read by the device table)."""
    from ..devices.device import machine
    return machine()["profile"]


def active_limits() -> Limits:
    return limits_for(active_profile())
