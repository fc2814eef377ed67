"""Whether a source's buffers lie in memory mapped without write permission.

torch ignores DLPack's read-only flag: ``torch.from_dlpack(view).sub_(1)`` writes through a
view, and where the view's memory is mapped read-only (pyarrow's ``memory_map``, through which a
Hugging Face ``Dataset`` loaded from disk reads its cache files) the write kills the process with
a segmentation fault. ``ad.batches`` asks here whether an in-memory source's buffers are so
mapped, and hands out private copies of such a source's batches (as ``writable=True``).

Linux only (the process's mappings are read from ``/proc/self/maps``, once per call); elsewhere
nothing is found, as before. Duck-typed: nothing is imported.
"""

import bisect
from typing import Any, Iterator, List, Tuple

from arrow_dlpack._sources import read_once


def _tables(source: Any) -> Iterator[Any]:
    """The pyarrow Tables and RecordBatches of ``source`` (itself, the items of a list or tuple,
    or the table behind a Hugging Face ``Dataset``'s stream)."""
    items = source if isinstance(source, (list, tuple)) else [source]
    for item in items:
        table = getattr(item, "table", None) if type(item).__name__ == "_DatasetStream" else item
        if type(table).__module__.startswith("pyarrow") and type(table).__name__ in (
            "Table",
            "RecordBatch",
        ):
            yield table


def _read_only_ranges() -> List[Tuple[int, int]]:
    """The address ranges of the process's mappings without write permission, sorted."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    ranges = []
    for line in lines:
        fields = line.split(maxsplit=2)
        if len(fields) < 2 or len(fields[1]) < 2 or fields[1][1] == "w":
            continue
        start, _, end = fields[0].partition("-")
        try:
            ranges.append((int(start, 16), int(end, 16)))
        except ValueError:
            continue
    ranges.sort()
    return ranges


def maps_read_only(source: Any) -> bool:
    """Whether a buffer of ``source`` (one per chunk of each column: a chunk's buffers come from
    one allocation or one mapping) lies in a read-only mapping."""
    tables = list(_tables(source))
    if not tables:
        return False
    ranges = _read_only_ranges()
    if not ranges:
        return False
    starts = [start for start, _ in ranges]

    def read_only(address: int) -> bool:
        index = bisect.bisect_right(starts, address) - 1
        return index >= 0 and address < ranges[index][1]

    for table in tables:
        for column in table.columns:
            for chunk in getattr(column, "chunks", [column]):
                for buffer in chunk.buffers():
                    if buffer is not None and buffer.size > 0:
                        if read_only(buffer.address):
                            return True
                        break
    return False


def reads_unseen_buffers(source: Any) -> bool:
    """Whether ``source`` (or an item of a list of sources) is a reader whose buffers cannot be
    looked at before it is read: pyarrow's ``RecordBatchReader`` (or any object with
    ``read_next_batch``), or a Hugging Face ``IterableDataset``'s stream. Their record batches
    may be views of a read-only mapping (an ``IterableDataset`` of a dataset loaded from disk
    is), so their batches are private copies."""
    items = source if isinstance(source, (list, tuple)) else [source]
    return any(read_once(item) or type(item).__name__ == "_IterableStream" for item in items)
