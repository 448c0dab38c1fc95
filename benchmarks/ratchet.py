"""The ratchet on aims not yet met. A row that misses its aim keeps its
committed median in benchmarks/ratchets.json; a later full run may do
better (the ratchet then tightens to the new median) but not worse than the
committed figure by more than run-to-run noise, or `make bench` fails. A
row that meets its aim leaves the file. So a missed aim is never quietly
forgotten, and what it costs can only shrink.

Only whole runs (`make bench`) read and write the file: a partial or quick
run proves nothing about the rows it skipped."""
from __future__ import annotations

import json
from pathlib import Path

from timing import Row

FILE = Path(__file__).resolve().parent / "ratchets.json"
# Medians of whole quiet runs with no change to the code they time move by up to ~20% on the
# noisiest rows (the overhead-bound compiled step: 1.63x, then 1.96x); more than this is a regression.
NOISE = 0.25


def load(path: Path = FILE) -> dict[str, float]:
    return json.loads(path.read_text()) if path.exists() else {}


def key(row: Row) -> str:
    return f"{row.group}: {row.name}"


def apply(rows: list, committed: dict[str, float]) -> list[Row]:
    """Gives each missed row its committed figure; returns the rows worse
    than it by more than NOISE."""
    worse = []
    for r in rows:
        if isinstance(r, Row) and r.aim is not None and not r.ok and key(r) in committed:
            r.committed = committed[key(r)]
            if r.median > r.committed * (1 + NOISE):
                worse.append(r)
    return worse


def tightened(rows: list, committed: dict[str, float]) -> dict[str, float]:
    """The file after this run: each missed row at the better of its
    committed figure and this run's median (a regressed row keeps the
    committed one); rows that met their aim are gone."""
    out = {}
    for r in rows:
        if isinstance(r, Row) and r.aim is not None and not r.ok:
            out[key(r)] = round(min(r.median, committed.get(key(r), r.median)), 3)
    return dict(sorted(out.items()))


def save(ratchets: dict[str, float], path: Path = FILE) -> None:
    path.write_text(json.dumps(ratchets, indent=1, ensure_ascii=False) + "\n")
