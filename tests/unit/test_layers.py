"""The architecture as a check: each package imports only the layers below it, the
engines do not import each other (except agents, which composes retrieval and
reranking), and only the transport layers know gRPC or protobuf."""

from __future__ import annotations

import ast
from pathlib import Path

import groundwire

ROOT = Path(groundwire.__file__).parent

# Lowest first. `instruments` (OpenTelemetry only) is cross-cutting like logging.
LAYERS: dict[str, int] = {
    "instruments": 0,
    "domain": 0,
    "providers": 1,
    "stores": 2,
    "indexes": 3,
    "ingestion": 4,
    "retrieval": 4,
    "reranking": 4,
    "agents": 4,
    "api": 5,
    "evaluation": 5,
    "app": 6,
    "__main__": 7,
}
CROSS_CUTTING = {"instruments"}
SIDEWAYS_ALLOWED = {("agents", "retrieval"), ("agents", "reranking")}
TRANSPORT = {
    "google",  # google.protobuf and google.rpc
    "grpc",
    "grpc_health",
    "grpc_reflection",
    "grpc_status",
    "groundwire_client",
}
TRANSPORT_PACKAGES = {"api", "app", "evaluation"}
# A gRPC client of the public API: it imports no engine, store or transport package
# of the server; it may reuse the pure domain rules (citation markers, the
# untrusted-context rendering) and the provider adapters (the answer judge's chat
# model), so it measures with the same rules the server applies.
CLIENT_ONLY = {"evaluation"}
CLIENT_MAY_USE = {"domain", "providers"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def _edges() -> list[tuple[str, str, str]]:
    """(importing package, imported top-level name, file) for every import."""
    edges = []
    for path in sorted(ROOT.rglob("*.py")):
        package = path.relative_to(ROOT).parts[0].removesuffix(".py")
        if package == "__init__":
            continue
        for module in _imports(path):
            if module == "groundwire":
                continue  # the package root: only its version
            parts = module.split(".")
            target = parts[1] if parts[0] == "groundwire" and len(parts) > 1 else parts[0]
            if parts[0] == "groundwire" and target == package:
                continue
            edges.append(
                (package, target if parts[0] == "groundwire" else f"<{target}>", str(path))
            )
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    modules = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    assert (packages | modules) - LAYERS.keys() == set()


def test_imports_point_only_downwards() -> None:
    wrong = []
    for package, target, path in _edges():
        if target.startswith("<"):
            continue
        if package in CLIENT_ONLY and target in CLIENT_MAY_USE:
            continue
        if package in CLIENT_ONLY | CROSS_CUTTING:
            wrong.append((package, target, path))
        elif target in CROSS_CUTTING:
            continue
        elif LAYERS[target] > LAYERS[package] or (
            LAYERS[target] == LAYERS[package] and (package, target) not in SIDEWAYS_ALLOWED
        ):
            wrong.append((package, target, path))
    assert wrong == []


def test_only_the_transport_layers_know_grpc_and_protobuf() -> None:
    wrong = [
        (package, target, path)
        for package, target, path in _edges()
        if target.strip("<>") in TRANSPORT and package not in TRANSPORT_PACKAGES
    ]
    assert wrong == []


def test_the_configuration_modules_know_no_transport() -> None:
    # Loading or checking a configuration file never pulls in gRPC or protobuf.
    config_modules = [ROOT / "app" / "config.py", ROOT / "app" / "config_base.py"]
    config_modules += sorted((ROOT / "app").glob("*_config.py"))
    wrong = [
        (path.name, module)
        for path in config_modules
        for module in _imports(path)
        if module.split(".")[0] in TRANSPORT
    ]
    assert wrong == []


def _module_graph() -> dict[str, set[str]]:
    """groundwire module -> the groundwire modules it imports (at any place, under
    TYPE_CHECKING too: a loop there is still two modules that know each other)."""
    modules: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = ["groundwire", *path.relative_to(ROOT).with_suffix("").parts]
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            # A module importing its own package (its __init__) is Python's
            # package mechanics, not a dependency between rooms.
            graph[name].update(
                t for t in targets if t in modules and t != name and not name.startswith(t + ".")
            )
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_import_each_other() -> None:
    # Rooms, not corridors: a loop (stores/postgres/store.py and workitems.py once)
    # means neither module can be read, tested or moved without the other.
    assert _cycles(_module_graph()) == []


def test_the_cycle_check_finds_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
