"""Imports inside torch_npu/ and torchair/ run one way: the graph of their intra-package imports has no cycle."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("torch_npu", "torchair")

# Modules that are not .py files in the source tree; none imports a package module, so each is a leaf.
NON_SOURCE_MODULES = {
    "torch_npu._C": "the compiled extension",
    "torch_npu._op_bindings": "generated at build time from config/npu_native_functions.yaml; imports only torch",
    "torch_npu._op_table": "generated at build time (make supported-ops); imports nothing of torch_npu",
}

# Cycles tolerated for now, as {frozenset of the cycle's modules: why}. Fix a cycle rather than list it.
ALLOWED_CYCLES = {}


def source_modules(root, packages=PACKAGES):
    """{module name: (path, is_package)} for every .py file under the packages."""
    modules = {}
    for package in packages:
        for directory, _, files in os.walk(os.path.join(root, package)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                parts = os.path.relpath(path, root)[:-3].split(os.sep)
                is_package = parts[-1] == "__init__"
                modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _deepest_module(name, known):
    """The module an import of `name` runs last: `name` itself or its longest known prefix."""
    parts = name.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts) or None


def import_graph(root, packages=PACKAGES, leaves=NON_SOURCE_MODULES):
    """{module: {imported module: line}}, from module-level and function-level imports alike.

    An import is an edge to the deepest module it names (`from pkg import name` reaches pkg.name
    when that is a module, pkg otherwise). The parent packages Python runs on the way are not
    edges: they have started before any of their submodules."""
    modules = source_modules(root, packages)
    known = set(modules) | set(leaves)
    graph = {}
    for module, (path, is_package) in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = module if is_package else module.rpartition(".")[0]
        edges = graph.setdefault(module, {})
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [_deepest_module(alias.name, known) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                named = [f"{source}.{alias.name}".lstrip(".") for alias in node.names]
                targets = [name if name in known else _deepest_module(source, known) for name in named]
            for target in targets:
                if target and target != module:
                    edges.setdefault(target, node.lineno)
    return graph, modules


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def describe(component, graph, modules):
    """One concrete loop through `component`, each step with the file and line of its import."""
    first = min(component)
    paths = {first: [first]}
    queue = [first]
    while queue:  # breadth-first: the shortest loop back to `first`
        node = queue.pop(0)
        for child in sorted(graph.get(node, ())):
            if child == first:
                loop = paths[node] + [first]
                steps = [f"  {a} -> {b}  ({os.path.relpath(modules[a][0], ROOT)}:{graph[a][b]})"
                         for a, b in zip(loop, loop[1:])]
                return f"cycle among {sorted(component)}:\n" + "\n".join(steps)
            if child in component and child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    return f"cycle among {sorted(component)}"


def test_no_import_cycles():
    graph, modules = import_graph(ROOT)
    assert "torch_npu.npu" in graph and "torchair.ge" in graph, "the packages' sources were not found"
    found = [c for c in cycles(graph) if c not in ALLOWED_CYCLES]
    assert not found, "imports must run one way; move the shared piece to the lower module:\n" + "\n".join(
        describe(c, graph, modules) for c in found)


def test_allowed_cycles_still_exist():
    # An entry for a cycle that is gone would let it come back unnoticed.
    graph, _ = import_graph(ROOT)
    stale = set(ALLOWED_CYCLES) - set(cycles(graph))
    assert not stale, f"remove these ALLOWED_CYCLES entries, the cycles are gone: {sorted(map(sorted, stale))}"


def _write(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("files, cycle", [
    ({"a.py": "from pkg import b\n", "b.py": "def f():\n    from pkg.a import x\n"}, {"pkg.a", "pkg.b"}),
    ({"a.py": "from . import b\n", "b.py": "from .a import x\n"}, {"pkg.a", "pkg.b"}),
    ({"__init__.py": "from pkg.sub import c\n", "sub/__init__.py": "", "sub/c.py": "from .. import x\n"},
     {"pkg", "pkg.sub.c"}),
    ({"__init__.py": "from . import a\n", "a.py": "import pkg._C\nimport pkg.a\nfrom pkg import _C\n"}, None),
    ({"__init__.py": "from pkg import a\n", "a.py": "import os.path\nfrom pkg.b import y\n", "b.py": ""}, None),
])
def test_checker_finds_cycles_through_every_import_form(tmp_path, files, cycle):
    _write(tmp_path, {f"pkg/{rel}": text for rel, text in files.items()})
    graph, modules = import_graph(str(tmp_path), ("pkg",), {"pkg._C": "extension"})
    found = cycles(graph)
    assert found == ([frozenset(cycle)] if cycle else []), graph
    if cycle:
        assert "->" in describe(found[0], graph, modules)
