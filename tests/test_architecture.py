"""The shape of the code: no import cycles among the packages (imports inside functions and under
TYPE_CHECKING count too), and only the wiring module knows the daemon."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("controller", "drivers", "simulators")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every project module ``name`` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def test_no_import_cycles_among_the_packages() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_the_wiring_module_knows_the_daemon() -> None:
    graph = _graph()
    knows = sorted(name for name, targets in graph.items() if "controller.daemon" in targets)
    assert knows == ["controller.wiring"]


# --- the layer rules (docs/architecture.md, "Who knows whom") -----------------------------------


def _reaches(graph: dict[str, set[str]], module: str, forbidden: tuple[str, ...]) -> list[str]:
    """The forbidden modules ``module`` (a module or a package) imports directly."""
    found: set[str] = set()
    for name, targets in graph.items():
        if name == module or name.startswith(module + "."):
            found |= {t for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden)}
    return sorted(found)


def _stdlib_imports(package: str) -> set[str]:
    """The top-level names every module of ``package`` imports (stdlib and third party)."""
    names: set[str] = set()
    for path in (ROOT / package.replace(".", "/")).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    return names


FEATURES = (
    "controller.services",
    "controller.mqtt",
    "controller.display",
    "controller.protection",
)
IO = {"asyncio", "sqlite3", "socket", "serial", "usb", "aiohttp", "aiomqtt", "subprocess"}


def test_the_journal_knows_neither_the_table_nor_the_ports() -> None:
    forbidden = ("controller.table", "controller.ports", "controller.game", "controller.daemon")
    assert _reaches(_graph(), "controller.journal", forbidden) == []


def test_the_config_imports_no_driver() -> None:
    forbidden = ("drivers", "controller.devices", "simulators")
    assert _reaches(_graph(), "controller.config", forbidden) == []


def test_the_daemon_imports_no_feature_service() -> None:
    assert _reaches(_graph(), "controller.daemon", FEATURES) == []
    assert _reaches(_graph(), "controller.recorder", FEATURES) == []


def test_only_the_wiring_names_the_feature_services() -> None:
    graph = _graph()
    users = sorted(
        name
        for name, targets in graph.items()
        if not name.startswith("controller.services")
        and any(t.startswith("controller.services.") for t in targets)
    )
    assert users == ["controller.wiring"]


#: What the pure packages may import of the project: the rules import only themselves; the
#: statistics the rules, the exact analysis and the message models they read a round from.
PURE = {
    "controller.game": ("controller.game",),
    "controller.protection": (
        "controller.protection",
        "controller.game",
        "controller.analysis",
        "controller.messages",
    ),
}


def test_the_rules_and_the_statistics_stay_pure() -> None:
    graph = _graph()
    for package, allowed in PURE.items():
        reached = _reaches(graph, package, ("controller", "drivers", "simulators"))
        outside = [t for t in reached if not any(t == a or t.startswith(a + ".") for a in allowed)]
        assert outside == [], package
        assert _stdlib_imports(package) & IO == set(), package


def test_the_layer_rules_fail_when_broken() -> None:
    graph = {
        "controller.journal.store": {"controller.table.machine"},
        "controller.table.machine": set(),
    }
    assert _reaches(graph, "controller.journal", ("controller.table",)) == [
        "controller.table.machine"
    ]
    assert _reaches(graph, "controller.table", ("controller.journal",)) == []
