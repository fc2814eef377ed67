"""Puts this folder on ``sys.path``, so that the tests can ``import _scripts``: they run with
``--import-mode=importlib``, which adds no test folder to it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
