"""The loader under an address-space limit: a Parquet row group that decodes to more memory than
the process may have is a ``MemoryError`` when its batch is read, never an abort.

The parquet crate's allocations cannot fail: they abort the process. A row group of highly
compressed zeros (a few kilobytes on disk, hundreds of megabytes decoded) is honest data that
only the memory bounds, so the loader reserves (and frees) a large batch's decoded size before
it decodes it.
"""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CHILD = """
import resource, sys
import arrow_dlpack as ad

def virtual_memory():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024

limit = virtual_memory() + 256 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    rows = sum(len(batch["a"]) for batch in ad.batches(sys.argv[1], 1000, decode_threads=1))
    print("rows", rows)
except MemoryError as error:
    print("MemoryError", error)
"""


def test_a_row_group_that_decodes_past_the_memory_limit_is_a_memory_error_not_an_abort(tmp_path):
    rows, width = 50_000, 1_000  # 400 MB of int64 zeros and their levels, 40 KB on disk
    column = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(rows * width, np.int64)), width)
    path = tmp_path / "zeros.parquet"
    pq.write_table(
        pa.table({"a": column}),
        path,
        row_group_size=rows,
        compression="zstd",
        use_dictionary=False,
        write_statistics=False,
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("MemoryError"), done.stdout
    assert "cannot allocate" in done.stdout or "bytes" in done.stdout, done.stdout
