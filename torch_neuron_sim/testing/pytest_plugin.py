"""pytest plugin for code that runs on `neuron` (active when torch_neuron_sim
is installed, through the `pytest11` entry point).

- fixture `neuron`: torch.device("neuron"), with op tracking cleared;
- marker `no_fallback`: the test fails if any op fell back to CPU in it;
- `--neuron-report`: a summary of the ops that fell back, at the end;
- `--neuron-strict`: every fallback is an error (NEURON_SIM_FALLBACK=error
  for the session, and any test in which an op fell back fails);
- hypothesis without its per-example deadline (the profile `neuron`,
  hypothesis_profile.py), unless the command line or a conftest chose a
  profile: a `@given` test's first example pays the device's one-time set-up.

Loading the plugin imports torch_neuron_sim (its parent package); the hooks
read op tracking only in tests that use one of the features above.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

_REPORT = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("neuron", "torch_neuron_sim (the emulated Trainium device)")
    group.addoption("--neuron-report", action="store_true", default=False,
                    help="print the ops that fell back to CPU on neuron, with counts and tests, at the end")
    group.addoption("--neuron-strict", action="store_true", default=False,
                    help="make every CPU fallback on neuron an error")


@pytest.hookimpl(trylast=True)  # after hypothesis's own plugin has loaded a --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    from torch_neuron_sim.testing.hypothesis_profile import load_unless_chosen
    load_unless_chosen(config.getoption("hypothesis_profile", default=None))
    config.addinivalue_line("markers", "no_fallback: fail the test if any op falls back to CPU on neuron")
    config.stash[_REPORT] = {"ops": defaultdict(int), "tests": defaultdict(list)}
    if config.getoption("--neuron-strict", default=False):
        import torch_neuron_sim
        torch_neuron_sim.set_fallback_mode("error")


def _watching(item: pytest.Item) -> bool:
    cfg = item.config
    return bool(item.get_closest_marker("no_fallback") or cfg.getoption("--neuron-strict")
                or cfg.getoption("--neuron-report"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not _watching(item):
        return (yield)
    from torch_neuron_sim.testing.op_checks import fallback_snapshot, fallbacks_since
    before = fallback_snapshot()
    try:
        return (yield)
    finally:
        fell = fallbacks_since(before)
        report = item.config.stash[_REPORT]
        for name, count in fell.items():
            report["ops"][name] += count
            report["tests"][name].append(item.nodeid)
        strict = item.config.getoption("--neuron-strict")
        if fell and (strict or item.get_closest_marker("no_fallback")):
            from torch_neuron_sim.testing.op_checks import FallbackError
            why = "--neuron-strict" if strict else "@pytest.mark.no_fallback"
            listed = ", ".join(f"{n} (x{c})" for n, c in sorted(fell.items()))
            raise FallbackError(f"ops fell back to CPU on neuron ({why}): {listed}")


@pytest.fixture
def neuron():
    """The neuron device, with op tracking cleared for the test."""
    import torch
    import torch_neuron_sim
    torch_neuron_sim.clear_op_tracking()
    return torch.device("neuron")


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if not config.getoption("--neuron-report"):
        return
    report = config.stash[_REPORT]
    tr = terminalreporter
    tr.write_sep("=", "neuron fallback report")
    if not report["ops"]:
        tr.write_line("no op fell back to CPU")
        return
    tr.write_line(f"{len(report['ops'])} ops fell back to CPU "
                  f"({sum(report['ops'].values())} calls in {len({t for v in report['tests'].values() for t in v})} tests):")
    width = max(len(n) for n in report["ops"])
    for name, count in sorted(report["ops"].items(), key=lambda kv: (-kv[1], kv[0])):
        tests = report["tests"][name]
        tr.write_line(f"  {name:<{width}}  {count:>7} calls  {len(tests):>4} tests  first: {tests[0]}")
