"""The layers keep their rules (docs/architecture.md, "The layers"), and the
architecture page lists every C++ file, so a learner can find each file's one
concern. Reads source files only: no build, no torch."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(layer=""):
    return sorted(p for p in (CSRC / layer).rglob("*") if p.suffix in (".h", ".cpp"))


def includes(path):
    return [(kind, name) for kind, name in INCLUDE.findall(path.read_text())]


def test_runtime_includes_no_torch_and_no_python():
    """runtime/ is plain C++: the standard library and its own headers only."""
    offenders = []
    for path in sources("runtime"):
        for kind, name in includes(path):
            if kind == '"' and not name.startswith("runtime/"):
                offenders.append(f"{path.relative_to(ROOT)}: #include \"{name}\" (runtime includes only runtime/)")
            if kind == "<" and name.split("/")[0] in ("ATen", "c10", "torch", "pybind11", "Python.h"):
                offenders.append(f"{path.relative_to(ROOT)}: #include <{name}> (runtime has no torch or Python)")
    assert sources("runtime") and not offenders, "\n".join(offenders)


def test_only_bindings_know_python():
    """C++ reaches Python only through bindings/ (the callbacks it installs)."""
    offenders = [
        f"{path.relative_to(ROOT)}: #include <{name}>"
        for path in sources()
        if path.parent.name != "bindings"
        for kind, name in includes(path)
        if kind == "<" and (name.startswith("pybind11") or name == "Python.h" or name.startswith("torch/python"))
    ]
    assert not offenders, "only csrc/bindings/ may include Python or pybind11:\n" + "\n".join(offenders)


# The layers from the floor up (docs/architecture.md, "The layers"): a file
# includes its own layer and the ones below, never one above, so no two
# layers include each other.
LAYERS = ["runtime", "aten", "profiler", "distributed", "bindings"]


def test_no_layer_includes_one_above_it():
    assert sorted(p.name for p in CSRC.iterdir() if p.is_dir()) == sorted(LAYERS), "a new csrc/ layer: rank it"
    upward = [
        f"{path.relative_to(ROOT)}: #include \"{name}\" ({name.split('/')[0]} is above {path.relative_to(CSRC).parts[0]})"
        for path in sources()
        for kind, name in includes(path)
        if kind == '"' and name.split("/")[0] in LAYERS
        and LAYERS.index(name.split("/")[0]) > LAYERS.index(path.relative_to(CSRC).parts[0])
    ]
    assert not upward, "an include climbs a layer:\n" + "\n".join(upward)


def test_quoted_includes_are_spelled_from_csrc_and_exist():
    bad = [
        f"{path.relative_to(ROOT)}: #include \"{name}\""
        for path in sources()
        for kind, name in includes(path)
        if kind == '"' and not (CSRC / name).is_file()
    ]
    assert not bad, "includes are spelled from csrc/ (\"aten/neuron.h\"):\n" + "\n".join(bad)


def test_architecture_page_lists_every_csrc_file():
    page = (ROOT / "docs" / "architecture.md").read_text()
    missing = [str(p.relative_to(CSRC)) for p in sources() if f"`{p.relative_to(CSRC)}`" not in page]
    assert not missing, (
        "docs/architecture.md (section 'Every file, by layer') must list each csrc file as "
        "`path/relative/to/csrc` in its layer's table, with one line on what it owns. Missing:\n  "
        + "\n  ".join(missing)
    )
    tables = page[page.index("### Every file, by layer") :]
    tables = tables[: tables.index("\n## ")]
    listed = set(re.findall(r"`([\w/]+\.(?:h|cpp))`", tables))
    stale = sorted(f for f in listed if not (CSRC / f).is_file())
    assert not stale, "docs/architecture.md lists files that no longer exist: " + ", ".join(stale)


def test_comments_cite_only_the_repository():
    """Comments and docs state the facts they rely on, or name a page of docs/:
    never a section of a document outside this repository."""
    cited = re.compile(r"facts §|shared/torch_neuronx_facts|/work/shared")
    files = [ROOT / "README.md"] + [p for top in ("csrc", "torch_neuron_sim", "tests", "docs", "benchmarks", "examples")
                                    for p in (ROOT / top).rglob("*") if p.suffix in (".cpp", ".h", ".py", ".md", ".txt")]
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in files if p.name != "test_layout.py"
                 for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if cited.search(line)]
    assert not offenders, "cite the repository (state the fact, or name a docs/ page):\n" + "\n".join(offenders)
