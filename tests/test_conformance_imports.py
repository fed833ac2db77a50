"""The conformance kit's modules import one another without a cycle: the registry and the helpers
import no family of cases, the families import no module that imports them, and only
``conformance.cases`` (which the runner imports) gathers the families. Imports inside functions
count too: a cycle hidden in a function is still a cycle."""
import ast
import os

import conformance

PACKAGE_DIR = os.path.dirname(os.path.abspath(conformance.__file__))


def import_graph(directory, package):
    """module -> the modules of ``package`` (files of ``directory``) it imports, anywhere in it.
    ``package`` itself is its ``__init__``."""
    names = {f[:-3] for f in os.listdir(directory) if f.endswith(".py")}
    qualified = {package if n == "__init__" else f"{package}.{n}" for n in names}
    graph = {}
    for name in sorted(names):
        module = package if name == "__init__" else f"{package}.{name}"
        with open(os.path.join(directory, f"{name}.py")) as f:
            tree = ast.parse(f.read(), filename=f.name)
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
                # from package import module
                imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[module] = sorted((imported & qualified) - {module})
    return graph


def find_cycle(graph):
    """A list of modules, each importing the next and the last the first; None when acyclic."""
    state = {}  # module -> "open" while on the path, "done" after

    def visit(module, path):
        state[module] = "open"
        path.append(module)
        for imported in graph.get(module, ()):
            if state.get(imported) == "open":
                return path[path.index(imported):]
            if imported not in state:
                cycle = visit(imported, path)
                if cycle:
                    return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [])
            if cycle:
                return cycle
    return None


def test_the_kits_modules_import_one_another_without_a_cycle():
    graph = import_graph(PACKAGE_DIR, "conformance")
    assert "conformance.registry" in graph and "conformance.cases" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle + cycle[:1])


def reached(graph, module):
    """Every module ``module`` imports, directly or through others."""
    found, stack = set(), list(graph.get(module, ()))
    while stack:
        name = stack.pop()
        if name not in found:
            found.add(name)
            stack.extend(graph.get(name, ()))
    return found


def test_the_registry_and_each_family_reach_no_family_of_cases():
    graph = import_graph(PACKAGE_DIR, "conformance")
    families = set(graph["conformance.cases"]) - {"conformance", "conformance.registry"}
    assert len(families) >= 16
    assert reached(graph, "conformance.registry") & (families | {"conformance.cases"}) == set()
    for family in sorted(families):
        assert reached(graph, family) & (families | {"conformance.cases"}) == set(), family


def test_a_planted_cycle_is_found(tmp_path):
    package = tmp_path / "kit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("import os\n")
    (package / "family.py").write_text("from kit.base import x\n")
    (package / "families.py").write_text("from kit import family\n")
    assert find_cycle(import_graph(str(package), "kit")) is None
    # the old shape: the base registers the families at its bottom, inside a function here
    (package / "base.py").write_text("def register():\n    from kit import families\n")
    assert find_cycle(import_graph(str(package), "kit")) == ["kit.base", "kit.families",
                                                              "kit.family"]
