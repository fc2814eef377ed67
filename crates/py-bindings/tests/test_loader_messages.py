"""What the loader says to a user who asks for what it cannot give: each refusal names the
keyword that gives it (``masks``/``null_to_nan``/``allow_nulls`` for nulls, ``images=`` for
encoded bytes, a tokenizer in ``sequences=`` for text), in the package's exception classes."""

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrow_dlpack as ad


@pytest.fixture
def table():
    return pa.table(
        {
            "label": pa.array([1, None, 3], pa.int64()),
            "text": ["a", "b", "c"],
            "jpeg": pa.array([b"\xff\xd8", b"\xff\xd8", b"\xff\xd8"]),
            "image": pa.array(
                [{"bytes": b"\x89PNG", "path": None}] * 3,
                pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
            ),
            "x": pa.array([1.0, 2.0, 3.0]),
        }
    )


def test_nulls_in_a_column_name_the_three_keywords_that_take_them(table):
    with pytest.raises(ad.ArrowDLPackValueError) as caught:
        next(iter(ad.batches(table, 2, columns=["label"])))
    message = str(caught.value)
    assert message.startswith('cannot load "label": found 1 nulls in the column')
    for keyword in ('masks=["label"]', '"label_mask"', 'null_to_nan=["label"]', "allow_nulls=True"):
        assert keyword in message
    # Each keyword it names works.
    (batch,) = ad.batches(table, 3, columns=["label"], allow_nulls=True, masks=["label"])
    assert np.from_dlpack(batch["label_mask"]).tolist() == [True, False, True]
    assert np.from_dlpack(batch["label"])[[0, 2]].tolist() == [1, 3]
    (batch,) = ad.batches(table, 3, columns=["label"], null_to_nan=["label"])
    assert np.isnan(np.from_dlpack(batch["label"])[1])


def test_nulls_inside_elements_name_only_allow_nulls_and_a_mask_of_them_is_refused():
    """A null value inside a fixed-size list's or a sequence's element: null_to_nan and masks are
    about rows, so the message names allow_nulls alone, and a mask (which would call the row
    valid) is refused rather than handed out."""
    fsl = pa.table({"e": pa.array([[1.0, None], [2.0, 3.0]], pa.list_(pa.float32(), 2)), "y": [0, 1]})
    seq = pa.table({"s": pa.array([[1.0, None], [2.0]]), "y": [0, 1]})
    for source, options in ((fsl, dict(columns=["e"])), (seq, dict(columns=[], sequences={"s": "pad"}))):
        name = "e" if source is fsl else "s"
        with pytest.raises(ad.ArrowDLPackValueError) as caught:
            list(ad.batches(source, 2, **options))
        message = str(caught.value)
        assert message.startswith(f'cannot load "{name}": found 1 nulls inside its elements')
        assert "allow_nulls=True" in message and "null_to_nan=[" not in message
        with pytest.raises(ad.ArrowDLPackValueError, match=f'masks names "{name}", whose rows hold 1 null values'):
            list(ad.batches(source, 2, allow_nulls=True, masks=[name], **options))
    # A null row of a fixed-size list (with null values under it) is the row's, which a mask shows.
    rows = pa.table({"e": pa.array([[1.0, 2.0], None], pa.list_(pa.float32(), 2))})
    (batch,) = ad.batches(rows, 2, allow_nulls=True, masks=["e"])
    assert np.from_dlpack(batch["e_mask"]).tolist() == [True, False]


@pytest.mark.parametrize("column", ["jpeg", "image"])
def test_a_column_of_encoded_bytes_points_to_images(table, column):
    with pytest.raises(ad.ArrowDLPackTypeError) as caught:
        ad.batches(table, 2, columns=[column])
    assert f'images={{"{column}": {{"size": 224}}}}' in str(caught.value)


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.string_view()])
def test_a_column_of_text_points_to_a_tokenizer(table, kind):
    table = table.set_column(1, "text", table.column("text").cast(kind))
    with pytest.raises(ad.ArrowDLPackTypeError) as caught:
        ad.batches(table, 2, columns=["text"])
    assert 'sequences={"text": {"mode": "pad", "tokenizer": "tokenizer.json"}}' in str(caught.value)


def test_a_numeric_column_gets_no_hint(table):
    table = table.append_column("when", pa.array([1, 2, 3], pa.timestamp("s")))
    with pytest.raises(ad.ArrowDLPackTypeError) as caught:
        ad.batches(table, 2, columns=["when"])
    assert "images=" not in str(caught.value) and "tokenizer" not in str(caught.value)


def test_columns_empty_names_the_selection_not_the_file(table, tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    for source in (table, str(path)):
        with pytest.raises(ad.ArrowDLPackValueError) as caught:
            ad.batches(source, 2, columns=[])
        message = str(caught.value)
        assert "columns is empty and no group, mask, sequence or image column names a column" in message
        assert str(path) not in message
    # A mask alone is something to load.
    (batch,) = ad.batches(table, 3, columns=[], masks=["label"])
    assert list(batch) == ["label_mask"]
    assert np.from_dlpack(batch["label_mask"]).tolist() == [True, False, True]


@pytest.mark.parametrize("option", ["batch_size", "prefetch", "buffer_size"])
@pytest.mark.parametrize("value", [0, -1])
def test_counts_say_at_least_one_for_zero_and_negative_values_alike(table, option, value):
    with pytest.raises(ad.ArrowDLPackValueError, match=rf"^{option} is {value}; expected at least 1$"):
        ad.batches(table, **{"batch_size": 2, option: value})


def test_unknown_keys_of_sequences_and_images_are_type_errors_as_unknown_keywords(table):
    with pytest.raises(ad.ArrowDLPackTypeError, match='unknown sequence key "lenght"'):
        ad.batches(table, 2, sequences={"x": {"mode": "pad", "lenght": 3}})
    with pytest.raises(ad.ArrowDLPackTypeError, match='unknown image spec key "sise"'):
        ad.batches(table, 2, images={"jpeg": {"size": 4, "sise": 3}})


def test_a_column_named_in_images_that_holds_no_images_says_what_images_are(table):
    with pytest.raises(ad.ArrowDLPackTypeError) as caught:
        ad.batches(table, 2, columns=[], images={"x": {"size": 4}})
    message = str(caught.value)
    assert message.startswith('cannot decode column "x" of type double as images (it is named in images=)')
    assert "Hugging Face's Image" in message


@pytest.mark.parametrize("key", ["bos_token_id", "eos_token_id"])
def test_a_negative_token_id_for_the_concat_packing_is_refused(key):
    table = pa.table({"ids": pa.array([[1, 2], [3]], pa.list_(pa.int64()))})
    spec = {"mode": "concat", "max_length": 4, key: -1}
    with pytest.raises(ad.ArrowDLPackValueError, match=rf'{key} of sequence "ids" is -1; expected a token id, at least 0'):
        ad.batches(table, 2, sequences={"ids": spec})


def test_a_text_sequence_without_a_tokenizer_points_to_one(table):
    with pytest.raises(ad.ArrowDLPackTypeError) as caught:
        ad.batches(table, 2, columns=[], sequences={"text": "pad"})
    assert '"tokenizer": "tokenizer.json"' in str(caught.value)


def test_a_misspelt_image_or_sequence_column_is_named_missing_before_other_columns_are_typed(table):
    # columns=None loads every other column, and "jpeg" is binary: the typo is what is reported.
    with pytest.raises(ad.ArrowDLPackValueError, match=r'column "jpg" not found; expected one of \["label", "text", "jpeg", "image", "x"\]'):
        ad.batches(table, 2, images={"jpg": {"size": 4}})
    with pytest.raises(ad.ArrowDLPackValueError, match='column "txt" not found'):
        ad.batches(table, 2, sequences={"txt": "pad"})


def test_a_dataloaders_state_dict_given_as_a_loader_state_says_where_each_goes(table):
    with pytest.raises(ad.ArrowDLPackValueError) as caught:
        ad.batches(table, 2, columns=["x"], state={"_snapshot": {}, "_steps_since_snapshot": 0})
    message = str(caught.value)
    assert "lacks the key 'version'" in message
    assert "a StatefulDataLoader's state_dict() goes back to its own load_state_dict()" in message


def test_an_image_size_that_is_not_an_int_or_a_pair_says_both(table):
    with pytest.raises(ad.ArrowDLPackTypeError, match=r"size is str; expected an int or a \(height, width\) pair"):
        ad.batches(table, 2, columns=[], images={"jpeg": {"size": "64"}})


def test_a_list_of_tables_whose_types_differ_names_the_types():
    first = pa.table({"x": pa.array([1.0, 2.0])})
    second = pa.table({"x": pa.array([1, 2], pa.int64())})
    with pytest.raises(ValueError, match=r"source 1 of the list has columns \[x: int64\]; expected those of source 0, \[x: double\]"):
        list(ad.batches([first, second], 2))


def test_a_dataloader_over_the_batches_iterator_says_to_use_batch_dataset():
    from torch.utils.data import DataLoader

    loader = DataLoader(ad.batches(pa.table({"x": np.arange(10.0)}), 5))
    with pytest.raises(TypeError, match=r"pass ad\.BatchDataset\(source, batch_size, \.\.\.\)"):
        next(iter(loader))


def test_corrupt_files_are_named_in_one_line_without_the_libraries_variant_names(tmp_path):
    # Bit flips in a Parquet file and an LZ4 Feather file reach the parquet crate's and
    # arrow-rs's own errors (a thrift footer, a dictionary index, LZ4 blocks, a flatbuffer
    # verifier whose message carries a trace a line per level); each is a ValueError naming the
    # file, on one line, without `Parquet error:` and its kind.
    import pyarrow.feather as feather

    table = pa.table({"idx": np.arange(3000), "s": [f"v{i % 300}" for i in range(3000)]})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1000)
    feather.write_feather(table, tmp_path / "a.feather")
    names = ("Parquet error", "Parquet argument error", "Io error", "Parser error", "External")
    rng = np.random.default_rng(0)
    seen = 0
    for name in ("a.parquet", "a.feather"):
        raw = (tmp_path / name).read_bytes()
        for _ in range(8):
            flipped = bytearray(raw)
            for position in rng.integers(8, len(raw) - 8, 20):
                flipped[position] ^= 0xFF
            path = tmp_path / f"flipped-{name}"
            path.write_bytes(bytes(flipped))
            try:
                for _ in ad.batches(str(path), 100, columns=["idx"]):
                    pass
            except ValueError as error:
                message = str(error)
                seen += 1
                assert str(path) in message and "\n" not in message, message
                assert not any(f"{kind}:" in message for kind in names), message
    assert seen >= 8


def test_a_column_named_in_images_or_sequences_is_checked_before_the_other_columns():
    # With columns=None every other column is loaded too; a wrong images= or sequences= entry is
    # the error, not the other column it leaves to be loaded as a plain one.
    table = pa.table({"image": pa.array([b"x"], pa.binary()), "label": [1]})
    with pytest.raises(TypeError, match=r'column "label" of type int64 as images'):
        ad.batches(table, 1, images={"label": {"size": 8}})
    with pytest.raises(TypeError, match=r'"label"'):
        ad.batches(table, 1, sequences={"label": "pad"})


def test_nulls_the_metadata_declares_are_refused_when_the_loader_is_made(tmp_path):
    # A column whose Parquet statistics (or a table's record batches) say it holds a null that
    # its batches would refuse: the loader is refused when it is made, on every rank, rather
    # than at the batch of the first null, hours in, on the one rank that reads it.
    x = pa.array([float(i) if i != 700 else None for i in range(1000)], pa.float32())
    table = pa.table({"x": x, "n": pa.array(range(1000), pa.int64())})
    path = tmp_path / "nulls.parquet"
    pq.write_table(table, path, row_group_size=250)
    for source in (str(path), table):
        for rank in (0, 1):
            with pytest.raises(ValueError, match=r'"x".*found 1 nulls') as raised:
                ad.batches(source, 100, columns=["x"], rank=rank, world_size=2)
            # A file's refusal names the file whose metadata declares the nulls.
            assert isinstance(source, pa.Table) or source in str(raised.value), raised.value
        with pytest.raises(ValueError, match=r'"g".*found 1 nulls in column "x"'):
            ad.batches(source, 100, columns=[], groups={"g": ["x", "n"]})
        # When the dataset is made, not in a DataLoader worker: a file's footers are read, a
        # table's record batches (not their values) are looked at; with rank 0 of 2 too.
        for ranks in ({}, {"rank": 0, "world_size": 2}):
            with pytest.raises(ValueError, match=r'"x".*found 1 nulls'):
                ad.BatchDataset(source, 100, columns=["x"], **ranks)
        # Where the nulls are taken, the loader is made and reads every row.
        for options in ({"allow_nulls": True}, {"null_to_nan": True}, {"null_to_nan": ["x"]}):
            rows = sum(len(b["x"]) for b in ad.batches(source, 100, columns=["x"], **options))
            assert rows == 1000, options
        # A column without nulls beside it loads as before.
        assert sum(len(b["n"]) for b in ad.batches(source, 100, columns=["n"])) == 1000


def test_a_null_no_metadata_declared_is_refused_at_its_batch_naming_its_file_and_row(tmp_path):
    # Without statistics the loader cannot know of the null before its batch; the batch's
    # refusal then says where the first null is, in the file, whatever the batch's order.
    x = pa.array([float(i) if i != 700 else None for i in range(1000)], pa.float32())
    table = pa.table({"x": x, "n": pa.array(range(1000), pa.int64())})
    path = tmp_path / "quiet.parquet"
    pq.write_table(table, path, row_group_size=250, write_statistics=False)
    ipc = tmp_path / "quiet.arrow"
    with pa.ipc.new_file(ipc, table.schema) as writer:
        writer.write_table(table, max_chunksize=250)
    cases = [
        (str(path), {}),
        (str(path), {"shuffle": True, "seed": 1}),
        (str(path), {"columns": [], "groups": {"g": ["x", "n"]}}),
        (str(path), {"rank": 0, "world_size": 2}),
    ]
    for source, options in cases:
        options = {"columns": ["x"], **options}
        loader = ad.batches(source, 100, **options)
        with pytest.raises(ValueError, match=rf"the first at row 700 of {re.escape(source)}\)"):
            list(loader)
    # An IPC file's record batches say their nulls: refused when the loader is made, as before.
    with pytest.raises(ValueError, match="declared by the metadata"):
        ad.batches(str(ipc), 100, columns=["x"])


def test_a_pad_value_the_dtype_cannot_hold_is_refused_when_the_loader_is_made():
    table = pa.table({"t": pa.array([[1, 2], [3]], pa.list_(pa.uint8()))})
    with pytest.raises(ValueError, match=r'"t".*-100'):
        ad.batches(table, 2, sequences={"t": {"mode": "pad", "pad_value": -100}})
    # Packed and jagged sequences pad nothing: the value is not theirs to check.
    [batch] = ad.batches(table, 2, sequences={"t": {"mode": "pack"}})
    assert np.from_dlpack(batch["t"]).tolist() == [1, 2, 3]
