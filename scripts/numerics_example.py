"""docs/numerics.md's worked example: the same small regression trained three
times on the neuron device - in fp32, in bf16 with round-to-nearest-even (the
default), and in bf16 with NEURON_RT_STOCHASTIC_ROUNDING_EN=1 - and the loss
curves plotted. Weights and their SGD updates are bf16: an update smaller than
half a bf16 ulp of its weight is lost under round-to-nearest, so that run
stalls; stochastic rounding keeps each update in expectation.

The script writes docs/images/numerics_sr_loss.png (drawn with Pillow) and the
table of losses between the page's markers; tests/docs/test_numerics_example.py
runs it with --print and fails when the page no longer matches.

Usage: python scripts/numerics_example.py          rewrite the table and the PNG
       python scripts/numerics_example.py --print  print the table only
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import torch

import torch_neuron_sim
from torch_neuron_sim.execution import numerics

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "numerics.md"
PNG = ROOT / "docs" / "images" / "numerics_sr_loss.png"
START = "<!-- numerics example: start (scripts/numerics_example.py writes this) -->"
END = "<!-- numerics example: end -->"
STEPS, LR, EVERY = 400, 2e-3, 50


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 32, generator=g)
    w_true = 1.0 + 0.25 * torch.randn(32, 1, generator=g)  # weights near 1: a bf16 ulp there is 2^-7
    return x, x @ w_true


def train(dtype: torch.dtype, stochastic: bool) -> list[float]:
    """Full-batch SGD on a linear model, weights and updates in `dtype`; the
    loss (mean squared error, read in fp32) at every step."""
    if stochastic:
        os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = "1"
    else:
        os.environ.pop("NEURON_RT_STOCHASTIC_ROUNDING_EN", None)
    numerics.reread()
    x, y = (t.to("neuron").to(dtype) for t in data())
    w = torch.ones(32, 1, device="neuron", dtype=dtype)
    losses = []
    for _ in range(STEPS):
        err = x @ w - y
        losses.append(float((err.float() ** 2).mean()))
        grad = x.t() @ err * (2.0 / x.shape[0])
        w.add_(grad, alpha=-LR)  # the bf16 update: rounded to nearest, or stochastically
    return losses


def runs() -> dict[str, list[float]]:
    saved = os.environ.get("NEURON_RT_STOCHASTIC_ROUNDING_EN")
    try:
        return {"fp32": train(torch.float32, False),
                "bf16, round to nearest even": train(torch.bfloat16, False),
                "bf16, stochastic rounding": train(torch.bfloat16, True)}
    finally:
        if saved is None:
            os.environ.pop("NEURON_RT_STOCHASTIC_ROUNDING_EN", None)
        else:
            os.environ["NEURON_RT_STOCHASTIC_ROUNDING_EN"] = saved
        numerics.reread()


def table(curves: dict[str, list[float]]) -> str:
    steps = list(range(0, STEPS, EVERY)) + [STEPS - 1]
    head = "| step | " + " | ".join(curves) + " |"
    rule = "|---:|" + "---:|" * len(curves)
    rows = [f"| {s} | " + " | ".join(f"{c[s]:.4f}" for c in curves.values()) + " |" for s in steps]
    return "\n".join([head, rule, *rows])


def plot(curves: dict[str, list[float]], path: Path) -> None:
    """A log-scale line chart of the curves, drawn with Pillow (a test dependency already)."""
    import math

    from PIL import Image, ImageDraw

    w, h, left, right, top, bottom = 900, 500, 80, 20, 30, 60
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    lo = math.floor(math.log10(min(min(c) for c in curves.values())))
    hi = math.ceil(math.log10(max(max(c) for c in curves.values())))

    def xy(step: int, loss: float) -> tuple[float, float]:
        fx = step / (STEPS - 1)
        fy = (math.log10(loss) - lo) / max(hi - lo, 1)
        return left + fx * (w - left - right), h - bottom - fy * (h - top - bottom)

    d.rectangle([left, top, w - right, h - bottom], outline="black")
    for p in range(lo, hi + 1):
        _, y = xy(0, 10.0 ** p)
        d.line([left, y, w - right, y], fill="#dddddd")
        d.text((8, y - 6), f"1e{p}", fill="black")
    for s in range(0, STEPS + 1, 100):
        x, _ = xy(min(s, STEPS - 1), 10.0 ** lo)
        d.text((x - 10, h - bottom + 8), str(s), fill="black")
    d.text((w // 2 - 20, h - 25), "step", fill="black")
    d.text((left, 8), "loss (mean squared error, log scale)", fill="black")
    colors = ["#2b7bba", "#e8743b", "#1a7f37"]
    for (name, c), color in zip(curves.items(), colors):
        d.line([xy(i, v) for i, v in enumerate(c)], fill=color, width=2)
    for i, (name, color) in enumerate(zip(curves, colors)):
        y = top + 12 + 18 * i
        d.line([w - 300, y, w - 270, y], fill=color, width=3)
        d.text((w - 262, y - 6), name, fill="black")
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


def main() -> None:
    curves = runs()
    text = table(curves)
    if "--print" in sys.argv:
        print(text)
        return
    doc = DOC.read_text()
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    assert pattern.search(doc), f"{DOC} has no markers"
    DOC.write_text(pattern.sub(lambda _: f"{START}\n{text}\n{END}", doc))
    plot(curves, PNG)
    print(text)
    print(f"wrote {DOC.relative_to(ROOT)} and {PNG.relative_to(ROOT)}")


if __name__ == "__main__":
    assert torch_neuron_sim.numerics() is not None
    main()
