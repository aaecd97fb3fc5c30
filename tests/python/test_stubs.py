"""The shipped type stubs (aoti_cuda/_ext.pyi) describe exactly what the extension defines."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import aoti_cuda
from aoti_cuda import _ext


def stub_tree() -> ast.Module:
    path = Path(aoti_cuda.__file__).with_name("_ext.pyi")
    assert path.exists(), "the package must ship _ext.pyi"
    assert path.with_name("py.typed").exists(), "the package must ship py.typed"
    return ast.parse(path.read_text())


def public(names):
    return {n for n in names if not n.startswith("__")}


def test_every_name_has_a_stub_and_every_stub_a_name():
    tree = stub_tree()
    stub_classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    stub_functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    aliases = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    runtime = public(dir(_ext)) - {"annotations"}
    runtime_classes = {n for n in runtime if inspect.isclass(getattr(_ext, n))}
    assert set(stub_classes) == runtime_classes
    assert stub_functions == runtime - runtime_classes
    assert not aliases & runtime
    for name, node in stub_classes.items():
        declared = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
        actual = public(vars(getattr(_ext, name)))
        assert public(declared) == actual, name


def test_package_exports():
    assert set(aoti_cuda.__all__) <= set(dir(aoti_cuda))
    assert aoti_cuda.__version__ == aoti_cuda.version()
