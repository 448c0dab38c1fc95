"""The hypothesis profile the pytest plugin loads: hypothesis's own settings
without the per-example deadline.

Hypothesis fails an example that takes longer than its deadline (200 ms by
default). On `neuron`, the first example of a session pays one-time set-up
(the device table, the arena, the first kernels' caches), so a `@given`
parity test written as hypothesis's own docs show would fail on its first
example for a cost that is not the test's. The profile is loaded only when
nothing else chose one: a `--hypothesis-profile` on the command line, or a
profile a conftest loaded, is kept as it is.
"""
from __future__ import annotations

PROFILE = "neuron"


def load_unless_chosen(chosen_on_command_line: str | None) -> bool:
    """Loads the `neuron` profile (the current settings, deadline=None) when
    hypothesis is installed, no profile was asked for on the command line,
    and the loaded profile is hypothesis's untouched default that has a
    deadline. Returns whether it loaded it."""
    try:
        from hypothesis import settings
    except ImportError:
        return False
    if chosen_on_command_line or settings.get_current_profile_name() != "default" or settings.default.deadline is None:
        return False
    settings.register_profile(PROFILE, parent=settings.default, deadline=None)
    settings.load_profile(PROFILE)
    return True
