"""The hostile Arrow C Data Interface case table, shared by `test_hostile_arrow_c.py` and
`test_no_panics.py` (which runs every case once more and fails on any `BaseException` that is not
an `Exception`).

- :data:`ARROW_C_CASES` (:class:`ArrowCase`): malformed schemas, arrays and streams, each with the
  exception, the field path its message must name and the release counts it must leave.

The tests are not a package, so `conftest.py` loads this module by path, after `_arrow_c_ctypes` and
`_arrow_c_case_builders` (the records and the builders of valid pairs that the cases spoil).
"""

import _arrow_c_ctypes as ac
from _arrow_c_case_builders import (
    ArrowCase,
    CHUNK,
    I64_MAX,
    NO_ARRAY,
    NO_SCHEMA,
    Releases,
    STREAM_ONLY,
    dictionary_pair,
    expect_releases,
    fixed_size_list_pair,
    i32,
    int32_pair,
    int32_schema_with,
    int32_stream,
    list_pair,
    metadata_with_lengths,
    released_garbage_array,
    released_garbage_schema,
    run_end_encoded_pair,
    struct_pair,
)

#: The struct names that messages start their field paths with.
S, A, R = "ArrowSchema", "ArrowArray", "ArrowArrayStream"

ARROW_C_CASES: list[ArrowCase] = [
    # --- ArrowSchema ----------------------------------------------------------------------------
    # A released schema is refused before anything else is read: every other pointer is garbage.
    ArrowCase(
        "schema_already_released",
        lambda: (released_garbage_schema(), i32()),
        ValueError,
        rf"{S}\.release",
        NO_SCHEMA,
    ),
    ArrowCase(
        "struct_schema_child_already_released",
        lambda: struct_pair(
            schema=dict(children=[ac.Schema("i", name="a"), released_garbage_schema()])
        ),
        ValueError,
        rf"{S}\.children\[1\]\.release",
    ),
    ArrowCase("schema_format_null", lambda: (ac.Schema(None), i32()), ValueError, rf"{S}\.format"),
    ArrowCase(
        "schema_format_not_utf8",
        lambda: (ac.Schema(b"\xff\xfe"), i32()),
        ValueError,
        rf"{S}\.format",
    ),
    ArrowCase(
        "schema_name_not_utf8",
        lambda: int32_schema_with(name=b"col\xc3\x28"),
        ValueError,
        rf"{S}\.name",
    ),
    ArrowCase(
        "struct_schema_child_name_not_utf8",
        lambda: struct_pair(schema=dict(children=[ac.Schema("i", name=b"\xff"), ac.Schema("u")])),
        ValueError,
        rf"{S}\.children\[0\]\.name",
    ),
    ArrowCase(
        "struct_schema_child_format_null",
        lambda: struct_pair(schema=dict(children=[ac.Schema("i"), ac.Schema(None)])),
        ValueError,
        rf"{S}\.children\[1\]\.format",
    ),
    ArrowCase(
        "struct_schema_n_children_negative",
        lambda: struct_pair(schema=dict(n_children=-1)),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "struct_schema_claims_a_third_child",
        lambda: struct_pair(schema=dict(n_children=3)),
        ValueError,
        rf"{S}\.children\[2\]",
    ),
    ArrowCase(
        "struct_schema_children_array_null",
        lambda: struct_pair(schema=dict(children_array=None)),
        ValueError,
        rf"{S}\.children(?!\[)",
    ),
    ArrowCase(
        "struct_schema_child_pointer_null",
        lambda: struct_pair(schema=dict(children=[ac.Schema("i"), None])),
        ValueError,
        rf"{S}\.children\[1\]",
    ),
    ArrowCase(
        "fixed_size_list_schema_without_child",
        lambda: fixed_size_list_pair(schema=dict(children=[])),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "fixed_size_list_schema_with_two_children",
        lambda: fixed_size_list_pair(schema=dict(children=[ac.Schema("i"), ac.Schema("i")])),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "fixed_size_list_schema_n_children_negative",
        lambda: fixed_size_list_pair(schema=dict(n_children=-1)),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "fixed_size_list_negative_size",
        lambda: fixed_size_list_pair(size=-1),
        ValueError,
        rf"{S}\.format",
    ),
    ArrowCase(
        "list_schema_without_child",
        lambda: list_pair(schema=dict(children=[])),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "list_schema_with_two_children",
        lambda: list_pair(schema=dict(children=[ac.Schema("l"), ac.Schema("l")])),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "run_end_encoded_schema_with_one_child",
        lambda: run_end_encoded_pair(schema=dict(children=[ac.Schema("i", flags=0)])),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "run_end_encoded_schema_with_three_children",
        lambda: run_end_encoded_pair(
            schema=dict(children=[ac.Schema("i", flags=0), ac.Schema("g"), ac.Schema("g")])
        ),
        ValueError,
        rf"{S}\.n_children",
    ),
    ArrowCase(
        "dictionary_schema_values_format_null",
        lambda: dictionary_pair(schema=dict(dictionary=ac.Schema(None))),
        ValueError,
        rf"{S}\.dictionary\.format",
    ),
    ArrowCase(
        "schema_metadata_negative_entry_count",
        lambda: int32_schema_with(metadata=metadata_with_lengths(-1)),
        ValueError,
        rf"{S}\.metadata",
    ),
    ArrowCase(
        "schema_metadata_negative_key_length",
        lambda: int32_schema_with(metadata=metadata_with_lengths(1, -5)),
        ValueError,
        rf"{S}\.metadata",
    ),
    ArrowCase(
        "schema_metadata_key_not_utf8",
        lambda: int32_schema_with(metadata=ac.encode_metadata([(b"\xff\xfe", b"v")])),
        ValueError,
        rf"{S}\.metadata",
    ),
    # Well formed, but not a type arrow-rs knows: TypeError.
    ArrowCase(
        "schema_format_unknown",
        lambda: (ac.Schema("X"), i32()),
        TypeError,
        rf"{S}\.format",
    ),
    ArrowCase(
        "schema_format_decimal_of_512_bits",
        lambda: (
            ac.Schema("d:10,2,512"),
            ac.Array(1, [None, b"\0" * 64]),
        ),
        TypeError,
        rf"{S}\.format",
    ),
    # --- ArrowArray: release, counts and pointers -----------------------------------------------
    # Handed out by get_next, a released array is the end of the stream, not an error: so this
    # case is for capsules only.
    ArrowCase(
        "array_already_released",
        lambda: (ac.Schema("i"), released_garbage_array()),
        ValueError,
        rf"{A}\.release",
        NO_ARRAY,
        transports=("array",),
    ),
    ArrowCase("int32_n_buffers_0", lambda: int32_pair(n_buffers=0), ValueError, rf"{A}\.n_buffers"),
    ArrowCase("int32_n_buffers_1", lambda: int32_pair(n_buffers=1), ValueError, rf"{A}\.n_buffers"),
    ArrowCase("int32_n_buffers_3", lambda: int32_pair(n_buffers=3), ValueError, rf"{A}\.n_buffers"),
    ArrowCase(
        "int32_n_buffers_negative",
        lambda: int32_pair(n_buffers=-2),
        ValueError,
        rf"{A}\.n_buffers",
    ),
    ArrowCase(
        "int32_buffers_array_null",
        lambda: int32_pair(buffers_array=None),
        ValueError,
        rf"{A}\.buffers(?!\[)",
    ),
    ArrowCase(
        "int32_data_buffer_null",
        lambda: int32_pair(buffers=[None, None], null_count=0),
        ValueError,
        rf"{A}\.buffers\[1\]",
    ),
    ArrowCase(
        "int32_validity_null_with_nulls",
        lambda: int32_pair(buffers=[None, ac.packed("i", [1, 0, 3])]),
        ValueError,
        rf"{A}\.buffers\[0\]",
    ),
    ArrowCase(
        "int32_n_children_negative",
        lambda: int32_pair(n_children=-1),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        "int32_with_a_child",
        lambda: int32_pair(children=[i32()]),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        "boolean_with_one_buffer",
        lambda: (ac.Schema("b"), ac.Array(3, [None])),
        ValueError,
        rf"{A}\.n_buffers",
    ),
    ArrowCase(
        "utf8_with_two_buffers",
        lambda: (ac.Schema("u"), ac.utf8_array(["a", "b", "c"], n_buffers=2)),
        ValueError,
        rf"{A}\.n_buffers",
    ),
    ArrowCase(
        "utf8_offsets_buffer_null",
        lambda: (ac.Schema("u"), ac.utf8_array(["a", "b", "c"], buffers=[None, None, b"abc"])),
        ValueError,
        rf"{A}\.buffers\[1\]",
    ),
    ArrowCase(
        "string_view_with_one_buffer",
        lambda: (ac.Schema("vu"), ac.string_view_array(["a", "b"], n_buffers=1)),
        ValueError,
        rf"{A}\.n_buffers",
    ),
    ArrowCase(
        "string_view_variadic_sizes_buffer_null",
        lambda: (
            ac.Schema("vu"),
            ac.string_view_array(
                ["short", "longer than twelve bytes"],
                buffers=ac.string_view_buffers(["short", "longer than twelve bytes"])[:-1] + [None],
            ),
        ),
        ValueError,
        rf"{A}\.buffers\[3\]",
    ),
    # --- ArrowArray: lengths, offsets and null counts ------------------------------------------
    ArrowCase("length_negative", lambda: int32_pair(length=-1), ValueError, rf"{A}\.length"),
    ArrowCase("offset_negative", lambda: int32_pair(offset=-1), ValueError, rf"{A}\.offset"),
    ArrowCase(
        "null_count_minus_2",
        lambda: int32_pair(null_count=-2),
        ValueError,
        rf"{A}\.null_count",
    ),
    ArrowCase(
        "null_count_above_length",
        lambda: int32_pair(null_count=4),
        ValueError,
        rf"{A}\.null_count",
    ),
    ArrowCase(
        "int64_length_whose_byte_size_overflows",
        lambda: (ac.Schema("l"), ac.Array(2**62, [None, ac.packed("q", [1, 2, 3])])),
        ValueError,
        rf"{A}\.length",
    ),
    ArrowCase(
        # (2^58 + 1) × 8 bytes is below isize::MAX, but (2^58 + 1) × 64 bits wraps a 64-bit count.
        "int64_length_whose_bit_size_wraps",
        lambda: (ac.Schema("l"), ac.Array(2**58 + 1, [None, ac.packed("q", [1, 2, 3])])),
        ValueError,
        rf"{A}\.length",
    ),
    ArrowCase(
        "int32_length_i64_max",
        lambda: int32_pair(length=I64_MAX, null_count=0, buffers=[None, ac.packed("i", [1])]),
        ValueError,
        rf"{A}\.length",
    ),
    ArrowCase(
        "offset_plus_length_overflows",
        lambda: int32_pair(offset=I64_MAX, null_count=0, buffers=[None, ac.packed("i", [1])]),
        ValueError,
        rf"{A}\.(offset|length)",
    ),
    # --- ArrowArray: children and dictionaries --------------------------------------------------
    ArrowCase(
        "struct_array_with_fewer_children_than_schema",
        lambda: struct_pair(array=dict(children=[i32()])),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        # The schema claims one child of the two it points to: the array's two then disagree.
        "struct_schema_claims_fewer_children_than_array",
        lambda: struct_pair(schema=dict(n_children=1)),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        "struct_array_children_array_null",
        lambda: struct_pair(array=dict(children_array=None, n_children=2)),
        ValueError,
        rf"{A}\.children(?!\[)",
    ),
    ArrowCase(
        "struct_array_child_pointer_null",
        lambda: struct_pair(array=dict(children=[i32(), None])),
        ValueError,
        rf"{A}\.children\[1\]",
    ),
    ArrowCase(
        "struct_child_shorter_than_struct",
        lambda: struct_pair(b=dict(length=2)),
        ValueError,
        rf"{A}\.children\[1\]\.length",
    ),
    ArrowCase(
        "struct_child_length_negative",
        lambda: struct_pair(b=dict(length=-1)),
        ValueError,
        rf"{A}\.children\[1\]\.length",
    ),
    ArrowCase(
        "struct_child_n_buffers_wrong",
        lambda: struct_pair(b=dict(n_buffers=2)),
        ValueError,
        rf"{A}\.children\[1\]\.n_buffers",
    ),
    ArrowCase(
        "struct_child_already_released",
        lambda: struct_pair(array=dict(children=[i32(), released_garbage_array()])),
        ValueError,
        rf"{A}\.children\[1\]\.release",
    ),
    ArrowCase(
        "fixed_size_list_child_too_short",
        lambda: fixed_size_list_pair(array=dict(children=[i32([1, 2, 3, 4, 5])])),
        ValueError,
        rf"{A}\.children\[0\]\.length",
    ),
    ArrowCase(
        "fixed_size_list_array_without_child",
        lambda: fixed_size_list_pair(array=dict(children=[])),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        "fixed_size_list_array_with_two_children",
        lambda: fixed_size_list_pair(array=dict(children=[i32(list(range(6))), i32()])),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        "list_offsets_buffer_null",
        lambda: list_pair(array=dict(buffers=[None, None])),
        ValueError,
        rf"{A}\.buffers\[1\]",
    ),
    ArrowCase(
        "run_end_encoded_array_with_one_child",
        lambda: run_end_encoded_pair(array=dict(children=[ac.Array(2, [None, ac.packed("i", [2, 3])])])),
        ValueError,
        rf"{A}\.n_children",
    ),
    ArrowCase(
        "dictionary_on_a_plain_array",
        lambda: int32_pair(dictionary=ac.utf8_array(["a"])),
        ValueError,
        rf"{A}\.dictionary",
    ),
    ArrowCase(
        "dictionary_missing_for_a_dictionary_schema",
        lambda: dictionary_pair(array=dict(dictionary=None)),
        ValueError,
        rf"{A}\.dictionary",
    ),
    ArrowCase(
        "dictionary_values_n_buffers_wrong",
        lambda: dictionary_pair(values=dict(n_buffers=2)),
        ValueError,
        rf"{A}\.dictionary\.n_buffers",
    ),
    # --- ArrowArrayStream -----------------------------------------------------------------------
    ArrowCase(
        "stream_already_released",
        lambda: int32_stream(null_release=True),
        ValueError,
        rf"{R}\.release",
        Releases(stream=0),
        STREAM_ONLY,
        expect_releases(get_schema_calls=0, get_next_calls=0),
    ),
    ArrowCase(
        "stream_get_schema_null",
        lambda: int32_stream(null_get_schema=True),
        ValueError,
        rf"{R}\.get_schema",
        transports=STREAM_ONLY,
        verify=expect_releases(get_next_calls=0),
    ),
    ArrowCase(
        "stream_get_next_null",
        lambda: int32_stream(null_get_next=True),
        ValueError,
        rf"{R}\.get_next",
        transports=STREAM_ONLY,
        verify=expect_releases(get_schema_calls=1),
    ),
    ArrowCase(
        "stream_get_schema_fails",
        lambda: int32_stream(get_schema_error=ac.EIO),
        ValueError,
        rf"{R}\.get_schema",
        transports=STREAM_ONLY,
        verify=expect_releases(get_schema_calls=1, get_next_calls=0),
    ),
    ArrowCase(
        "stream_get_next_fails_at_the_first_chunk",
        lambda: int32_stream(get_next_error=(0, ac.EIO)),
        ValueError,
        rf"{R}\.get_next",
        transports=STREAM_ONLY,
        verify=expect_releases(get_next_calls=1),
    ),
    ArrowCase(
        "stream_get_next_fails_after_two_good_chunks",
        lambda: int32_stream(get_next_error=(2, ac.EINVAL)),
        ValueError,
        rf"{R}\.get_next",
        transports=STREAM_ONLY,
        verify=expect_releases(get_next_calls=3),
    ),
    ArrowCase(
        "stream_get_next_fails_without_get_last_error",
        lambda: int32_stream(get_next_error=(1, ac.EIO), null_get_last_error=True),
        ValueError,
        rf"{R}\.get_next",
        transports=STREAM_ONLY,
    ),
    ArrowCase(
        "stream_get_next_fails_and_get_last_error_gives_null",
        lambda: int32_stream(get_next_error=(0, ac.ENOMEM), last_error=None),
        ValueError,
        rf"{R}\.get_next",
        transports=STREAM_ONLY,
    ),
    ArrowCase(
        "stream_malformed_chunk_after_two_good_chunks",
        lambda: int32_stream([lambda: i32([1]), lambda: i32([2]), lambda: i32([3], n_buffers=1)]),
        ValueError,
        rf"{CHUNK}\.n_buffers",
        transports=STREAM_ONLY,
        verify=expect_releases(get_next_calls=3),
    ),
    ArrowCase(
        "stream_chunk_with_null_data_after_a_good_chunk",
        lambda: int32_stream([lambda: i32([1]), lambda: i32([2, 3], buffers=[None, None])]),
        ValueError,
        rf"{CHUNK}\.buffers\[1\]",
        transports=STREAM_ONLY,
    ),
    ArrowCase(
        "stream_int32_schema_but_struct_shaped_chunk",
        lambda: int32_stream([lambda: i32([1]), lambda: ac.Array(1, [None], children=[i32([7])])]),
        ValueError,
        rf"{CHUNK}\.n_(buffers|children)",
        transports=STREAM_ONLY,
    ),
    ArrowCase(
        "stream_struct_schema_but_int32_chunk",
        lambda: ac.Stream(
            lambda: ac.Schema("+s", children=[ac.Schema("i", name="a")]), [lambda: i32([1, 2])]
        ),
        ValueError,
        rf"{CHUNK}\.n_(buffers|children)",
        transports=STREAM_ONLY,
    ),
    ArrowCase(
        "stream_utf8_schema_but_int32_chunk",
        lambda: ac.Stream(lambda: ac.Schema("u"), [lambda: i32([1, 2])]),
        ValueError,
        rf"{CHUNK}\.n_buffers",
        transports=STREAM_ONLY,
    ),
    ArrowCase(
        "stream_chunk_with_a_dictionary_the_schema_lacks",
        lambda: int32_stream([lambda: i32([1], dictionary=ac.utf8_array(["a"]))]),
        ValueError,
        rf"{CHUNK}\.dictionary",
        transports=STREAM_ONLY,
    ),
]

assert len({case.id for case in ARROW_C_CASES}) == len(ARROW_C_CASES), "duplicate case ids"
