"""The layers keep their rules (docs/architecture.md, "The layers"), and the
architecture page lists every C++ file, so a learner can find each file's one
concern. Reads source files only: no build, no torch."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


# What the repository may not say: it speaks of the project, not of how the work
# on it was organised or where its authors kept their notes. Each pattern is
# spelled so that it does not match its own source line, so this file is
# checked like every other.
NOT_OF_THE_PROJECT = {
    "a section of a document outside the repository": r"facts[ ]§|_facts[.]md|nki_fact[s]",
    "a path outside the repository": r"(?<![\w.~-])/(?:work|home|root|Users|mnt|srv)/\w",
    "a work item instead of the fact": r"\bissues?[ ]?#?\d|\bissue's\b|\bthe[ ]issue\b|\bother[ ]issues\b",
    "the machine the work was done on": r"\bthis[ ]VM\b|\bdevelopment[ ]machine\b",
}


def repository_text_files():
    tops = ("csrc", "torch_neuron_sim", "tests", "docs", "benchmarks", "examples", "scripts")
    yield from (ROOT / name for name in ("README.md", "Makefile", "pyproject.toml", "setup.py"))
    for top in tops:
        for p in (ROOT / top).rglob("*"):
            if p.suffix in (".cpp", ".h", ".py", ".md", ".txt", ".toml") and "_build" not in p.parts:
                yield p


def test_the_repository_speaks_of_the_project_only():
    """Code, tests and docs state the facts they rely on, or name a page of
    docs/: never a document outside the repository, a work item, or the
    machine the work happened on."""
    rules = {why: re.compile(pattern, re.I) for why, pattern in NOT_OF_THE_PROJECT.items()}
    offenders = [f"{p.relative_to(ROOT)}:{n}: {why}: {line.strip()[:100]}"
                 for p in repository_text_files()
                 for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
                 for why, rule in rules.items() if rule.search(line)]
    assert not offenders, "state the fact itself, or name a docs/ page:\n" + "\n".join(offenders)


def test_the_wording_rules_catch_what_they_name():
    """Each rule above matches the wording it is for (a rule that matched
    nothing would pass every file)."""
    said = {"a section of a document outside the repository": "see facts {}3".format("\u00a7"),
            "a path outside the repository": "read /{}/someone/notes.md".format("home"),
            "a work item instead of the fact": "as issue {} asks".format(9),
            "the machine the work was done on": "measured on this {}".format("VM")}
    for why, pattern in NOT_OF_THE_PROJECT.items():
        assert re.search(pattern, said[why], re.I), why
    assert not any(re.search(p, "the device issues a warning; /usr/lib/ccache", re.I)
                   for p in NOT_OF_THE_PROJECT.values())


def test_no_csrc_file_is_over_the_size_limit():
    """One concern per file: a C++ file past 400 lines holds more than one (split it by job)."""
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in sources() if (n := len(p.read_text().splitlines())) > 400]
    assert not big, "split these by job (at most 400 lines):\n" + "\n".join(big)


TORCH_ROOTS = ("ATen", "c10", "torch", "pybind11", "Python.h")


def reaches_torch(path, seen=None):
    """Whether a file includes a torch (or Python) header, itself or through csrc headers."""
    seen = set() if seen is None else seen
    if path in seen:
        return False
    seen.add(path)
    return any(
        (kind == "<" and name.split("/")[0] in TORCH_ROOTS)
        or (kind == '"' and (CSRC / name).is_file() and reaches_torch(CSRC / name, seen))
        for kind, name in includes(path)
    )


def test_files_that_reach_torch_include_the_precompiled_header_first():
    """GCC uses the precompiled torch headers only when they are a file's first #include
    (docs/building.md); a file that includes them later parses every torch header again."""
    offenders = [
        f"{path.relative_to(ROOT)}: first #include is {includes(path)[0][1]!r}"
        for path in sources()
        if path.suffix == ".cpp" and reaches_torch(path)
        and "kineto" not in path.name  # the _kineto extension has its own defines and no precompiled header
        and includes(path)[0] != ('"', "aten/precompiled.h")
    ]
    assert not offenders, 'start these with #include "aten/precompiled.h":\n' + "\n".join(offenders)
