"""Profile one training step on `neuron` and estimate it on trn2 and trn3
(docs/profiling.md, "Reading a trace"). Writes step_trace.json for Perfetto.

`python examples/profile_step.py --write-doc` also rewrites that section's figures in
docs/profiling.md from this run (tests/docs/test_profiling_doc.py checks the parts a run
cannot change: the modelled times of the native ops, from their shapes, and which ops
fell back)."""
import logging
import re
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuron_sim

logging.getLogger("torch_neuron_sim").setLevel(logging.ERROR)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).to("neuron")
model = model.to(torch.bfloat16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256, dtype=torch.bfloat16)
y = torch.randn(64, 256, dtype=torch.bfloat16)
DOC = Path(__file__).resolve().parent.parent / "docs" / "profiling.md"
START = "<!-- worked example: start (python examples/profile_step.py --write-doc writes this) -->\n"
END = "<!-- worked example: end -->"


def step():
    xd, yd = x.to("neuron"), y.to("neuron")           # host -> device copies
    loss = torch.nn.functional.mse_loss(model(xd), yd)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.item()                                 # device -> host


def worked_example(est, fallbacks: list[str]) -> str:
    """The section's figures and what they say, from one estimate of the step."""
    us = 1e6
    total = est.total_seconds
    fell_s = est.breakdown["fallback"]  # the round trips: host kernels (measured), their copies (modelled)
    rows = ["| op | kind | calls | modelled µs | bound |", "|---|---|---|---|---|"]
    for r in est.ops[:10]:
        rows.append(f"| `{r.name}` | {r.kind} | {r.count} | {r.seconds * us:.1f} | {r.bound} |")
    names = ", ".join(f"`{n}`" for n in fallbacks)
    share = fell_s / total if total else 0.0
    by_name = {r.name: r for r in est.ops if r.kind != "fallback"}
    linear = ", ".join(f"`{n}` {by_name[n].seconds * us:.1f} µs ({by_name[n].bound}-bound)"
                       for n in ("aten::linear", "aten::linear_backward") if n in by_name)
    others = ", ".join(f"`{r.name}` ({r.bound})" for r in est.ops if r.kind == "kernel" and "linear" not in r.name)
    says = ("dominate" if share > 0.5 else "are a visible share of") + " the modelled step"
    return "\n".join([
        f"`estimate(step, profile=\"{est.profile}\")` of this run: **{total * 1e3:.2f} ms** modelled per step, "
        f"{fell_s * 1e3:.2f} ms ({share:.0%}) of it in the round trips of CPU fallbacks (the `fallback` "
        f"bucket: each fallback's host kernel, measured, and its copies, modelled from their bytes). "
        f"The ten longest rows:",
        "",
        *rows,
        "",
        f"- **Fallbacks.** {names} fell back to the CPU: `mse_loss` and its backward are not in the "
        f"native-op table. A fallback's own row is not modelled from shapes: it is its host kernel's "
        f"time measured on this machine, so it changes from run to run and with the host's load (the "
        f"copies of its round trip are the `neuron memcpy` rows' `fallback` part). Here the fallbacks {says}; making `mse_loss` native (docs/tutorial-add-an-op.md) or "
        f"writing the loss from native ops (`(out - y).pow(2).mean()`) removes them.",
        "- **`aten::linear`, `aten::linear_backward`.** The device registers `linear` as one op, so "
        "`nn.Linear` runs as one kernel (a matmul plus the bias) and its gradient as "
        "`linear_backward` (a host kernel here, docs/tutorial-add-an-op.md); there are no "
        "`addmm`/`mm` rows. Like every native row, their times come from the FLOPs and bytes of the "
        f"shapes, the same on every run: {linear}.",
        f"- **The other native kernels**, with the bucket that dominates each: {others}. On a step "
        "this small most cost little more than the launch overhead: the argument for "
        "`torch.compile`, one launch per graph.",
        "- **trn2 against trn3.** The script prints both estimates. Compare only the native rows: "
        "the fallback rows are measured host time, so their difference between the two runs is "
        "mostly noise, not the chip.",
    ])


def write_doc(section: str) -> None:
    text = DOC.read_text()
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    assert pattern.search(text), f"{DOC} has no worked-example markers"
    DOC.write_text(pattern.sub(lambda _: START + section + "\n" + END, text))


if __name__ == "__main__":
    step()                                                 # compile every op signature once
    torch_neuron_sim.clear_op_tracking()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
        step()
    fallbacks = torch_neuron_sim.get_fallback_ops()
    print(p.key_averages().table(sort_by="self_device_time_total", row_limit=8, max_name_column_width=28))
    p.export_chrome_trace("step_trace.json")
    estimates = {chip: torch_neuron_sim.estimate(step, profile=chip) for chip in ("trn2", "trn3")}
    for est in estimates.values():
        print(est.table(row_limit=6))
        print()
    if "--write-doc" in sys.argv:
        write_doc(worked_example(estimates["trn2"], fallbacks))
