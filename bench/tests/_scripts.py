"""Loads a bench script by path as a module: the scripts are no part of the wheel or a package."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1]


def load(file_name: str) -> ModuleType:
    """The module of ``bench/<file_name>``, registered in ``sys.modules`` as ``bench_<stem>``
    (dataclasses look their module up by name while building their classes). ``bench/`` goes on
    ``sys.path`` first, as when a script is run, so that the scripts import their siblings."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    name = "bench_" + Path(file_name).stem
    spec = importlib.util.spec_from_file_location(name, BENCH / file_name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
