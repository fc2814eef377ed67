"""Tokenizing text: ours beside Hugging Face's own ways, over the same documents and threads.

The workload: N documents (100,000 by default) of generated English-like text (words drawn from
a Zipf law over 30,000 made-up words, with punctuation, digits and line breaks), lengths
log-normal with a mean of about 1,000 characters, and an int64 id, in a Snappy Parquet file of
row groups of 8,192 rows. A byte-level BPE of 8,000 tokens is trained here on the first 10,000
documents (Python ``tokenizers``).

The methods, each over every document, alternating, ``--repetitions`` times:

- ``Tokenizer.encode_batch`` alone, in calls of 1,000 texts (the texts already in a Python list;
  the package's own thread pool, one thread per core);
- ours through ``ad.tokenize`` from the Parquet file to an Arrow IPC file (reading, tokenizing
  and writing);
- ours through a tokenizing call (``_tokenize_column`` over the text column, already read);
- ours from the Parquet file to packed batches of 32 documents, tokenized as the loader reads
  (``ad.batches(path, 32, sequences={"text": {"mode": "pack", "tokenizer": ...}})``);
- Hugging Face ``datasets``: ``Dataset.from_parquet`` (outside the timing), then
  ``map(tokenize, batched=True)`` writing its cache file, where ``tokenize`` returns
  ``{"input_ids": [e.ids for e in tokenizer.encode_batch(batch["text"])]}``;
- the fine-tuning script's epoch: that ``map`` (keeping only ``input_ids``), then a torch
  ``DataLoader`` over the mapped dataset, batches of 32 documents packed by transformers'
  ``DataCollatorWithFlattening`` (what our packed batches replace);
- a later epoch: packed batches of 32 from ``ad.tokenize``'s output (an IPC file of token ids),
  beside the same from the same ids written by pyarrow as a ``list<int32>`` IPC file (the
  sequence loading of a file tokenized elsewhere).

Before timing, the ids of every method are compared on the first 2,000 documents.

    python text.py [--docs 100000] [--repetitions 3] [--output FILE]

It prints the section ``## Text`` of docs/benchmarks.md (and writes it to ``--output``).
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import arrow_dlpack as ad
from arrow_dlpack._arrow_dlpack import _tokenize_column as tokenize_column

ROW_GROUP = 8_192
TRAIN_DOCS = 10_000
VOCAB = 8_000
CALL = 1_000


def make_words(count: int, rng: np.random.Generator) -> List[str]:
    """``count`` made-up words of 1 to 12 letters, from a skewed alphabet."""
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    weights = 1.0 / np.arange(1, len(letters) + 1) ** 0.8
    weights /= weights.sum()
    lengths = np.clip(rng.poisson(4.5, count), 1, 12)
    return ["".join(rng.choice(letters, size=n, p=weights)) for n in lengths]


def make_texts(docs: int) -> List[str]:
    """``docs`` documents of Zipf-drawn words, lengths log-normal (mean about 1,000 chars)."""
    rng = np.random.default_rng(7)
    words = make_words(30_000, rng)
    rank = np.arange(1, len(words) + 1)
    p = 1.0 / rank
    p /= p.sum()
    lengths = rng.lognormal(np.log(1_000) - 0.5, 1.0, docs)
    texts = []
    for chars in lengths:
        count = max(1, int(chars / 6.0))
        picked = rng.choice(len(words), size=count, p=p)
        parts = []
        for i, w in enumerate(picked):
            word = words[w]
            r = rng.random()
            if r < 0.04:
                word = word.capitalize()
            elif r < 0.06:
                word = str(int(rng.integers(0, 10_000)))
            parts.append(word)
            r = rng.random()
            if r < 0.06:
                parts.append(". ")
            elif r < 0.1:
                parts.append(", ")
            elif r < 0.11:
                parts.append("\n\n")
            else:
                parts.append(" ")
        texts.append("".join(parts).strip())
    return texts


def train(texts: List[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts[:TRAIN_DOCS], trainer)
    return tokenizer


def encode_batch_ids(tokenizer, texts: List[str]) -> List[List[int]]:
    out = []
    for start in range(0, len(texts), CALL):
        out.extend(e.ids for e in tokenizer.encode_batch(texts[start : start + CALL]))
    return out


def packed_spec(tokenizer) -> Dict[str, Dict[str, object]]:
    return {"text": {"mode": "pack", "tokenizer": tokenizer}}


def packed_batches(source, tokenizer) -> None:
    """Every document to packed batches of 32, tokenized on the loader's threads."""
    for _ in ad.batches(source, 32, columns=[], sequences=packed_spec(tokenizer)):
        pass


def packed_ids(source, tokenizer) -> List[int]:
    out: List[int] = []
    for batch in ad.batches(source, 32, columns=[], sequences=packed_spec(tokenizer)):
        out.extend(np.from_dlpack(batch["text"]).tolist())
    return out


def datasets_map(path: Path, tokenizer, cache: Path):
    """``map(tokenize, batched=True)`` over the Parquet file, writing a fresh cache file."""
    import datasets

    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_parquet(str(path), cache_dir=str(cache / "hf"))

    def tokenize(batch):
        return {"input_ids": [e.ids for e in tokenizer.encode_batch(batch["text"])]}

    def run():
        name = cache / f"map-{time.monotonic_ns()}.arrow"
        out = ds.map(tokenize, batched=True, cache_file_name=str(name), load_from_cache_file=False)
        del out
        name.unlink(missing_ok=True)

    return ds, tokenize, run


def map_and_collate(ds, tokenize, cache: Path, rows=None) -> Callable[[], List[int]]:
    """The epoch of a fine-tuning script: ``map(tokenize)`` writing its cache, then a
    ``DataLoader`` whose ``DataCollatorWithFlattening`` packs every 32 documents. The run gives
    the packed ids of ``rows`` documents (all when None) when asked to keep them."""
    from torch.utils.data import DataLoader
    from transformers import DataCollatorWithFlattening

    collator = DataCollatorWithFlattening(return_tensors="pt")
    source = ds if rows is None else ds.select(range(rows))

    def run(keep: bool = False) -> List[int]:
        name = cache / f"collate-{time.monotonic_ns()}.arrow"
        mapped = source.map(
            tokenize,
            batched=True,
            cache_file_name=str(name),
            load_from_cache_file=False,
            remove_columns=source.column_names,
        )
        ids: List[int] = []
        for batch in DataLoader(mapped, batch_size=32, collate_fn=collator):
            if keep:
                ids.extend(batch["input_ids"][0].tolist())
        del mapped
        name.unlink(missing_ok=True)
        return ids

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    began = time.monotonic()
    load = os.getloadavg()

    texts = make_texts(args.docs)
    tokenizer = train(texts)
    threads = os.cpu_count() or 1

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = tmp / "texts.parquet"
        table = pa.table({"id": pa.array(np.arange(len(texts)), pa.int64()), "text": texts})
        pq.write_table(table, source, row_group_size=ROW_GROUP)
        column = pq.read_table(source)["text"]
        ds, tokenize_fn, map_run = datasets_map(source, tokenizer, tmp)

        # The same ids from every method, on the first 2,000 documents.
        check = texts[:2_000]
        expected = encode_batch_ids(tokenizer, check)
        ours = tokenize_column(pa.array(check), tokenizer).to_pylist()
        ad.tokenize(table.slice(0, 2_000), tokenizer, tmp / "check.arrow", progress=False)
        written = pa.ipc.open_file(tmp / "check.arrow").read_all()["input_ids"].to_pylist()
        mapped = ds.select(range(2_000)).map(tokenize_fn, batched=True)["input_ids"]
        assert ours == expected and written == expected and list(mapped) == expected
        packed = packed_ids(table.slice(0, 2_000), tokenizer)
        assert packed == [t for ids in expected for t in ids]
        assert map_and_collate(ds, tokenize_fn, tmp, 2_000)(keep=True) == packed
        collate_run = map_and_collate(ds, tokenize_fn, tmp)
        tokens = sum(len(ids) for ids in encode_batch_ids(tokenizer, texts))

        out = tmp / "tokens.arrow"
        # The same ids as a plain list<int32> IPC file, for the later epochs.
        plain = tmp / "plain.arrow"
        ids = pa.array(encode_batch_ids(tokenizer, texts), pa.list_(pa.int32()))
        with pa.ipc.new_file(plain, pa.schema([("input_ids", ids.type)])) as writer:
            writer.write_table(pa.table({"input_ids": ids}), max_chunksize=ROW_GROUP)
        del ids
        ad.tokenize(source, tokenizer, out, progress=False)
        later = {"input_ids": "pack"}

        def epoch(path: Path) -> None:
            for _ in ad.batches(str(path), 32, columns=[], sequences=later):
                pass

        methods: Dict[str, Callable[[], None]] = {
            "encode_batch": lambda: encode_batch_ids(tokenizer, texts),
            "ad.tokenize": lambda: ad.tokenize(source, tokenizer, out, progress=False),
            "tokenizing call": lambda: tokenize_column(column, tokenizer),
            "packed batches": lambda: packed_batches(source, tokenizer),
            "datasets.map": map_run,
            "map + collator": collate_run,
            "later epoch": lambda: epoch(out),
            "plain epoch": lambda: epoch(plain),
        }
        times: Dict[str, List[float]] = {name: [] for name in methods}
        for _ in range(args.repetitions):
            for name, run in methods.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        written_tokens = sum(
            len(ids) for ids in pa.ipc.open_file(out).read_all()["input_ids"].to_pylist()
        )
        assert written_tokens == tokens

    median = {name: statistics.median(t) for name, t in times.items()}
    rate = {name: tokens / median[name] for name in methods}
    took = time.monotonic() - began

    def row(name: str, label: str) -> str:
        t = times[name]
        return (
            f"| {label} | {median[name]:.3f} ({min(t):.3f}-{max(t):.3f}) | "
            f"{rate[name] / 1e6:.2f} | {median['encode_batch'] / median[name]:.2f} |"
        )

    ratio_call = rate["tokenizing call"] / rate["encode_batch"]
    ratio_file = rate["ad.tokenize"] / rate["encode_batch"]
    ratio_map = median["datasets.map"] / median["ad.tokenize"]
    ratio_packed = median["packed batches"] / median["encode_batch"]
    ratio_collate = median["map + collator"] / median["packed batches"]
    ratio_later = median["later epoch"] / median["plain epoch"]
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    import datasets
    import tokenizers
    import transformers

    lines = [
        "## Text",
        "",
        f"{len(texts):,} generated documents ({sum(map(len, texts)):,} characters, lengths "
        f"log-normal, mean {sum(map(len, texts)) / len(texts):,.0f}), {tokens:,} tokens with a "
        f"byte-level BPE of {VOCAB:,} tokens trained on the first {TRAIN_DOCS:,}; a Snappy "
        f"Parquet file of row groups of {ROW_GROUP:,}; by `bench/text.py`. Median (and range) "
        f"of {args.repetitions} passes, methods alternating, {threads} threads each (the "
        f"machine's cores); the run took {took:.0f} s, load average {load[0]:.1f} at its start. "
        f"tokenizers {tokenizers.__version__}, datasets {datasets.__version__}, transformers "
        f"{transformers.__version__}, Python "
        f"{platform.python_version()}. The ids of every method were compared on the first "
        "2,000 documents first: identical.",
        "",
        "| method | s per pass | M tokens/s | vs `encode_batch` (time) |",
        "|---|---|---|---|",
        row("encode_batch", "`Tokenizer.encode_batch` alone, calls of 1,000 texts"),
        row("tokenizing call", "**ours**, a tokenizing call over the column (`_tokenize_column`)"),
        row("ad.tokenize", "**ours**, `ad.tokenize` Parquet to an IPC file"),
        row("packed batches", "**ours**, Parquet to packed batches of 32, tokenized as read"),
        row("datasets.map", "`datasets` `map(tokenize, batched=True)` writing its cache"),
        row(
            "map + collator",
            "`datasets` `map` + a `DataLoader` with `DataCollatorWithFlattening`, batches of 32",
        ),
        row("later epoch", "**ours**, a later epoch: packed batches of 32 from `ad.tokenize`'s file"),
        row("plain epoch", "**ours**, the same from the ids written by pyarrow (`list<int32>` IPC)"),
        "",
        "| target | measured | target | |",
        "|---|---|---|---|",
        f"| tokens/s of our tokenizing / `encode_batch`'s | {ratio_call:.2f}x | >= 0.9x | "
        f"{verdict(ratio_call >= 0.9)} |",
        f"| `datasets.map` time / `ad.tokenize` time (to an IPC file) | {ratio_map:.2f}x | "
        f">= 1.2x | {verdict(ratio_map >= 1.2)} |",
        f"| packed batches time / `encode_batch` time | {ratio_packed:.2f}x | <= 1.1x | "
        f"{verdict(ratio_packed <= 1.1)} |",
        f"| `map` + `DataCollatorWithFlattening` epoch time / packed batches time | "
        f"{ratio_collate:.2f}x | >= 1.2x | {verdict(ratio_collate >= 1.2)} |",
        f"| a later epoch from `ad.tokenize`'s file / from pyarrow's file of the same ids | "
        f"{ratio_later:.2f}x | <= 1.1x | {verdict(ratio_later <= 1.1)} |",
        "",
        f"`ad.tokenize`, reading and writing included, runs at {ratio_file:.2f}x the tokens per "
        "second of `encode_batch` alone.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
