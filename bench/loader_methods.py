"""The loader's workload and the methods that the loader benchmark times: the in-memory floor, the
anchors (pyarrow by hand, pyarrow -> numpy, polars, duckdb, Ray Data, Hugging Face datasets) and
ours, each a callable that makes one pass over the workload and returns the rows it saw."""

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import torch

import arrow_dlpack as ad

FEATURES = [f"f{i}" for i in range(16)]
CHUNK = 131_072  # rows per IPC record batch and per Parquet row group
BATCH_SIZES = (1024, 8192)
ROW_BYTES = 16 * 4 + 8 + 8 * 4  # the bytes of one row of the three tensors

Triple = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


# --- the workload ---------------------------------------------------------------------------


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(13)
    columns = {name: pa.array(rng.standard_normal(rows, dtype=np.float32)) for name in FEATURES}
    columns["label"] = pa.array(rng.integers(0, 10, rows, dtype=np.int64))
    values = rng.standard_normal(rows * 8, dtype=np.float32)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(values), 8)
    columns["embedding"] = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), [8]), storage
    )
    return pa.table(columns)


@dataclass
class Workload:
    rows: int
    ipc: Path
    parquet: Path
    slow_rows: int
    slow_parquet: Path
    table: pa.Table


def write_workload(directory: Path, rows: int, slow_rows: int) -> Workload:
    table = make_table(rows)
    ipc_path = directory / "workload.arrow"
    with pa.OSFile(str(ipc_path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=CHUNK):
            writer.write_batch(batch)
    parquet_path = directory / "workload.parquet"
    pq.write_table(table, parquet_path, row_group_size=CHUNK, compression="snappy")
    slow_rows = min(slow_rows, rows)
    slow_path = directory / "workload-small.parquet"
    pq.write_table(table.slice(0, slow_rows), slow_path, row_group_size=CHUNK, compression="snappy")
    return Workload(rows, ipc_path, parquet_path, slow_rows, slow_path, table)


# --- the methods: each returns a callable that makes one pass and returns the rows seen -----


def rebatch(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Record batches of exactly ``size`` rows (the last shorter), cut with ``slice`` and joined
    with ``pa.concat_batches`` where a batch spans record batches: what one writes by hand."""
    pending: List[pa.RecordBatch] = []
    have = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            take = min(size - have, batch.num_rows - offset)
            pending.append(batch.slice(offset, take))
            have += take
            offset += take
            if have == size:
                yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
                pending, have = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def embedding_storage(array: pa.Array) -> pa.Array:
    return array.storage if isinstance(array, pa.ExtensionArray) else array


def by_hand(batch: pa.RecordBatch) -> Triple:
    """PyArrow by hand: ``to_tensor`` of the features' record batch, DLPack for the rest."""
    features = torch.from_dlpack(batch.select(FEATURES).to_tensor())
    label = torch.from_dlpack(batch.column("label"))
    embedding = torch.from_dlpack(embedding_storage(batch.column("embedding")).flatten()).view(-1, 8)
    return features, label, embedding


def log(line: str) -> None:
    """A line of a bench script's progress, on stderr (stdout may carry the section)."""
    print(line, file=sys.stderr, flush=True)


def emit(section: str, output: Optional[Path]) -> None:
    """Writes a bench script's section to `output`, its folder made if missing, or prints it."""
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(section)
        log(f"==> wrote {output}")
    else:
        print(section)


def count(triples: Iterator[Triple]) -> int:
    rows = 0
    for features, label, embedding in triples:
        rows += features.shape[0]
    return rows


def floor_pass(work: Workload, size: int) -> Callable[[], int]:
    features = np.ascontiguousarray(
        np.stack([work.table.column(name).to_numpy() for name in FEATURES], axis=1)
    )
    label = work.table.column("label").to_numpy()
    embedding = np.asarray(
        embedding_storage(work.table.column("embedding").combine_chunks()).flatten()
    ).reshape(-1, 8)

    def run() -> int:
        return count(
            (
                torch.from_numpy(features[start : start + size]),
                torch.from_numpy(label[start : start + size]),
                torch.from_numpy(embedding[start : start + size]),
            )
            for start in range(0, work.rows, size)
        )

    return run


def ipc_batches(path: Path) -> Iterator[pa.RecordBatch]:
    with pa.memory_map(str(path)) as source:
        reader = ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def pyarrow_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(by_hand(batch) for batch in rebatch(ipc_batches(work.ipc), size))


def to_numpy_triple(batch: pa.RecordBatch) -> Triple:
    features = np.stack([batch.column(name).to_numpy() for name in FEATURES], axis=1)
    label = batch.column("label").to_numpy()
    embedding = np.asarray(embedding_storage(batch.column("embedding")).flatten()).reshape(-1, 8)
    return torch.from_numpy(features), torch.from_numpy(label), torch.from_numpy(embedding)


def numpy_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(to_numpy_triple(batch) for batch in rebatch(ipc_batches(work.ipc), size))


def pyarrow_parquet_pass(work: Workload, size: int) -> Callable[[], int]:
    def run() -> int:
        reader = pq.ParquetFile(work.parquet)
        return count(by_hand(batch) for batch in rebatch(reader.iter_batches(batch_size=size), size))

    return run


def polars_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    import polars as pl

    def triples() -> Iterator[Triple]:
        frame = pl.read_ipc(work.ipc)  # polars 2 maps an uncompressed local file itself
        for start in range(0, frame.height, size):
            part = frame.slice(start, size)
            yield (
                part.select(FEATURES).to_torch(),
                part.get_column("label").to_torch(),
                part.get_column("embedding").to_torch(),
            )

    return lambda: count(triples())


def duckdb_pass(work: Workload, size: int) -> Callable[[], int]:
    import duckdb

    def run() -> int:
        connection = duckdb.connect()
        relation = connection.sql(f"select * from '{work.parquet}'")
        # duckdb 2 renamed fetch_record_batch(rows) to to_arrow_reader(rows).
        fetch = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
        reader = fetch(size)
        rows = count(by_hand(batch) for batch in rebatch(iter(reader), size))
        connection.close()
        return rows

    return run


def ray_pass(work: Workload, size: int) -> Callable[[], int]:
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=os.cpu_count() or 2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            object_store_memory=1 << 30,
        )
    ray.data.DataContext.get_current().enable_progress_bars = False
    def triples() -> Iterator[Triple]:
        dataset = ray.data.read_parquet(str(work.slow_parquet))
        for batch in dataset.iter_torch_batches(batch_size=size):
            features = torch.stack([batch[name] for name in FEATURES], dim=1)
            yield features, batch["label"], batch["embedding"].reshape(-1, 8)

    return lambda: count(triples())


def hf_pass(work: Workload, size: int) -> Callable[[], int]:
    import datasets

    datasets.disable_progress_bars()
    # datasets refuses arrow.fixed_shape_tensor ("does not have a datasets dtype equivalent"):
    # the other columns only.
    table = pq.read_table(work.slow_parquet, columns=FEATURES + ["label"])
    dataset = datasets.Dataset(datasets.table.InMemoryTable(table)).with_format("torch")

    def triples() -> Iterator[Tuple[torch.Tensor, torch.Tensor, None]]:
        for batch in dataset.iter(batch_size=size):
            yield torch.stack([batch[name] for name in FEATURES], dim=1), batch["label"], None

    return lambda: count(triples())  # type: ignore[arg-type]


def ours_triple(batch: Dict[str, ad.Tensor]) -> Triple:
    return (
        torch.from_dlpack(batch["features"]),
        torch.from_dlpack(batch["label"]),
        torch.from_dlpack(batch["embedding"]),
    )


def ours(path: Path, size: int, **options: object) -> Iterator[Dict[str, ad.Tensor]]:
    return iter(
        ad.batches(
            str(path), size, groups={"features": FEATURES}, columns=["label", "embedding"], **options
        )
    )


def ours_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(ours_triple(batch) for batch in ours(work.ipc, size))


def ours_ipc_column_major_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(ours_triple(batch) for batch in ours(work.ipc, size, row_major=False))


def ours_parquet_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(ours_triple(batch) for batch in ours(work.parquet, size))


def ours_ipc_no_torch_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: sum(1 for _ in ours(work.ipc, size)) * size


def ours_parquet_no_torch_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: sum(1 for _ in ours(work.parquet, size)) * size


@dataclass
class Method:
    key: str
    label: str
    make: Callable[[Workload, int], Callable[[], int]]
    format: str  # "memory", "ipc" or "parquet": which pyarrow-by-hand row it is compared with
    slow: bool = False  # runs on work.slow_rows and is scaled
    note: str = ""
    detail: bool = False  # a "where the time goes" row, not a method of the main table


METHODS: List[Method] = [
    Method("floor", "numpy views of data already in memory (the floor)", floor_pass, "memory"),
    Method(
        "pyarrow-ipc",
        "pyarrow by hand, memory-mapped IPC (`to_tensor` plus `from_dlpack`)",
        pyarrow_ipc_pass,
        "ipc",
    ),
    Method("numpy-ipc", "pyarrow → numpy → torch, IPC", numpy_ipc_pass, "ipc"),
    Method("polars-ipc", "polars, IPC (`read_ipc`, sliced, `to_torch`)", polars_ipc_pass, "ipc"),
    Method("ours-ipc", "**ours**, `ad.batches` over the IPC file", ours_ipc_pass, "ipc"),
    Method(
        "ours-ipc-column-major",
        "**ours**, `ad.batches(..., row_major=False)` over the IPC file (features a strided view "
        "of the map)",
        ours_ipc_column_major_pass,
        "ipc",
    ),
    Method(
        "pyarrow-parquet",
        "pyarrow by hand, Parquet (`iter_batches` plus `to_tensor`)",
        pyarrow_parquet_pass,
        "parquet",
    ),
    Method("duckdb", "duckdb (`to_arrow_reader(B)`, formerly `fetch_record_batch`), Parquet", duckdb_pass, "parquet"),
    Method(
        "ray",
        "Ray Data `iter_torch_batches`, Parquet",
        ray_pass,
        "parquet",
        slow=True,
    ),
    Method(
        "hf",
        "Hugging Face datasets `.iter(batch_size)`, format \"torch\"",
        hf_pass,
        "parquet",
        slow=True,
        note="without the embedding: datasets refuses `arrow.fixed_shape_tensor`",
    ),
    Method("ours-parquet", "**ours**, `ad.batches` over the Parquet file", ours_parquet_pass, "parquet"),
    Method(
        "ours-ipc-bare",
        "ours over IPC, iterating `ad.batches` without `torch.from_dlpack`",
        ours_ipc_no_torch_pass,
        "ipc",
        detail=True,
    ),
    Method(
        "ours-parquet-bare",
        "ours over Parquet, iterating `ad.batches` without `torch.from_dlpack`",
        ours_parquet_no_torch_pass,
        "parquet",
        detail=True,
    ),
]
