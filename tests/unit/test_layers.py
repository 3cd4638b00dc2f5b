"""The house's layering as data, checked over every module: imports go only downward (or
within a layer), and no import cycle exists -- imports inside functions count, since they hide
a cycle rather than remove it.

A layer may import its own layer and those below it.  Packages of one layer may import each
other, but never in a cycle.  ``KNOWN_UPWARD`` and ``KNOWN_CYCLES`` list what is still to be
taken apart; the test fails on any new one and on any listed one that is gone (so the lists
only shrink).  ``python3 ../shared/tools/import_cycles.py .`` lists cycles with file and line.
"""

from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (layer name, module prefixes), lowest first; the first matching prefix, longest first, decides
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaf", ("engine._native", "engine.errors", "engine.config", "engine._kafka_configs",
              "engine.records", "engine.arrow")),
    ("protocol+storage", ("engine.protocol", "engine.storage")),
    ("metadata+connection", ("engine.metadata", "engine.client.connection", "engine.security")),
    ("replica", ("engine.replica",)),
    ("coordinator", ("engine.coordinator",)),
    ("node", ("engine.node", "engine.topics")),
    ("server+clients+cluster", ("engine.server", "engine.client", "engine.cluster")),
    ("facade+tools", ("engine._engine", "engine.__init__", "engine.__main__", "engine.cli_",
                      "engine.console", "engine.dump", "engine.group_admin", "engine.chaos", "spark_udfs")),
]

# upward imports not yet taken apart: (importer, imported) -- remove an entry when it is fixed
KNOWN_UPWARD: set[tuple[str, str]] = set()
# cycles not yet taken apart (each a sorted list of its modules); the list only shrinks
KNOWN_CYCLES: list[list[str]] = []


def _modules() -> dict[str, str]:
    out = {}
    for top in ("engine", "spark_udfs"):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(d, f), ROOT)[:-3].replace(os.sep, ".")
                    out[rel] = os.path.join(d, f)
    return out


def _layer(module: str) -> int:
    if module == "engine":              # the package itself: the facade
        module = "engine.__init__"
    best, best_len = None, -1
    for i, (_name, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".") or (p.endswith("_") and module.startswith(p))) \
                    and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it")
    return best


def _imports(module: str, path: str, known: set[str]) -> list[tuple[str, int]]:
    """Modules of ours that `module` imports anywhere in its body, with line numbers."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # `from P import X`: module P.X when X is one, else (a name defined in) P
            names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]
        for name in names:
            # the longest known module the name is or lies in
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.append((name, node.lineno))
    return found


def _graph():
    mods = _modules()
    known = set(mods) | {m.rpartition(".__init__")[0] for m in mods if m.endswith(".__init__")}
    known.add("engine._native")         # the Cython extension (csrc/)
    canon = {m.rpartition(".__init__")[0] if m.endswith(".__init__") else m: m for m in mods}
    edges: dict[str, dict[str, int]] = {}
    for mod, path in mods.items():
        name = mod.rpartition(".__init__")[0] if mod.endswith(".__init__") else mod
        for target, line in _imports(name, path, known):
            edges.setdefault(name, {}).setdefault(canon.get(target, target).replace(".__init__", ""), line)
    return edges


def test_imports_go_only_downward():
    upward = set()
    lines = []
    for src, targets in sorted(_graph().items()):
        for dst, line in sorted(targets.items()):
            if dst.startswith("engine._native"):
                continue
            if _layer(dst) > _layer(src):
                upward.add((src, dst))
                lines.append(f"{src}:{line} imports {dst} ({LAYERS[_layer(src)][0]} -> {LAYERS[_layer(dst)][0]})")
    new = upward - KNOWN_UPWARD
    gone = KNOWN_UPWARD - upward
    assert not new, "upward imports:\n" + "\n".join(
        x for x in lines if any(x.startswith(s + ":") and f" imports {d} " in x for s, d in new))
    assert not gone, f"fixed, remove from KNOWN_UPWARD: {sorted(gone)}"


def test_no_import_cycles():
    edges = _graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def strong(v):          # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    import sys
    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            strong(v)
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if c not in cycles]
    assert not new, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in new)
    assert not gone, f"taken apart, remove from KNOWN_CYCLES: {gone}"


def test_only_the_replica_layer_writes_partition_logs():
    """PartitionLog.append / append_control are called by engine/storage and engine/replica
    only; everything else writes through the ReplicaManager (``engine.replicas``, a broker's
    ``replicas``, the coordinators' ClusterLink).  Checked on the shapes such writes take: a
    receiver named like a log (``log``, ``plog``, ``*_log``) or bound from ``*.log(...)``."""
    offenders = []
    for mod, path in _modules().items():
        if mod.startswith(("engine.storage", "engine.replica")):
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        from_log = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr == "log" for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("append", "append_control")):
                continue
            recv = node.func.value
            name = recv.id if isinstance(recv, ast.Name) else recv.attr if isinstance(recv, ast.Attribute) else ""
            logish = name in ("log", "plog") or name.endswith("_log") or name in from_log \
                or (isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) and recv.func.attr == "log")
            if logish:
                offenders.append(f"{path}:{node.lineno} {ast.unparse(node.func)}")
    assert not offenders, "partition logs written outside the replica layer:\n" + "\n".join(offenders)


_STORAGE_INSIDES = {"logs", "segments", "active_segment", "leader_epoch_cache", "producer_state", "log_dir"}
# the objects of other layers a handler or coordinator holds: their private attributes are theirs
_LAYER_OBJECTS = {"node", "replicas", "rm", "part", "plog", "coord", "coordinator", "broker", "handlers",
                  "view", "cluster", "link", "member"}


def _receiver(node: ast.Attribute) -> str:
    v = node.value
    return v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else ""


def test_handlers_and_coordinators_stay_out_of_storage():
    """The broker's handlers (engine/server, but for the metrics exporter, which reads the
    LogManager's gauges) and the coordinators ask the layers below them -- the node, the
    ReplicaManager, the coordinators -- and never reach into a PartitionLog's insides
    (segments, caches, producer state), a Partition's log (``part.log``: the replica layer
    answers instead), the node's LogManager, or another object's private attributes
    (``node._admin``).  The coordinators read their partitions through the replica layer
    (``replicas.local_log``), not ``node.log``.  Cluster mode (engine/cluster) too uses only
    the node's public operations (``mirror_topic``, ``ensure_log``, ``admin_lock``, ...)."""
    offenders = []
    for mod, path in _modules().items():
        if not mod.startswith(("engine.server.", "engine.coordinator.", "engine.cluster.")) \
                or mod == "engine.server.metrics":
            continue
        privates_only = mod.startswith("engine.cluster.")
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for n in ast.walk(tree):
            if not isinstance(n, ast.Attribute):
                continue
            recv = _receiver(n)
            private = n.attr.startswith("_") and not n.attr.startswith("__") and recv in _LAYER_OBJECTS
            bad = private or not privates_only and (
                n.attr in _STORAGE_INSIDES
                or (n.attr == "log" and (mod.startswith("engine.coordinator.") or not recv.endswith("node"))))
            if bad:
                offenders.append(f"{path}:{n.lineno} {ast.unparse(n)}")
    assert not offenders, "reaching past the layer below:\n" + "\n".join(offenders)


def test_lower_layers_hold_no_node():
    """The replica layer (and below) is given what it uses -- the config, the LogManager, the
    cluster view, a ``log_for`` callable -- never the Node above it (a duck-typed upward call
    the import checks cannot see: ReplicaManager once created topics through ``node``)."""
    offenders = []
    for mod, path in _modules().items():
        if _layer(mod) > _layer("engine.replica"):
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for n in ast.walk(tree):
            name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) \
                else n.arg if isinstance(n, ast.arg) else None
            if name == "node":
                offenders.append(f"{path}:{n.lineno}")
    assert not offenders, "a Node held below its layer:\n" + "\n".join(offenders)


# what reads a partition's records or offsets on a PartitionLog (the storage layer)
_LOG_READS = {"read", "segments_for_range", "aborted_transactions", "offset_for_timestamp", "refresh",
              "last_stable_offset"}


def test_in_process_readers_go_through_the_replica_layer():
    """The embedded clients (engine/client), the Engine facade, the group tools and the web
    console read partitions through the replica layer (``engine.replicas.local.read_from_local_log``,
    ``read_local_batches``, ``local_offsets``, ``local_offset_for_timestamp``,
    ``describe_local_log``: engine/replica/local_read.py), never a PartitionLog: no ``.log(...)``
    / ``._log(...)`` / ``.get_log(...)`` / ``.logs()`` call and no read method (``read``,
    ``segments_for_range``, ...) on a log.  Only ``Engine.log`` itself, the public handle on the storage layer, calls
    ``node.log``; ``spark_udfs`` reads segment files in other processes by design."""
    offenders = []
    for mod, path in _modules().items():
        if not (mod.startswith(("engine.client.", "engine.console."))
                or mod in ("engine._engine", "engine.group_admin")):
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        accessor = {id(n) for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) and fn.name == "log"
                    and mod == "engine._engine" for n in ast.walk(fn)}
        from_log = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr in ("log", "_log", "get_log")
                    for t in node.targets if isinstance(t, ast.Name)}
        for n in ast.walk(tree):
            if id(n) in accessor:
                continue
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in ("log", "_log", "get_log", "logs"):   # (logs(): LogManager's)
                offenders.append(f"{path}:{n.lineno} {ast.unparse(n.func)}(...)")
            elif isinstance(n, ast.Attribute) and n.attr in _LOG_READS:
                recv = _receiver(n)
                if recv in ("log", "plog") or recv.endswith("_log") or recv in from_log:
                    offenders.append(f"{path}:{n.lineno} {ast.unparse(n)}")
    assert not offenders, "partition logs read outside the replica layer:\n" + "\n".join(offenders)
