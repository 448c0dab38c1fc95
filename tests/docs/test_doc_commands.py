"""Every command block in docs/ and the README resolves: the make targets exist in the
Makefile, the files and folders of the repository a command names exist, `python -m`
modules import, and the options of `python -m torch_neuron_sim report` and of the
examples are ones they accept (the report's --help runs: cheap). Placeholders for the
user's own script (train.py, path/to/train.py) are not the repository's and pass."""
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROGRAMS = ("make", "python", ".venv/bin/python", "torchrun", "pytest")
REPO_TOPS = ("tests/", "examples/", "benchmarks/", "scripts/", "docs/", "csrc/", "torch_neuron_sim/")


def commands() -> list[tuple[str, str]]:
    """(where, command) for each command line of an unlabelled or shell fenced block."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
            if m.group(1) not in ("", "bash", "sh", "shell", "console"):
                continue
            line_no = text[: m.start()].count("\n") + 2
            for i, line in enumerate(m.group(2).splitlines()):
                line = line.strip().removeprefix("$ ")
                line = re.sub(r"\s+#.*$", "", line)
                if line.split(" ", 1)[0] in PROGRAMS:
                    out.append((f"{doc.relative_to(ROOT)}:{line_no + i}", line))
    return out


COMMANDS = commands()


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for m in re.finditer(r"^([\w./$() -]+?):(?!=)", text, re.M) for t in m.group(1).split()}


def test_the_docs_have_command_blocks():
    """The extraction finds the blocks it is for (else every check below passes on nothing)."""
    said = {c for _, c in COMMANDS}
    assert "make test" in said and "make ext" in said
    assert any(c.startswith("torchrun") for c in said) and any("-m torch_neuron_sim report" in c for c in said)


@pytest.mark.parametrize("where,command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command_resolves(where, command):
    words = shlex.split(command)
    if words[0] == "make":
        missing = [t for t in words[1:] if not t.startswith("-") and "=" not in t and t not in make_targets()]
        assert not missing, f"{where}: no Makefile target {missing}"
        return
    # python -m MODULE / a script; every path of the repository it names exists
    if "-m" in words:
        module = words[words.index("-m") + 1]
        assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
    for word in words[1:]:
        path = word.split("::", 1)[0]
        if path.startswith(REPO_TOPS):
            assert (ROOT / path).exists(), f"{where}: {path} does not exist"


def _options(command: str) -> list[str]:
    return [w.split("=", 1)[0] for w in shlex.split(command) if w.startswith("--")]


def test_report_command_options_are_the_reports():
    """The options the docs give `python -m torch_neuron_sim report` are in its --help."""
    used = {o for _, c in COMMANDS if "-m torch_neuron_sim report" in c
            for o in _options(c.split(" report ", 1)[1].split(".py", 1)[0] + ".py")}
    assert used, "no report command found"
    r = subprocess.run([sys.executable, "-m", "torch_neuron_sim", "report", "--help"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert not [o for o in used if o not in r.stdout], (used, r.stdout)


def test_example_options_are_the_examples():
    """Options given to a script of examples/ after its name are ones its argparse defines."""
    for where, command in COMMANDS:
        words = shlex.split(command)
        scripts = [w for w in words if w.startswith("examples/") and w.endswith(".py")]
        if not scripts:
            continue
        source = (ROOT / scripts[0]).read_text()
        after = words[words.index(scripts[0]) + 1:]
        for option in [w for w in after if w.startswith("--")]:
            assert f'"{option}"' in source, f"{where}: {scripts[0]} has no option {option}"
