"""Messages in Python's words: every refusal that reaches Python names types as PyArrow prints
them (`list<item: int32>`, an extension type's own name), the user's columns, and the Python
argument that fixes it; never a Rust item (`ListToRaggedOptions`, `Source::...`,
`table_to_tensors`) or arrow-rs's `Debug` names (`List(Int32)`, `Struct("data": ...)`)."""

import re

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import torch

import arrow_dlpack as ad

# arrow-rs's names of types, Rust paths and the Rust API's option structs.
RUST_WORDS = re.compile(
    r"\b(List|LargeList|Struct|FixedSizeList|Utf8|LargeUtf8|Int(8|16|32|64)|UInt(8|16|32|64)|"
    r"Float(16|32|64)|Boolean|Timestamp)\(|\bUtf8\b|\bBoolean\b|::|[A-Z][a-z]+Options\b|"
    r"table_to_tensors|allow_copy`|`allow_nulls`"
)


def message(call):
    """The message of the exception `call` raises (any exception of this package)."""
    with pytest.raises(ad.ArrowDLPackError) as raised:
        call()
    text = str(raised.value)
    assert not RUST_WORDS.search(text), text
    return text


def variable_shape_column():
    rows = [np.zeros((2, 3), np.uint8), np.zeros((1, 2), np.uint8)]
    return pa.table({"image": pa.chunked_array(ad.VariableShapeTensorArray.from_numpy_ndarray(rows))})


def test_a_list_column_outside_sequences_names_its_type_and_its_own_sequences_entry():
    table = pa.table({"tokens": pa.array([[1, 2], [3]], pa.list_(pa.int32()))})
    text = message(lambda: ad.batches(table, 2))
    assert 'cannot load column "tokens" of type list<item: int32>' in text
    # The user's column, not a fixed example.
    assert 'pass sequences={"tokens": "pad"} (or "pack", "jagged")' in text
    assert "input_ids" not in text


def test_a_variable_shape_tensor_column_is_named_by_its_extension_type():
    text = message(lambda: ad.batches(variable_shape_column(), 2))
    assert "of type extension<arrow.variable_shape_tensor[value_type=uint8, ndim=2]>" in text
    assert "ad.array(column), a VariableShapeTensorArray" in text
    text = message(lambda: ad.batches(variable_shape_column(), 2, sequences={"image": "pad"}))
    assert "extension<arrow.variable_shape_tensor" in text
    assert "expected a list, large_list, list_view or large_list_view" in text


def test_other_loader_refusals_name_pyarrow_types():
    text = message(lambda: ad.batches(pa.table({"s": pa.array([{"a": 1}])}), 1))
    assert 'column "s" of type struct<a: int64>' in text
    text = message(lambda: ad.batches(pa.table({"x": [1.0]}), 1, sequences={"x": "pad"}))
    assert 'column "x" of type double' in text


def test_files_whose_columns_differ_are_named_with_pyarrow_types(tmp_path):
    pq.write_table(pa.table({"x": pa.array([1], pa.int32())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": pa.array([1.5], pa.float32())}), tmp_path / "b.parquet")
    paths = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]
    text = message(lambda: ad.batches(paths, 1))
    assert "has columns [x: float]; expected [x: int32], those of what was read before it" in text


def test_an_ipc_stream_named_as_a_file_is_read_as_a_stream(tmp_path):
    # It was refused, recommending `Source::ipc_streams`, a Rust function that does not even
    # exist; the first bytes now tell a stream from a file, whatever the extension.
    table = pa.table({"x": [1, 2]})
    path = tmp_path / "data.arrow"
    with ipc.new_stream(path, table.schema) as writer:
        writer.write_table(table)
    assert [np.from_dlpack(b["x"]).tolist() for b in ad.batches(str(path), 2)] == [[1, 2]]


def _schema_and_batches(table):
    return table.schema, table.to_batches()


def test_a_null_sequence_row_is_placed_in_its_file_and_allow_nulls_is_the_remedy(tmp_path):
    # It was "row 2 of the list array" (a row in the kernel's run) and recommended the Rust
    # kernel's ListToRaggedOptions.
    rows = [[i] for i in range(60)]
    rows[50] = None
    path = tmp_path / "tokens.parquet"
    pq.write_table(pa.table({"tokens": pa.array(rows, pa.list_(pa.int32()))}), path)
    text = message(lambda: list(ad.batches(str(path), 8, sequences={"tokens": "pad"})))
    assert f'cannot load "tokens": row 50 of {path} is null' in text
    # A stream has no file: the row is placed in its record batch, counted as the shard reads.
    reader = pa.RecordBatchReader.from_batches(*_schema_and_batches(pq.read_table(path)))
    text = message(lambda: list(ad.batches(reader, 8, sequences={"tokens": "pad"})))
    assert 'cannot load "tokens": row 50 of record batch 0 of the stream' in text
    assert "pass allow_nulls=True to read null rows as empty rows" in text
    padded = [b["tokens_lengths"] for b in ad.batches(str(path), 8, sequences={"tokens": "pad"}, allow_nulls=True)]
    assert np.concatenate([np.from_dlpack(lengths) for lengths in padded])[50] == 0
    text = message(lambda: ad.ray.collate_fn(sequences={"tokens": "pad"})(pq.read_table(path)))
    assert "row 50 of the record batch is null" in text


def test_exports_and_conversions_name_pyarrow_types():
    text = message(lambda: ad.array(pa.array(["a"])).__dlpack__())
    assert text.startswith("cannot export string: variable-length values")
    assert "halffloat, float or double" in text
    text = message(lambda: ad.array(pa.array([1], pa.timestamp("s"))).__dlpack__())
    assert text.startswith("cannot export timestamp[s]")
    text = message(lambda: ad.array(pa.array([[1]], pa.large_list(pa.int16()))).to_tensor())
    assert text.startswith("cannot export large_list<item: int16>")
    assert "arrow_dlpack.ListArray" in text and "to_padded()" in text
    text = message(lambda: ad.Array.from_dlpack(torch.zeros(2, dtype=torch.bfloat16)))
    assert text.startswith("tensor type bfloat16 has no Arrow equivalent: Arrow has no bfloat16 type")


def test_tables_name_pyarrow_types_and_the_python_remedy():
    table = pa.table({"e": pa.array([[1, 2]], pa.list_(pa.int32(), 2)), "x": [1]})
    text = message(lambda: ad.Tensor.from_arrow(table))
    # It said "(see table_to_tensors)", a Rust function.
    assert 'column "e" of type fixed_size_list<item: int32>[2]' in text
    assert "ad.column_tensors gives one tensor per column" in text
    text = message(lambda: ad.Tensor.from_arrow(pa.table({"s": ["a"]})))
    assert 'column "s" of type string' in text


def test_ragged_refusals_name_python_arguments_and_types():
    column = ad.array(pa.array([[1], None], pa.list_(pa.int8())))
    text = message(lambda: column.to_padded())
    assert "row 1 of the list array is null" in text and "allow_nulls=True" in text
    text = message(lambda: column.to_padded(-1000, allow_nulls=True))
    assert "pad value -1000 does not fit type int8" in text
    text = message(lambda: ad.ListArray.from_offsets(np.arange(3.0), np.array([0, 3], np.float32)))
    assert "offsets" in text
