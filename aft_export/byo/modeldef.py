"""``model_def``: the user's classifier, built by their own code.

A model definition is ``MODULE:FACTORY`` (``mypkg.models:build``, importable from the
current directory or the environment) or ``FILE.py:FACTORY`` (a path). The factory is
called with no arguments and must return a ``torch.nn.Module``; weights are loaded
afterwards, from a file read without unpickling code (:mod:`aft_export.models.weights`).

Importing the user's module runs their code: that is the point of naming it, and the
reason weights files are never allowed to carry code of their own.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path

from torch import nn

from aft_export.errors import AFTExportError, said

SYNTAX = "MODULE:FACTORY or path/to/file.py:FACTORY"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


@contextlib.contextmanager
def _on_path(folder: Path):
    """Let a model file import its neighbours (as ``python file.py`` would) while it loads."""
    entry = str(folder)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def _import_file(path: Path):
    if not path.is_file():
        raise AFTExportError(said("model definition file {path} does not exist; check {model_def}", None,
                                  path=path))
    # a stable, unique module name per file, so two model files named model.py do not collide
    name = f"_aft_user_{path.stem}_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AFTExportError(f"model definition {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _on_path(path.resolve().parent):
            spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise AFTExportError(f"model definition {path} does not import: {_first_line(exc)}") from exc
    return module


def _import_module(name: str):
    try:
        with _on_path(Path.cwd()):
            return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        hint = "" if exc.name != name.split(".")[0] else (
            f"; give a file path (path/to/{name.replace('.', '/')}.py:FACTORY) or install the package")
        raise AFTExportError(f"model definition module {name!r} does not import: {_first_line(exc)}{hint}") from exc
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise AFTExportError(f"model definition module {name!r} does not import: {_first_line(exc)}") from exc


def load_factory(spec: str):
    """The factory named by ``spec`` (``MODULE:FACTORY`` or ``FILE.py:FACTORY``)."""
    target, sep, attr = str(spec).rpartition(":")
    if not sep or not target or not attr or not attr.replace(".", "_").isidentifier():
        raise AFTExportError(said("bad {model_def} {spec!r}: expected {SYNTAX}", None, spec=spec, SYNTAX=SYNTAX))
    is_file = target.endswith(".py") or "/" in target or "\\" in target
    module = _import_file(Path(target)) if is_file else _import_module(target)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            own = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)
                   and getattr(v, "__module__", None) == module.__name__]  # defined there, not imported
            raise AFTExportError(f"model definition {target} has no {attr!r}; callables there: {sorted(own)[:12]}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AFTExportError(f"{spec}: {attr} is a {type(obj).__name__}, not a callable that builds the model")
    return obj


def build_model(spec: str) -> nn.Module:
    """Call the factory with no arguments; it must return an ``nn.Module``."""
    factory = load_factory(spec)
    try:
        model = factory()
    except Exception as exc:  # noqa: BLE001 - the user's factory raised
        raise AFTExportError(f"model factory {spec} raised {_first_line(exc)}") from exc
    if not isinstance(model, nn.Module):
        raise AFTExportError(
            f"model factory {spec} returned a {type(model).__name__}, not a torch.nn.Module; "
            f"it must build and return the classifier"
        )
    return model
