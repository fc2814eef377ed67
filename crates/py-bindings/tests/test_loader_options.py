"""The loader's options are declared once: the fields of the Rust ``BatchSpec`` (listed by the
native ``_Batches.OPTIONS``) and the few that only Python acts on (``arrow_dlpack._options``).

These tests hold every mirror against the declaration: the signatures of ``ad.batches``,
``BatchDataset``, ``ad.ray.collate_fn`` and ``ArrowCollateFn`` (names, order, kinds, defaults and
annotations), the stubs (``_arrow_dlpack.pyi``, ``ray.pyi``), and what ``ad.batches`` hands on.
"""

import ast
import inspect
import pathlib
import typing

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad
import arrow_dlpack._batches as batches_module
from arrow_dlpack import _options
from arrow_dlpack._arrow_dlpack import _Batches, _check_options

#: The options and defaults that Rust declares.
RUST = _Batches.OPTIONS

#: The parameters before the keyword-only options, with their kinds and defaults.
POSITIONAL = [
    ("source", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
    ("batch_size", inspect.Parameter.POSITIONAL_OR_KEYWORD, RUST["batch_size"]["default"]),
]


def _typed(options):
    """``options`` with each value paired with its type, so that ``False`` differs from ``0``."""
    return {name: (type(value), value) for name, value in options.items()}


def _annotation(text):
    """The typing object that the annotation ``text`` spells."""
    return eval(text, vars(typing))  # noqa: S307 - the text is the declaration's


def _runtime(function, options, positional=POSITIONAL, evaluate=True):
    """Asserts that ``function``'s signature is ``positional`` and then ``options`` (from the
    declaration) as keyword-only parameters: names, order, kinds, defaults and annotations."""
    parameters = list(inspect.signature(function).parameters.values())
    if parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    found = [(p.name, p.kind, type(p.default), p.default) for p in parameters]
    expected = [(name, kind, type(default), default) for name, kind, default in positional] + [
        (option.name, inspect.Parameter.KEYWORD_ONLY, type(option.default), option.default)
        for option in options
    ]
    assert found == expected
    keyword = parameters[len(positional):]
    for parameter, option in zip(keyword, options, strict=True):
        annotation = _annotation(option.annotation) if evaluate else option.annotation
        assert parameter.annotation == annotation, (parameter.name, parameter.annotation)


def _stub_function(path, name, cls=None):
    """The arguments of function ``name`` (of class ``cls``) in the installed stub ``path``."""
    tree = ast.parse(pathlib.Path(ad.__file__).with_name(path).read_text(encoding="utf-8"))
    body = tree.body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name).args


def _stub(args, options, positional):
    """Asserts that stub arguments ``args`` are ``positional`` and then ``options`` as
    keyword-only arguments with the declared defaults and annotations."""
    assert [arg.arg for arg in args.args] == positional
    assert args.vararg is None and args.kwarg is None
    found = [
        (arg.arg, ast.literal_eval(default), ast.unparse(arg.annotation))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    assert found == [(o.name, o.default, o.annotation) for o in options]


def test_rust_declares_every_field_of_the_spec_with_its_default_and_annotation():
    assert list(RUST) == [
        "batch_size", "drop_last", "columns", "groups", "masks", "allow_nulls", "null_to_nan",
        "row_major", "shuffle", "seed", "buffer_size", "shard_index", "num_shards", "num_ranks",
        "prefetch", "decode_threads", "cache_dir", "cache_size", "writable", "sequences",
        "images", "image_root", "max_tokens", "bucket_by_length", "epoch", "state",
    ]
    # Python spells an empty collection, or no state, as None.
    assert _typed({name: entry["default"] for name, entry in RUST.items()}) == _typed({
        "batch_size": 1024, "drop_last": False, "columns": None, "groups": None, "masks": None,
        "allow_nulls": False, "null_to_nan": False, "row_major": True, "shuffle": False,
        "seed": 0, "buffer_size": 65_536, "shard_index": 0, "num_shards": 1, "num_ranks": 0,
        "prefetch": 2, "decode_threads": 0, "cache_dir": None, "cache_size": 10 << 30,
        "writable": False, "sequences": None, "images": None,
        "image_root": None, "max_tokens": None, "bucket_by_length": False, "epoch": 0,
        "state": None,
    })
    assert {name for name, entry in RUST.items() if entry["scope"] == "batch"} == {
        "columns", "groups", "masks", "allow_nulls", "null_to_nan", "row_major", "writable",
        "sequences", "images", "image_root",
    }
    for name, entry in RUST.items():
        _annotation(entry["annotation"])
        assert entry["summary"].endswith("."), name


def test_the_python_table_declares_what_only_python_acts_on():
    assert list(_options.PYTHON) == [
        "rank", "world_size", "split_workers", "format", "progress", "storage_options"
    ]
    assert {name: option.default for name, option in _options.PYTHON.items()} == {
        "rank": None, "world_size": None, "split_workers": None, "format": "dlpack",
        "progress": False, "storage_options": None,
    }
    assert set(_options.PYTHON).isdisjoint(RUST)
    assert set(_options.PYTHON_DEFAULTS) <= set(RUST)
    assert set(_options.DERIVED) <= set(RUST)


def test_the_signature_of_batches_is_the_declaration():
    _runtime(ad.batches, _options.batches_options())
    assert inspect.signature(ad.batches).return_annotation is ad.Batches
    names = [*_options.POSITIONAL] + [option.name for option in _options.batches_options()]
    assert set(names) == (set(RUST) - set(_options.DERIVED)) | set(_options.PYTHON)


def test_the_signature_of_batch_dataset_is_the_declaration():
    _runtime(ad.BatchDataset, _options.dataset_options())
    assert "progress" not in inspect.signature(ad.BatchDataset).parameters
    assert "format" not in inspect.signature(ad.BatchDataset).parameters


def test_the_signatures_of_rays_collate_function_are_the_declaration():
    import arrow_dlpack.ray as ad_ray

    options = _options.collate_options() + [_options.PYTHON["format"]._replace(default="torch")]
    for function in (ad_ray.collate_fn, ad_ray.ArrowCollateFn):
        _runtime(function, options, positional=[], evaluate=False)
    _stub(_stub_function("ray.pyi", "collate_fn"), options, [])
    _stub(_stub_function("ray.pyi", "__init__", cls="ArrowCollateFn"), options, ["self"])


def test_the_native_stub_takes_the_options_as_keywords_without_spelling_them():
    new = _stub_function("_arrow_dlpack.pyi", "__new__", cls="_Batches")
    assert [arg.arg for arg in new.args] == ["cls", "source"]
    assert [arg.arg for arg in new.kwonlyargs] == ["storage_options"]
    assert new.kwarg is not None and new.kwarg.arg == "options"
    for name in ("_check_options", "_collate"):
        args = _stub_function("_arrow_dlpack.pyi", name)
        assert args.kwarg is not None and args.kwarg.arg == "options"
        assert not set(arg.arg for arg in args.kwonlyargs) & set(RUST)


def test_batches_returns_the_public_class_whatever_the_options():
    assert typing.get_type_hints(ad.batches)["return"] is ad.Batches
    assert "Batches" in ad.__all__
    table = pa.table({"x": np.arange(4.0)})
    assert type(ad.batches(table)) is ad.Batches
    assert type(ad.batches(table, progress=True)) is ad.Batches


@pytest.fixture
def handed_on(monkeypatch):
    """The keywords ``ad.batches`` hands to ``_Batches``, recorded on their way."""
    seen = {}

    def record(source, **options):
        seen.update(options)
        return _Batches(source, **options)

    monkeypatch.setattr(batches_module, "_Batches", record)
    return seen


def test_the_defaults_of_batches_reach_rust_as_the_defaults_of_the_spec(handed_on):
    ad.batches(pa.table({"x": [1.0, 2.0]}))
    handed_on.pop("storage_options")
    # Outside a DataLoader worker and a process group, the shard is the whole, and without a
    # shuffle the seed and the epoch are the spec's.
    assert _typed(handed_on) == _typed({name: entry["default"] for name, entry in RUST.items()})


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
        cache_dir="c",
        cache_size=5,
        writable=True,
        sequences={"s": "pack"},
        max_tokens=64,
        bucket_by_length=True,
        epoch=2,
    )
    assert _typed(handed_on) == _typed({
        "batch_size": 3, "drop_last": True, "columns": ("x",), "groups": {"xy": ("x", "y")},
        "masks": ("y",), "allow_nulls": True, "null_to_nan": True, "row_major": False,
        "shuffle": True, "seed": 5, "buffer_size": 7, "shard_index": 1, "num_shards": 2,
        "num_ranks": 0, "prefetch": 4, "decode_threads": 3, "cache_dir": "c", "cache_size": 5,
        "writable": True, "sequences": {"s": "pack"},
        "images": None, "image_root": None, "max_tokens": 64, "bucket_by_length": True,
        "epoch": 2, "state": None, "storage_options": None,
    })


def test_an_unknown_keyword_and_a_bad_value_are_refused_naming_the_argument():
    table = pa.table({"x": [1.0]})
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'batchsize'"):
        _Batches(table, batchsize=2)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'shufle'"):
        ad.batches(table, shufle=True)
    with pytest.raises(TypeError, match=r"^shuffle is str; expected bool$"):
        _Batches(table, shuffle="yes")
    # A negative int is a ValueError naming the argument, not pyo3's bare OverflowError.
    with pytest.raises(ValueError, match=r"^batch_size is -1; expected at least 1$"):
        ad.batches(table, -1)
    with pytest.raises(ValueError, match=r"^epoch is -1; expected a non-negative int$"):
        ad.batches(table, epoch=-1)
    # The collate function takes only what a batch holds.
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'shuffle'"):
        from arrow_dlpack._arrow_dlpack import _collate

        _collate(table, shuffle=True)


def test_check_options_checks_every_option_without_a_loader(tmp_path):
    unknown = {"num_rows": None, "num_batches": None, "rows_left_out": 0}
    assert _check_options(None, batch_size=3) == unknown
    with pytest.raises(ValueError, match=r"batch_size is 0; expected at least 1"):
        _check_options(None, batch_size=0)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bach_size'"):
        _check_options(None, bach_size=3)
    table = pa.table({"x": np.arange(10.0)})
    assert _check_options(table, batch_size=4) == {
        "num_rows": 10, "num_batches": 3, "rows_left_out": 0
    }
    # A stream is not read (streams are read once), but the schema it states is checked.
    with pytest.raises(ValueError, match=r'column "nope" not found; expected one of \["x"\]'):
        _check_options(table, columns=["nope"])
    reader = table.to_reader()
    with pytest.raises(ValueError, match=r'column "nope" not found'):
        _check_options(reader, columns=["nope"])
    assert reader.read_all().num_rows == 10
    path = tmp_path / "t.parquet"
    import pyarrow.parquet as pq

    pq.write_table(table, path, row_group_size=3)
    assert _check_options(str(path), batch_size=4, drop_last=True) == {
        "num_rows": 10, "num_batches": 2, "rows_left_out": 0
    }
    with pytest.raises(ValueError, match=r'no column "nope"|"nope"'):
        _check_options(str(path), columns=["nope"])


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("batch_size", np.int64(3), [3, 3, 3, 1]),
        ("batch_size", np.uint8(5), [5, 5]),
        ("prefetch", np.int32(1), [4, 4, 2]),
        ("seed", np.int64(3), [4, 4, 2]),
        ("epoch", np.int16(2), [4, 4, 2]),
        ("max_tokens", np.int64(64), None),
    ],
)
def test_every_integer_option_takes_anything_with_index(option, value, expected):
    table = pa.table({"x": np.arange(10.0), "t": [[1, 2]] * 10})
    extra = {"sequences": {"t": "pad"}}
    batch_size = value if option == "batch_size" else 4
    options = {} if option == "batch_size" else {option: value}
    loader = ad.batches(table, batch_size, shuffle=option == "seed", **options, **extra)
    sizes = [int(batch["x"].shape[0]) for batch in loader]
    assert sum(sizes) == 10
    if expected is not None:
        assert sizes == expected


def test_a_bool_or_a_float_is_not_an_integer():
    table = pa.table({"x": np.arange(4.0)})
    for option in ("batch_size", "seed", "epoch", "prefetch"):
        with pytest.raises(TypeError, match=rf"^{option} is bool; expected int$"):
            ad.batches(table, **{option: True})
        with pytest.raises(TypeError, match=rf"^{option} is numpy.float64; expected int$"):
            ad.batches(table, **{option: np.float64(2)})
    with pytest.raises(TypeError, match=r"^rank is bool; expected int$"):
        ad.batches(table, rank=True, world_size=2)
    two = pa.Table.from_batches([pa.record_batch({"x": [0.0, 1.0]}), pa.record_batch({"x": [2.0]})])
    loader = ad.batches(two, 2, rank=np.int64(1), world_size=np.int64(2))
    assert [np.from_dlpack(batch["x"]).tolist() for batch in loader] == [[2.0]]


def test_python_options_are_checked_in_one_place():
    table = pa.table({"x": np.arange(4.0)})
    with pytest.raises(TypeError, match=r"^progress is int; expected bool$"):
        ad.batches(table, progress=1)
    with pytest.raises(TypeError, match=r"^split_workers is str; expected bool$"):
        ad.batches(table, split_workers="no")
    with pytest.raises(TypeError, match=r"^storage_options is list; expected a dict"):
        ad.batches(table, storage_options=[("a", "b")])
    with pytest.raises(ValueError, match=r"rank and world_size go together"):
        ad.batches(table, rank=0)
    # BatchDataset checks the same, when it is made.
    with pytest.raises(TypeError, match=r"^split_workers is str; expected bool$"):
        ad.BatchDataset(table, split_workers="no")


@pytest.mark.parametrize(
    "dtype", ["float32", np.float32, np.dtype("float32"), torch.float32],
    ids=["name", "numpy type", "numpy dtype", "torch dtype"],
)
def test_a_group_given_a_dtype_converts_its_columns_to_it(dtype):
    # float32 features beside an int64 count promote to float64; a float32 model asks float32.
    table = pa.table({"f": np.arange(6, dtype=np.float32) + 0.5, "n": np.arange(6)})
    plain = ad.batches(table, 3, columns=[], groups={"x": ["f", "n"]})
    assert [torch.from_dlpack(b["x"]).dtype for b in plain] == [torch.float64] * 2
    chosen = ad.batches(table, 3, columns=[], groups={"x": {"columns": ["f", "n"], "dtype": dtype}})
    x = torch.cat([torch.from_dlpack(b["x"]) for b in chosen])
    assert x.dtype == torch.float32
    assert x.tolist() == [[i + 0.5, float(i)] for i in range(6)]
    # The same through BatchDataset, which takes the same option.
    dataset = ad.BatchDataset(table, 6, columns=[], groups={"x": {"columns": ["n"], "dtype": "int8"}})
    assert next(iter(dataset))["x"].dtype == torch.int8
    # With null_to_nan only a float dtype holds the NaN: an int one is refused naming the group.
    nulls = pa.table({"f": pa.array([1.0, None], pa.float32()), "n": [1, 2]})
    spec = {"columns": ["f", "n"], "dtype": "int32"}
    with pytest.raises(ValueError, match=r'cannot load "x": .*null_to_nan writes nulls as NaN'):
        ad.batches(nulls, 2, columns=[], groups={"x": spec}, null_to_nan=True)



@pytest.mark.parametrize("shuffle", [False, True], ids=["in order", "shuffled"])
@pytest.mark.parametrize("row_major", [True, False], ids=["row-major", "column-major"])
def test_a_group_with_boolean_columns_holds_zero_and_one_as_numpy_stacks_them(shuffle, row_major):
    # Record batches of 7 rows, so that batches of 5 span two of them, and bits start inside a
    # byte; shuffled batches copy row by row, ordered ones run by run.
    rng = np.random.default_rng(0)
    flags = rng.random(40) < 0.5
    f = np.arange(40, dtype=np.float32) / 4
    n = np.arange(40, dtype=np.int8)
    table = pa.Table.from_batches(
        pa.table({"flag": flags, "f": f, "n": n, "other": ~flags}).to_batches(max_chunksize=7)
    )
    spec = dict(columns=["n"], row_major=row_major, shuffle=shuffle, seed=3)
    groups = {"x": ["flag", "f"], "y": ["n", "flag"], "both": ["flag", "other"]}
    seen = {"x": [], "y": [], "both": [], "n": []}
    for batch in ad.batches(table, 5, groups=groups, **spec):
        for name in seen:
            seen[name].append(torch.from_dlpack(batch[name]))
    got = {name: torch.cat(tensors) for name, tensors in seen.items()}
    order = got["n"].numpy().astype(np.int64)  # the rows in the order the batches hold them
    assert sorted(order.tolist()) == list(range(40))
    assert got["x"].dtype == torch.float32
    assert np.array_equal(got["x"].numpy(), np.stack([flags, f], axis=1)[order])
    assert got["y"].dtype == torch.int8
    assert np.array_equal(got["y"].numpy(), np.stack([n, flags], axis=1)[order])
    assert got["both"].dtype == torch.bool
    assert np.array_equal(got["both"].numpy(), np.stack([flags, ~flags], axis=1)[order])


@pytest.mark.parametrize("shuffle", [False, True], ids=["in order", "shuffled"])
@pytest.mark.parametrize("other", [pa.int8(), pa.bool_()], ids=["int8", "bool"])
def test_a_null_in_an_integer_or_boolean_group_is_the_documented_error(shuffle, other):
    # Shuffled rows are copied one at a time; the rows without the null went into an integer
    # destination, and the copy asserted that no null could reach one (a panic, not the error).
    table = pa.table({"g": pa.array([1, None, 3, 4], other) if other == pa.int8()
                      else pa.array([True, None, False, True]), "n": pa.array([1, 2, 3, 4], pa.int8())})
    with pytest.raises(ValueError, match=r'found 1 nulls in column "g"'):
        list(ad.batches(table, 4, columns=[], groups={"x": ["g", "n"]}, shuffle=shuffle, seed=0))


def test_boolean_columns_with_nulls_become_float32_where_null_to_nan_applies():
    table = pa.table({"a": pa.array([True, None, False]), "b": [True, False, True], "id": [0, 1, 2]})
    with pytest.raises(ValueError, match=r'null_to_nan=\["a"\]'):
        list(ad.batches(table, 3, columns=["a", "id"]))
    for null_to_nan in (True, ["a"]):
        [batch] = ad.batches(table, 3, columns=["a", "b", "id"], null_to_nan=null_to_nan)
        a = np.from_dlpack(batch["a"])
        assert a.dtype == np.float32 and np.array_equal(a, [1.0, np.nan, 0.0], equal_nan=True)
        # A boolean column without nulls (or not named) keeps its dtype.
        assert np.from_dlpack(batch["b"]).dtype == np.bool_
    # A group of booleans may name its dtype, bool, as numpy and torch spell it.
    for dtype in ("bool", np.bool_, torch.bool):
        spec = {"columns": ["b", "b"], "dtype": dtype}
        [batch] = ad.batches(table, 3, columns=[], groups={"x": spec})
        assert torch.from_dlpack(batch["x"]).dtype == torch.bool
    with pytest.raises(ValueError, match=r"only boolean columns may have it"):
        list(ad.batches(table, 3, columns=[], groups={"x": {"columns": ["b", "id"], "dtype": "bool"}}))


def test_boolean_nulls_in_a_group_are_refused_or_nan_and_tables_convert_booleans_too():
    table = pa.table({"flag": pa.array([True, None, False]), "f": pa.array([1.0, 2.0, 3.0], pa.float32())})
    with pytest.raises(ValueError, match=r'"flag"'):
        list(ad.batches(table, 3, columns=[], groups={"x": ["flag", "f"]}))
    [batch] = ad.batches(table, 3, columns=[], groups={"x": ["flag", "f"]}, null_to_nan=True)
    x = np.from_dlpack(batch["x"])
    assert x.dtype == np.float32
    assert np.array_equal(x, [[1.0, 1.0], [np.nan, 2.0], [0.0, 3.0]], equal_nan=True)
    # Tensor.from_arrow, where PyArrow's to_tensor refuses booleans, converts them as numpy does.
    plain = pa.table({"flag": [True, False], "n": pa.array([5, 6], pa.int16())})
    tensor = np.from_dlpack(ad.Tensor.from_arrow(plain))
    assert tensor.dtype == np.int16 and tensor.tolist() == [[1, 5], [0, 6]]
    with pytest.raises(pa.ArrowTypeError):
        plain.to_tensor()
    flags_only = np.from_dlpack(ad.Tensor.from_arrow(plain.select(["flag"])))
    assert flags_only.dtype == np.bool_ and flags_only.tolist() == [[True], [False]]
