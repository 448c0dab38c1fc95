"""Why an op differs from the CPU on `neuron`, per OpInfo entry (and
direction, "fwd"/"bwd", when only one differs). docs/op-coverage.md prints
these next to each difference; the suite fails on a difference without one."""

EXPLAINED: dict = {
}
