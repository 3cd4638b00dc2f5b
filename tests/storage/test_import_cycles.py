"""House rule "no import cycles" for engine/storage: the graph of its modules'
relative imports -- module-level ones and the function-level ones done lazily
(``if TYPE_CHECKING:`` blocks excluded) -- has no cycle."""

import ast
import os

from .conftest import ROOT

STORAGE = os.path.join(ROOT, "engine", "storage")


def _graph() -> dict[str, set[str]]:
    mods = {f[:-3] for f in os.listdir(STORAGE) if f.endswith(".py")}
    graph = {}
    for m in mods:
        with open(os.path.join(STORAGE, m + ".py")) as f:
            tree = ast.parse(f.read())
        skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        out = set()
        for n in ast.walk(tree):
            if id(n) in skip or not isinstance(n, ast.ImportFrom) or n.level != 1:
                continue
            if n.module:
                out.add(n.module.split(".")[0])
            else:
                out.update(a.name for a in n.names)
        graph[m] = (out & mods) - {m}
    return graph


def _cycles(graph):
    found, state, stack = [], {}, []

    def dfs(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                dfs(v)
        stack.pop()
        state[u] = 2

    for u in sorted(graph):
        if u not in state:
            dfs(u)
    return found


def test_storage_modules_have_no_import_cycle():
    graph = _graph()
    assert {"log", "local_log", "loader", "log_txn", "log_retention", "log_flush", "epochs"} <= set(graph)
    assert "segment" in graph["log"] and "log" not in graph["loader"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
