"""The Python package keeps the rules of its layer (docs/architecture.md, "Layer 3"):
laid out by concept, imports that never go round in a circle, and one owner per
`_C` concept. Reads source files only: no build, no torch."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "torch_neuron_sim"
MAX_LINES = 400


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports, at module level or inside a
    function (a lazy import is still a dependency). `from .. import _C` is the
    extension, not the package's __init__."""
    package = name if _is_package(path) else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in known and m != "torch_neuron_sim" and m != name}


def _only_reexports(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    return all(isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
               or (isinstance(n, ast.Assign) and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["__all__"])
               for n in body)


def test_no_python_module_is_over_the_size_limit():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not big, f"one concept per file; split these (at most {MAX_LINES} lines):\n" + "\n".join(big)


def test_python_imports_have_no_circle():
    """Dependencies point one way: two modules (or a longer ring) never import
    each other, even lazily. The package's __init__ assembles the public names
    and is left out (every module imports `_C` through it)."""
    known = modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items() if name != "torch_neuron_sim"}
    # A package whose __init__ only re-exports its submodules' names is their
    # front door, not a module they depend on: its edges to them are left out.
    for name, deps in graph.items():
        if _is_package(known[name]) and _only_reexports(known[name]):
            deps.difference_update(d for d in list(deps) if d.startswith(name + "."))
    cycles, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import circles (move the shared piece down, or into its own module):\n" + "\n".join(cycles)


def _owner_table() -> dict[str, set[str]]:
    """docs/architecture.md's "One owner per concept" table: Python owner ->
    the bindings files of its concepts."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page[page.index("### One owner per concept"):]
    table = table[: table.index("\n## ")]
    owners: dict[str, set[str]] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[3].startswith("`"):
            continue
        bindings = set(re.findall(r"`(\w+\.cpp)`", cells[2]))
        for owner in re.findall(r"`([\w/]+(?:\.py|/))`", cells[3]):
            owners.setdefault(owner, set()).update(bindings)
    return owners


def _bindings_of_each_function() -> dict[str, str]:
    out = {}
    for path in (ROOT / "csrc" / "bindings").glob("*.cpp"):
        text = path.read_text()
        for name in re.findall(r'\bm\.def\(\s*"(\w+)"', text) + re.findall(r'py::class_<[^;]*?>\(\s*\w+,\s*"(\w+)"', text):
            out[name] = path.name
    return out


def _C_calls(path: Path) -> set[str]:
    """The `_C` functions a module calls, under whatever name it imported `_C` as."""
    tree = ast.parse(path.read_text())
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            aliases.update(a.asname or a.name for a in node.names if a.name == "_C")
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.name.endswith("._C") and a.asname)
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases}


def test_each_C_concept_has_one_python_owner():
    """A module calls `_C` only for the concepts the architecture page makes it
    the owner of (through those concepts' bindings files), and each `_C`
    function has one calling module; everything else goes through the owner."""
    owners, defined = _owner_table(), _bindings_of_each_function()
    callers: dict[str, set[str]] = {}
    wrong = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        calls = _C_calls(path)
        if not calls:
            continue
        allowed = owners.get(rel) or owners.get(rel.rsplit("/", 1)[0] + "/" if "/" in rel else "", set())
        for fn in sorted(calls):
            callers.setdefault(fn, set()).add(rel)
            if defined.get(fn) not in allowed:
                wrong.append(f"{rel} calls _C.{fn} ({defined.get(fn, 'not bound')}): not a concept it owns")
    shared = [f"_C.{fn}: {sorted(mods)}" for fn, mods in callers.items() if len(mods) > 1]
    assert callers and not wrong and not shared, "\n".join(wrong + shared)


def test_architecture_page_lists_every_python_module():
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[page.index("## Layer 3: Python"):]
    missing = [p.relative_to(PKG).as_posix() for p in sorted(PKG.rglob("*.py"))
               if p.name != "__init__.py" and f"`{p.relative_to(PKG).as_posix()}`" not in section]
    assert not missing, "docs/architecture.md's Layer 3 must list each module of the package:\n" + "\n".join(missing)
