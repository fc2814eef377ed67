"""The loader's options are declared once, as the fields of the Rust ``BatchSpec``.

The native ``_Batches.OPTIONS`` lists them with their defaults, in declaration order; these tests
hold every Python mirror against it: the stub of ``_Batches``, the signature of ``ad.batches``
(and what it hands on), and ``BatchDataset``.
"""

import ast
import inspect
import pathlib

import pyarrow as pa
import pytest

import arrow_dlpack as ad
import arrow_dlpack._batches as batches_module
from arrow_dlpack._arrow_dlpack import _Batches

#: The options and defaults that Rust declares.
RUST = _Batches.OPTIONS

#: What ``ad.batches`` works out itself instead of taking: the shard, from ``rank`` and
#: ``world_size`` and the DataLoader worker it runs in.
DERIVED = {"shard_index", "num_shards"}

#: The parameters of ``ad.batches`` that are not options of the spec, with their defaults.
PYTHON_ONLY = {
    "source": inspect.Parameter.empty,
    "rank": None,
    "world_size": None,
    "progress": False,
    "storage_options": None,
}


def _typed(options):
    """``options`` with each value paired with its type, so that ``False`` differs from ``0``."""
    return {name: (type(value), value) for name, value in options.items()}


def _stub_new():
    """The arguments of ``_Batches.__new__`` in the installed stub."""
    stub = pathlib.Path(ad.__file__).with_name("_arrow_dlpack.pyi")
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    cls = next(
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "_Batches"
    )
    new = next(
        node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "__new__"
    )
    return new.args


@pytest.fixture
def handed_on(monkeypatch):
    """The keywords ``ad.batches`` hands to ``_Batches``, recorded on their way."""
    seen = {}

    def record(source, **options):
        seen.update(options)
        return _Batches(source, **options)

    monkeypatch.setattr(batches_module, "_Batches", record)
    return seen


def test_rust_lists_the_fields_of_the_spec_with_their_defaults():
    assert list(RUST) == [
        "batch_size", "drop_last", "columns", "groups", "masks", "allow_nulls", "null_to_nan",
        "row_major", "shuffle", "seed", "buffer_size", "shard_index", "num_shards", "prefetch",
        "decode_threads", "writable", "sequences", "max_tokens", "bucket_by_length", "epoch",
        "state",
    ]
    assert _typed(RUST) == _typed({
        "batch_size": 1024, "drop_last": False, "columns": [], "groups": [], "masks": [],
        "allow_nulls": False, "null_to_nan": False, "row_major": True, "shuffle": False,
        "seed": 0, "buffer_size": 65_536, "shard_index": 0, "num_shards": 1, "prefetch": 2,
        "decode_threads": 0, "writable": False, "sequences": {}, "max_tokens": None,
        "bucket_by_length": False, "epoch": 0, "state": None,
    })


def test_the_stub_declares_the_options_of_the_spec_with_their_defaults():
    args = _stub_new()
    assert [arg.arg for arg in args.args] == ["cls", "source"]
    assert args.vararg is None and args.kwarg is None
    stub = {
        arg.arg: ast.literal_eval(default)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    }
    # The source's options, not the spec's.
    assert stub.pop("storage_options") is None
    assert list(stub) == list(RUST)
    assert _typed(stub) == _typed(RUST)


def test_batches_takes_every_option_of_the_spec_but_the_shard():
    parameters = inspect.signature(ad.batches).parameters
    assert {name: parameters[name].default for name in PYTHON_ONLY} == PYTHON_ONLY
    assert set(parameters) - set(PYTHON_ONLY) == set(RUST) - DERIVED


def test_the_defaults_of_batches_reach_rust_as_the_defaults_of_the_spec(handed_on):
    ad.batches(pa.table({"x": [1.0, 2.0]}))
    # Outside a DataLoader worker and a process group, the shard is the whole, and without a
    # shuffle the seed is the spec's.
    assert _typed(handed_on) == _typed(RUST)


def test_batches_hands_every_option_on(handed_on):
    ad.batches(
        pa.table({"x": [1.0, 2.0], "y": [3.0, 4.0], "s": [[1], [2, 3]]}),
        3,
        columns=("x",),
        groups={"xy": ("x", "y")},
        masks=("y",),
        drop_last=True,
        allow_nulls=True,
        null_to_nan=True,
        row_major=False,
        shuffle=True,
        seed=5,
        buffer_size=7,
        rank=1,
        world_size=2,
        prefetch=4,
        decode_threads=3,
        writable=True,
        sequences={"s": "pack"},
        max_tokens=64,
        bucket_by_length=True,
        epoch=2,
    )
    assert _typed(handed_on) == _typed({
        "batch_size": 3, "drop_last": True, "columns": ["x"], "groups": [("xy", ["x", "y"])],
        "masks": ["y"], "allow_nulls": True, "null_to_nan": True, "row_major": False,
        "shuffle": True, "seed": 5, "buffer_size": 7, "shard_index": 1, "num_shards": 2,
        "prefetch": 4, "decode_threads": 3, "writable": True, "sequences": {"s": "pack"},
        "max_tokens": 64, "bucket_by_length": True, "epoch": 2, "state": None,
    })


def test_batch_dataset_takes_the_batch_size_of_the_spec_and_hands_the_rest_on(handed_on):
    parameters = inspect.signature(ad.BatchDataset).parameters
    assert list(parameters) == ["source", "batch_size", "options"]
    assert parameters["batch_size"].default == RUST["batch_size"]
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD
    batches = list(ad.BatchDataset(pa.table({"x": [1.0, 2.0, 3.0]}), 2, drop_last=True))
    assert [batch["x"].tolist() for batch in batches] == [[1.0, 2.0]]
    assert handed_on["batch_size"] == 2 and handed_on["drop_last"] is True


def test_an_unknown_keyword_and_a_bad_value_are_refused_naming_the_argument():
    table = pa.table({"x": [1.0]})
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        _Batches(table, batchsize=2)
    with pytest.raises(TypeError, match=r"^shuffle is str; expected bool$"):
        _Batches(table, shuffle="yes")
    # A negative int is a ValueError naming the argument, not pyo3's bare OverflowError.
    with pytest.raises(ValueError, match=r"^batch_size is -1; expected a non-negative int$"):
        ad.batches(table, -1)
