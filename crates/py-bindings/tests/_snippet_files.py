"""The files that the documentation's examples read, and the S3 objects that its object-storage
examples read; loaded by path by ``test_docs.py``.

``FILES`` is the table of what a page's working directory holds before its first block runs,
``OBJECTS`` that of the bucket ``bucket`` of the S3 server: a name, and the function that writes
it. A file is made once per test session, when a page first names it, and copied with its
modification time (which a saved loader state records) into the directory of every page that
names it. The data are small and fixed (seeded), with the columns the examples name.
"""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

#: Rows of ``train.parquet``, in row groups of 1,024: 8 units to shuffle and shard.
TRAIN_ROWS = 8 * 1024
#: Rows of ``tokens.parquet``: three batches of 32 and a short one.
TOKEN_ROWS = 100
#: The sentences of ``corpus.parquet``, on which ``tokenizer.json`` is trained.
SENTENCES = [
    "Hello world!",
    "Tokenize me once.",
    "Arrow holds columns and frameworks hold tensors.",
    "DLPack shares memory without copying.",
]


def train_table(rows: int = TRAIN_ROWS, start: int = 0) -> pa.Table:
    """16 float32 features ``f0``..``f15``, an int64 ``label`` of 10 classes and an
    ``embedding`` of 8 float32 (``arrow.fixed_shape_tensor``)."""
    rng = np.random.default_rng(start)
    columns = {f"f{i}": rng.standard_normal(rows, dtype=np.float32) for i in range(16)}
    columns["label"] = (np.arange(start, start + rows) % 10).astype(np.int64)
    embedding = pa.FixedSizeListArray.from_arrays(rng.standard_normal(rows * 8, dtype=np.float32), 8)
    columns["embedding"] = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), [8]), embedding
    )
    return pa.table(columns)


def write_train(path: Path) -> None:
    pq.write_table(train_table(), path, row_group_size=1024)


def write_tokens(path: Path) -> None:
    """``input_ids`` (``list<int32>``, 2 to 40 ids, BERT's [CLS] 101 ... [SEP] 102) and an int64
    ``label``."""
    rng = np.random.default_rng(1)
    rows = [[101, *rng.integers(1000, 30000, n - 2).tolist(), 102] for n in rng.integers(2, 41, TOKEN_ROWS)]
    labels = np.arange(TOKEN_ROWS, dtype=np.int64) % 2
    pq.write_table(pa.table({"input_ids": pa.array(rows, pa.list_(pa.int32())), "label": labels}), path)


def write_corpus(path: Path) -> None:
    """``id`` and ``text``: one sentence per row."""
    pq.write_table(pa.table({"id": np.arange(len(SENTENCES)), "text": SENTENCES}), path)


def write_tokenizer(path: Path) -> None:
    """A word-level tokenizer of the corpus' words, with BERT's special tokens and template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tokenizer.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=special))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(path))


def write_loader_state(path: Path, rank: int) -> None:
    """The ``state_dict()`` of rank ``rank`` of 2 (each with a ``StatefulDataLoader`` of 2
    workers) after 3 batches of ``train.parquet``, beside it: the old run of loader.md's
    "Resuming with other ranks or workers"."""
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader

    import arrow_dlpack as ad

    train = path.with_name("train.parquet")
    dataset = ad.BatchDataset(
        str(train), 1024, columns=["label"], shuffle=True, seed=7, rank=rank, world_size=2
    )
    loader = StatefulDataLoader(dataset, batch_size=None, num_workers=2)
    for _, _ in zip(range(3), loader):
        pass
    torch.save(loader.state_dict(), path)


#: The files that pages name, in the order they are made: a file is made with every file above it
#: in the table, and may read them (in its own directory).
FILES = {
    "train.parquet": write_train,
    "tokens.parquet": write_tokens,
    "corpus.parquet": write_corpus,
    "tokenizer.json": write_tokenizer,
    "loader-rank0.pt": lambda path: write_loader_state(path, rank=0),
    "loader-rank1.pt": lambda path: write_loader_state(path, rank=1),
}

#: The objects of the S3 bucket ``bucket``: ``train.parquet``'s rows in two parts.
OBJECTS = {
    "train/part-0.parquet": lambda path: pq.write_table(train_table(4096, 0), path, row_group_size=1024),
    "train/part-1.parquet": lambda path: pq.write_table(train_table(4096, 4096), path, row_group_size=1024),
}
