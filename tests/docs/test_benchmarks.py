"""benchmarks/run_all.py (`make bench`) is where the README's and
docs/benchmarks.md's figures come from: every benchmark must be in it, and
each kind of figure must reach the written tables. Runs no benchmark."""
import ast
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def run_all():
    sys.path.insert(0, str(BENCH))
    try:
        import run_all
        yield run_all
    finally:
        sys.path.remove(str(BENCH))


def test_every_benchmark_is_run_by_run_all(run_all):
    run = {m.__name__ for m, _, _ in run_all.PLAN}
    assert {p.stem for p in BENCH.glob("bench_*.py")} == run


def declared_groups(path: Path):
    """The table groups a benchmark module declares (its *GROUP constants)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])
                     if isinstance(n, ast.Name)]
            if names and all(n.endswith("GROUP") for n in names):
                values = ast.literal_eval(node.value)
                yield from values if isinstance(values, tuple) else (values,)


def test_every_group_a_benchmark_writes_has_a_title(run_all):
    """A group without a title would stop the run after every benchmark ran."""
    groups = {g for p in BENCH.glob("bench_*.py") for g in declared_groups(p)}
    assert groups == set(run_all.TITLES)


def test_tables_render_ratio_rows_and_figure_tables(run_all):
    from timing import Row, Table

    t = Table("report-page", ["run", "page", "aim"])
    t.add("huge", "2.40 MiB", "< 1 s (ok)")
    text = run_all.tables([Row("report", "add: report on / off", 2e-6, 1e-6, 2.0, 2.1, 1.05), t])
    assert "| benchmark | report on (best) | report off (best) | on/off (median) | best | aim (on the median) |" in text
    assert "| add: report on / off | 2.0 µs | 1.0 µs | 2.10× | 2.00× | ≤ 1.05× (missed) |" in text
    assert "| run | page | aim |\n|---|---:|---|\n| huge | 2.40 MiB | < 1 s (ok) |" in text
    assert text.index("migration report (") < text.index("report page in headless Chromium")


def test_a_verdict_reads_the_median_not_the_best_batch():
    """A row whose best batch meets the aim but whose median misses it is
    missed; the other way round it is met."""
    from timing import Row

    lucky = Row("ops", "x", 1.0e-6, 1.0e-6, 1.0, 1.4, 1.15)
    assert (lucky.ok, lucky.verdict) == (False, "missed")
    typical = Row("ops", "x", 1.3e-6, 1.0e-6, 1.3, 1.1, 1.15)
    assert (typical.ok, typical.verdict) == (True, "ok")
    assert Row("ops", "x", 1.0, 1.0, 9.0, 9.0, None).verdict == ""


def test_a_group_without_a_title_is_an_error(run_all):
    from timing import Row

    with pytest.raises(ValueError, match="no title for the benchmark group"):
        run_all.tables([Row("nope", "x", 1.0, 1.0, 1.0, 1.0, None)])


def test_a_missed_aim_is_held_by_its_ratchet(run_all, tmp_path):
    """A missed aim shows its committed median; a run may beat it (the
    ratchet tightens) but not exceed it by more than the noise allowance;
    a row that meets its aim leaves the ratchet file."""
    import ratchet
    from timing import Row

    def rows(slow, fast):
        return [Row("nki", "matmul", 1.0, 1.0, slow, slow, 2.0), Row("ops", "add", 1.0, 1.0, fast, fast, 1.15),
                Row("ops", "copy", 1.0, 1.0, 9.0, 9.0, None)]

    committed = {"nki: matmul": 3.0, "ops: add": 1.3}
    held = rows(3.2, 1.1)  # within noise of the ratchet; add now meets its aim
    assert ratchet.apply(held, committed) == []
    assert held[0].verdict == "missed; ratchet 3.00×" and held[1].verdict == "ok"
    assert "≤ 2.00× (missed; ratchet 3.00×)" in run_all.tables(held)
    assert ratchet.tightened(held, committed) == {"nki: matmul": 3.0}  # add is gone, matmul not loosened

    better = rows(2.5, 1.2)
    ratchet.apply(better, committed)
    assert ratchet.tightened(better, committed) == {"nki: matmul": 2.5, "ops: add": 1.2}

    worse = rows(3.0 * (1 + ratchet.NOISE) + 0.01, 1.2)
    assert [r.name for r in ratchet.apply(worse, committed)] == ["matmul"]
    assert ratchet.tightened(worse, committed)["nki: matmul"] == 3.0
    assert run_all.report_worse(ratchet.apply(worse, committed))

    path = tmp_path / "ratchets.json"
    ratchet.save({"nki: matmul": 2.5}, path)
    assert ratchet.load(path) == {"nki: matmul": 2.5} and ratchet.load(tmp_path / "none.json") == {}


def test_the_committed_ratchets_are_rows_of_the_written_figures(run_all):
    """benchmarks/ratchets.json and docs/benchmarks.md are written by the same
    whole run: every ratchet is a missed row of the written tables and every
    missed row there has its ratchet (a renamed row would otherwise drop its
    ratchet silently)."""
    import ratchet

    doc = (BENCH.parent / "docs" / "benchmarks.md").read_text()
    committed = ratchet.load()
    missed = {line.split(" | ")[0].lstrip("| ") for line in doc.splitlines() if "(missed" in line}
    assert {entry.split(": ", 1)[1] for entry in committed} == missed
    for entry in committed:
        assert entry.split(": ", 1)[0] in run_all.TITLES, entry


def test_replace_swaps_only_the_named_tables_in_both_copies(run_all, tmp_path, monkeypatch):
    """`--only X --replace`: X's tables (new ones added in TITLES' order) in
    docs/benchmarks.md and the README, marked as measured alone; every other
    table and the whole run's header unchanged."""
    from timing import Row

    whole = run_all.tables([Row("ops", "add", 2e-6, 1e-6, 2.0, 2.0, None),
                            Row("report", "add: report on / off", 2e-6, 1e-6, 1.0, 1.0, 1.5)])
    body = "Measured once, whole.\n\n" + whole
    doc, readme = tmp_path / "benchmarks.md", tmp_path / "README.md"
    doc.write_text("# Benchmarks\n\nIntro.\n\n" + body)
    readme.write_text(f"# Project\n\n{run_all.START}\n{body}{run_all.END}\n\nMore.\n")
    monkeypatch.setattr(run_all, "DOC", doc)
    monkeypatch.setattr(run_all, "README", readme)
    run_all.replace_tables([Row("memory", "churn", 1e-6, 2e-6, 0.5, 0.5, 1.0),
                            Row("random", "dropout", 3e-6, 2e-6, 1.5, 1.5, 1.1)], "_Measured alone._")
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nIntro.\n\nMeasured once, whole.\n\n**Ops and copies")
    assert text.count("| add |") == 1 and text.count("| add: report on / off |") == 1
    order = [text.index(f"**{run_all.TITLES[g]}**") for g in ("ops", "memory", "random", "report")]
    assert order == sorted(order)
    memory = text.split(f"**{run_all.TITLES['memory']}**\n\n", 1)[1]
    assert memory.startswith("_Measured alone._\n\n| benchmark |") and "| churn | 1.0 µs | 2.0 µs | 0.50× |" in memory
    copied = readme.read_text().split(run_all.START + "\n", 1)[1].split(run_all.END, 1)[0]
    assert copied in text and copied.startswith("Measured once, whole.")
    run_all.replace_tables([Row("memory", "churn", 1e-6, 4e-6, 0.25, 0.25, 1.0)], "_Measured alone again._")
    text = doc.read_text()
    assert text.count(f"**{run_all.TITLES['memory']}**") == 1 and "| churn | 1.0 µs | 4.0 µs | 0.25× |" in text
    assert "_Measured alone._" in text  # the random table from the run before stays
