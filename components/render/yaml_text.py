"""YAML documents as reviewers read them: keys in the order written, no aliases."""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import yaml

# libyaml's emitter when PyYAML was built with it (several times faster; the same text, tested), else PyYAML's own.
_Base: Any = yaml.CSafeDumper if getattr(yaml, "__with_libyaml__", False) else yaml.SafeDumper


class _Dumper(_Base):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _mapping(dumper: yaml.SafeDumper, data: Mapping[str, Any]) -> yaml.Node:
    return dumper.represent_dict(dict(data).items())


_Dumper.add_representer(dict, lambda d, data: d.represent_dict(data.items()))
_Dumper.add_multi_representer(Mapping, _mapping)  # type: ignore[arg-type,type-abstract]
_Dumper.add_representer(tuple, lambda d, data: d.represent_list(list(data)))
# A multi-line string (a config file inside Helm values) reads as a block, not one escaped line.
_Dumper.add_representer(
    str, lambda d, data: d.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)
)


def dump(document: Any) -> str:
    # A 1,000-node plan renders the same kubelet drop-in and join layout a thousand times over; the
    # pickle keeps key order and types, so equal keys mean equal YAML.
    try:
        key = pickle.dumps(document, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return _dump(document)
    return _dump_pickled(key)


@lru_cache(maxsize=4096)
def _dump_pickled(key: bytes) -> str:
    # Only ever our own bytes, made by dump() above.
    return _dump(pickle.loads(key))


def _dump(document: Any) -> str:
    return yaml.dump(document, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=120)


def dump_all(documents: Iterable[Any]) -> str:
    return "---\n".join(dump(d) for d in documents)
