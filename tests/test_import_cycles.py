"""No import cycle in `keras_synth/` or `recipes/`.

Read with `ast`, not imported: every `import` and `from ... import`
statement of every module counts, inside functions too (an import put in a
function to dodge a cycle is still a cycle). Importing `a.b.c` runs the
package `__init__` of `a.b` first, so it also depends on the packages on
the way (except the importer's own packages, which are being imported
already). A cycle is a strongly connected set of two or more modules.
"""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("keras_synth", "recipes")


def _modules():
    """`{module name: (path, is a package)}` of the repository's
    packages."""
    modules = {}
    for package in PACKAGES:
        for folder, _, names in os.walk(os.path.join(REPO, package)):
            for name in names:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
                is_package = parts[-1] == "__init__"
                if is_package:
                    parts = parts[:-1]
                modules[".".join(parts)] = (path, is_package)
    return modules


def _imported_names(module, is_package, tree, modules):
    """`(name, line)` of what each import statement of `tree` imports: a
    module where the name is one, else the package or module it is taken
    from."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module
                                          else []))
            else:
                source = node.module
            for alias in node.names:
                name = f"{source}.{alias.name}"
                yield (name if name in modules else source), node.lineno


def import_graph(modules):
    """`{module: {imported module: line}}` within `modules`, the packages
    on the way included."""
    graph = {}
    for module, (path, is_package) in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        edges = graph.setdefault(module, {})
        for name, line in _imported_names(module, is_package, tree, modules):
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                target = ".".join(parts[:end])
                if target not in modules or target == module:
                    continue
                if module.startswith(target + "."):
                    continue  # the importer's own package: imported already
                edges.setdefault(target, line)
    return graph


def cycles(graph):
    """The strongly connected sets of two or more modules (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph(_modules())
    # A top-level `from package import module`.
    assert "recipes.core.callbacks" in graph["recipes.core.run_directory"]
    # An import inside a function (recipes.core.model_flags imports the
    # package only when the variants' options are checked).
    assert any(t.startswith("keras_synth.layers")
               for t in graph["recipes.core.model_flags"])
    # The packages on the way of a dotted import.
    assert "keras_synth.models.tokenizers" in graph[
        "keras_synth.models.legacy_names"]


def test_the_finder_finds_a_cycle():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    graph = import_graph(_modules())
    found = [c for c in cycles(graph) if any(
        m == package or m.startswith(package + ".") for m in c)]
    described = [
        ", ".join(f"{a} -> {b} (line {graph[a][b]})"
                  for a in cycle for b in graph[a] if b in cycle)
        for cycle in found]
    assert not found, "import cycles: " + "; ".join(described)
