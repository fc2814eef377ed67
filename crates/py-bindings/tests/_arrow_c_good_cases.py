"""Valid hand-built Arrow C Data Interface data and the values pyarrow reads from it
(:data:`GOOD_ARROW_C_CASES`), which prove the hand-built producers of the hostile cases
(`_arrow_c_cases.py`) right before their spoiled versions are trusted to be wrong in one way only.

The tests are not a package, so `conftest.py` loads this module by path, after `_arrow_c_ctypes` and
`_arrow_c_case_builders`.
"""

from typing import Callable, NamedTuple

import _arrow_c_ctypes as ac
from _arrow_c_case_builders import (
    dictionary_pair,
    fixed_size_list_pair,
    list_pair,
    run_end_encoded_pair,
    struct_pair,
)


class GoodCase(NamedTuple):
    """Valid hand-built Arrow data and the values pyarrow must read from it."""

    id: str
    build: Callable[[], tuple[ac.Schema, ac.Array]]
    values: list


GOOD_ARROW_C_CASES: list[GoodCase] = [
    GoodCase(
        "int32_with_nulls_and_an_offset",
        lambda: (
            ac.Schema("i", name="x", metadata={"origin": "hand-built"}),
            ac.Array(
                4,
                [ac.validity([1, 0, 1, 1, 1]), ac.packed("i", [9, 8, 2, 3, 4])],
                offset=1,
                null_count=1,
            ),
        ),
        [None, 2, 3, 4],
    ),
    GoodCase(
        "int32_with_an_unknown_null_count",
        lambda: (
            ac.Schema("i"),
            ac.Array(3, [ac.validity([1, 0, 1]), ac.packed("i", [1, 0, 3])], null_count=-1),
        ),
        [1, None, 3],
    ),
    GoodCase(
        "empty_int32_with_null_buffers",
        lambda: (ac.Schema("i"), ac.Array(0, [None, None])),
        [],
    ),
    GoodCase(
        "float64_without_validity",
        lambda: (ac.Schema("g"), ac.Array(3, [None, ac.packed("d", [0.5, -1.0, 2.25])])),
        [0.5, -1.0, 2.25],
    ),
    GoodCase(
        "boolean",
        lambda: (
            ac.Schema("b"),
            ac.Array(
                4, [ac.validity([1, 1, 0, 1]), ac.validity([1, 0, 0, 1])], null_count=1
            ),
        ),
        [True, False, None, True],
    ),
    GoodCase(
        "utf8_with_nulls",
        lambda: (ac.Schema("u"), ac.utf8_array(["a", None, "ccc", ""])),
        ["a", None, "ccc", ""],
    ),
    GoodCase(
        "string_view_inline_and_out_of_line",
        lambda: (
            ac.Schema("vu"),
            ac.string_view_array(["short", "longer than twelve bytes", ""]),
        ),
        ["short", "longer than twelve bytes", ""],
    ),
    GoodCase(
        "struct_of_int32_and_utf8",
        lambda: struct_pair(),
        [{"a": 1, "b": "x"}, {"a": None, "b": "yy"}, {"a": 3, "b": None}],
    ),
    GoodCase("fixed_size_list_of_int32", lambda: fixed_size_list_pair(), [[1, 2], [3, 4], [5, 6]]),
    GoodCase("list_of_int64", lambda: list_pair(), [[1, 2], [3]]),
    GoodCase("run_end_encoded", lambda: run_end_encoded_pair(), [1.5, 1.5, 2.5]),
    GoodCase("dictionary_of_utf8", lambda: dictionary_pair(), ["b", "a", "b"]),
]
