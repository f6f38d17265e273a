"""The package version, in one place (imported by the package and by what records it), and the
release that drops the names renamed before it: flags (aft_export.cli.words), option fields
(:func:`renamed_fields`, on the classes of aft_export.options) and modules (aft_export.MOVED)."""

from __future__ import annotations

import functools
import warnings

__version__ = "0.1.0"
RENAMED_UNTIL = "0.2.0"

RENAMED_FIELDS: dict[type, dict[str, str]] = {}  # class -> {old field: new field} (docs/cli.md lists them)


class _OldName:
    """A renamed field's old attribute: the new one's (on the class, its default), with a DeprecationWarning."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def __get__(self, obj, owner):
        warnings.warn(f"{owner.__name__}.{self.old} is now {owner.__name__}.{self.new}; the old name goes in "
                      f"aft-export {RENAMED_UNTIL}", DeprecationWarning, stacklevel=2)  # fmt: skip
        return getattr(owner if obj is None else obj, self.new)


class ReadAsDict:
    """A typed row that was a dict (a parity row, the export's check, a swap's agreement): ``row["key"]`` and
    ``row.get("key")`` still read its ``to_dict()`` until :data:`RENAMED_UNTIL`, with a DeprecationWarning
    that names the attribute."""

    def __getitem__(self, key: str):
        name = type(self).__name__
        warnings.warn(f"{name}[{key!r}] is now {name}.{key} (or .to_dict()[{key!r}]); the dict form goes in "
                      f"aft-export {RENAMED_UNTIL}", DeprecationWarning, stacklevel=2)  # fmt: skip
        return self.to_dict()[key]

    def get(self, key: str, default=None):
        try:
            return self[key]
        except KeyError:
            return default


def renamed_fields(renamed: dict[str, str]):
    """A class decorator, outside ``@dataclass``: the class takes the old keywords of ``renamed`` (old
    field -> new field) until :data:`RENAMED_UNTIL`, with a DeprecationWarning, and reads the old
    attributes as the new ones (:class:`_OldName`); ``dataclasses.fields``, ``asdict`` and ``repr``
    have the new names only."""

    def decorate(cls):
        init, name = cls.__init__, cls.__name__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            for old, new in [(o, n) for o, n in renamed.items() if o in kwargs]:
                if new in kwargs:
                    raise TypeError(f"{name}() got both {old}= and {new}=; give {new}= alone")
                warnings.warn(f"{name}({old}=...) is now {name}({new}=...); the old name goes in aft-export "
                              f"{RENAMED_UNTIL}", DeprecationWarning, stacklevel=2)  # fmt: skip
                kwargs[new] = kwargs.pop(old)
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        for old, new in renamed.items():
            setattr(cls, old, _OldName(old, new))
        RENAMED_FIELDS[cls] = dict(renamed)
        return cls

    return decorate
