"""engine/_native.pyi stays true: every public native name has a stub, and
every stubbed name exists (methods included)."""

import ast
import os

import engine._native as native

STUB = os.path.join(os.path.dirname(native.__file__), "_native.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def test_every_public_name_is_stubbed_and_exists():
    tree = stub_tree()
    stubbed = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stubbed.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            stubbed.add(node.target.id)
    public = {n for n in dir(native) if not n.startswith("_")}
    assert public - stubbed == set()
    assert {n for n in stubbed if not n.startswith("_")} - public == set()


def test_stubbed_methods_exist():
    for node in stub_tree().body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            cls = getattr(native, node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    assert hasattr(cls, item.name), f"{node.name}.{item.name}"
