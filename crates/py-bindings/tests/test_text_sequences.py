"""Tokenizing on the fly: a text column named in ``sequences=`` with a tokenizer is loaded as its
token ids, which then pad, pack, jag, truncate, cut by tokens, bucket and resume as any token
column. The oracle is the Python package ``tokenizers`` (``Tokenizer.encode_batch``) of the
same tokenizer; the errors (a column that is not text, a null text, a tokenizer that does not
parse, a resume with another tokenizer) are asserted one by one."""

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import trainers

import arrow_dlpack as ad

WORDS = ["alpha", "beta", "gamma", "δέλτα", "эпсилон", "zeta", "的一是", "🐈", "👍🏽", "e\u0301"]
SPACES = [" ", "  ", "\n", "\t", "\u3000", "   \n\n "]


def _texts(count, seed=0):
    rng = random.Random(seed)
    texts = [
        "".join(rng.choice(WORDS) + rng.choice(SPACES) for _ in range(rng.randrange(0, 40)))
        for _ in range(count)
    ]
    return texts + ["", " " * 300, "🐈" * 50]


def _bpe(texts, vocab_size=400):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    return tokenizer


TEXTS = _texts(200)


@pytest.fixture(scope="module")
def bpe():
    return _bpe(TEXTS)


@pytest.fixture(scope="module")
def tokenizer_path(bpe, tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    bpe.save(str(path))
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The texts in a Parquet file of several row groups, with an id column."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.parquet"
    table = pa.table({"id": np.arange(len(TEXTS)), "text": TEXTS})
    pq.write_table(table, path, row_group_size=37)
    return str(path)


def _expected(tokenizer, texts, add_special_tokens=True):
    return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)]


def _packed_rows(batches, name="text"):
    rows = []
    for batch in batches:
        values = np.from_dlpack(batch[name]).tolist()
        bounds = np.from_dlpack(batch[f"{name}_cu_seqlens"]).tolist()
        rows += [values[a:b] for a, b in zip(bounds, bounds[1:])]
    return rows


def _padded_rows(batches, name="text"):
    rows = []
    for batch in batches:
        lengths = np.from_dlpack(batch[f"{name}_lengths"])
        rows += [row[:n].tolist() for row, n in zip(np.from_dlpack(batch[name]), lengths)]
    return rows


def _pack(tokenizer, **more):
    return {"text": {"mode": "pack", "tokenizer": tokenizer, **more}}


def test_packed_ids_equal_encode_batch_over_parquet(bpe, tokenizer_path, corpus):
    batches = list(ad.batches(corpus, 16, columns=["id"], sequences=_pack(tokenizer_path)))
    assert _packed_rows(batches) == _expected(bpe, TEXTS)
    assert np.from_dlpack(batches[0]["text"]).dtype == np.int32
    assert np.concatenate([np.from_dlpack(b["id"]) for b in batches]).tolist() == list(
        range(len(TEXTS))
    )


def test_every_way_of_giving_the_tokenizer_gives_the_same_ids(bpe, tokenizer_path, corpus):
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=bpe)
    expected = _expected(bpe, TEXTS)
    for tokenizer in (bpe, fast, tokenizer_path):
        got = _packed_rows(ad.batches(corpus, 32, columns=[], sequences=_pack(tokenizer)))
        assert got == expected
    without = _pack(bpe, add_special_tokens=False)
    got = _packed_rows(ad.batches(corpus, 32, columns=[], sequences=without))
    assert got == _expected(bpe, TEXTS, add_special_tokens=False)


@pytest.mark.parametrize("text_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_every_string_layout_is_tokenized(bpe, text_type):
    table = pa.table({"text": pa.array(TEXTS, type=text_type)})
    got = _packed_rows(ad.batches(table, 50, sequences=_pack(bpe)))
    assert got == _expected(bpe, TEXTS)


def test_pad_truncates_and_jagged_gives_offsets(bpe):
    table = pa.table({"text": TEXTS})
    expected = _expected(bpe, TEXTS)
    spec = {"mode": "pad", "tokenizer": bpe, "max_length": 5, "truncation_side": "left"}
    padded = list(ad.batches(table, 16, sequences={"text": spec}))
    assert _padded_rows(padded) == [row[-5:] for row in expected]
    assert all(np.from_dlpack(b["text"]).shape[1] <= 5 for b in padded)
    jagged = list(ad.batches(table, 16, sequences={"text": {"mode": "jagged", "tokenizer": bpe}}))
    rows = []
    for batch in jagged:
        values = np.from_dlpack(batch["text"]).tolist()
        offsets = np.from_dlpack(batch["text_offsets"]).tolist()
        rows += [values[a:b] for a, b in zip(offsets, offsets[1:])]
    assert rows == expected


def test_max_tokens_and_buckets_cut_on_the_tokenized_lengths(bpe, corpus):
    expected = _expected(bpe, TEXTS)
    budget = 256
    batches = list(ad.batches(corpus, 64, columns=["id"], sequences=_pack(bpe), max_tokens=budget))
    assert all(np.from_dlpack(b["text"]).shape[0] <= budget for b in batches)
    assert _packed_rows(batches) == expected
    bucketed = list(
        ad.batches(
            corpus,
            8,
            columns=["id"],
            sequences=_pack(bpe),
            shuffle=True,
            seed=3,
            bucket_by_length=True,
            buffer_size=64,
        )
    )
    ids = np.concatenate([np.from_dlpack(b["id"]) for b in bucketed]).tolist()
    assert sorted(ids) == list(range(len(TEXTS)))
    assert _packed_rows(bucketed) == [expected[i] for i in ids]


def test_a_run_resumes_exactly_and_refuses_another_tokenizer(bpe, tokenizer_path, corpus):
    options = dict(columns=["id"], sequences=_pack(tokenizer_path), shuffle=True, seed=1, buffer_size=50)
    whole = list(ad.batches(corpus, 10, **options))
    loader = ad.batches(corpus, 10, **options)
    for _ in range(4):
        next(loader)
    state = loader.state_dict()
    assert state["settings"]["sequences"]["text"]["tokenizer"].startswith("xxh3-128:")
    rest = list(ad.batches(corpus, 10, state=state, **options))
    assert len(rest) == len(whole) - 4
    for ours, theirs in zip(rest, whole[4:]):
        for name in theirs:
            np.testing.assert_array_equal(np.from_dlpack(ours[name]), np.from_dlpack(theirs[name]))
    # The same tokenizer as an object is the same tokenizer.
    same = dict(options, sequences=_pack(bpe))
    assert len(list(ad.batches(corpus, 10, state=state, **same))) == len(rest)
    lowercase = Tokenizer.from_str(bpe.to_str())
    lowercase.normalizer = normalizers.Lowercase()
    other = dict(options, sequences=_pack(lowercase))
    with pytest.raises(ValueError, match=r'sequences\["text"\]\.tokenizer: saved "xxh3-128:'):
        ad.batches(corpus, 10, state=state, **other)
    no_specials = dict(options, sequences=_pack(bpe, add_special_tokens=False))
    with pytest.raises(ValueError, match=r'sequences\["text"\]\.add_special_tokens: saved true'):
        ad.batches(corpus, 10, state=state, **no_specials)


def test_a_dataset_text_column_is_tokenized(bpe):
    import datasets

    dataset = datasets.Dataset.from_dict({"text": TEXTS}).shuffle(seed=0)
    got = _packed_rows(ad.batches(dataset, 16, sequences=_pack(bpe)))
    assert got == _expected(bpe, dataset["text"][:])


def test_a_column_that_is_not_text_is_a_type_error(bpe):
    table = pa.table({"text": pa.array([[1, 2], [3]])})
    with pytest.raises(TypeError, match=r'cannot tokenize column "text" of type list<item: int64>'):
        ad.batches(table, 2, sequences=_pack(bpe))
    table = pa.table({"text": [1, 2]})
    with pytest.raises(TypeError, match=r'cannot tokenize column "text" of type int64; expected a string'):
        ad.batches(table, 2, sequences=_pack(bpe))


def test_a_null_text_names_its_row_unless_allow_nulls(bpe):
    texts = ["a b", "c", None, "d"]
    table = pa.table({"text": texts})
    with pytest.raises(ValueError, match=r"the text at row 2 is null.*allow_nulls=True"):
        list(ad.batches(table, 2, sequences=_pack(bpe)))
    # A null text is an empty row (not the ids of an empty text, which has special tokens).
    got = _packed_rows(ad.batches(table, 2, sequences=_pack(bpe), allow_nulls=True))
    expected = _expected(bpe, ["a b", "c", "", "d"])
    assert expected[2] != []
    assert got == expected[:2] + [[]] + expected[3:]


def test_bad_tokenizers_and_keys_are_refused(bpe, tmp_path):
    table = pa.table({"text": ["a"]})
    broken = tmp_path / "tokenizer.json"
    broken.write_text('{"model": ')
    with pytest.raises(ValueError, match="cannot read the tokenizer of"):
        ad.batches(table, 2, sequences=_pack(str(broken)))
    with pytest.raises(OSError):
        ad.batches(table, 2, sequences=_pack(str(tmp_path / "missing.json")))
    with pytest.raises(TypeError, match="tokenizer is int; expected a path to a tokenizer.json"):
        ad.batches(table, 2, sequences=_pack(3))
    with pytest.raises(ValueError, match="sets add_special_tokens without a tokenizer"):
        ad.batches(table, 2, sequences={"text": {"mode": "pack", "add_special_tokens": False}})
    with pytest.raises(TypeError, match=r'add_special_tokens"\] is str; expected bool'):
        ad.batches(table, 2, sequences=_pack(bpe, add_special_tokens="yes"))


def _concat_rows(ids, max_length, eos):
    """The reference packing: documents with ``eos`` after each, concatenated and cut into rows
    of ``max_length`` tokens, the last padded with 0; position ids restarting at every document
    start and row start."""
    stream, starts = [], []
    for doc in ids:
        starts.append(len(stream))
        stream += doc + [eos]
    rows = [stream[i : i + max_length] for i in range(0, len(stream), max_length)]
    positions = []
    boundaries = set(starts)
    for r, row in enumerate(rows):
        pos, p = [], 0
        for j in range(len(row)):
            if j == 0 or r * max_length + j in boundaries:
                p = 0
            pos.append(p)
            p += 1
        positions.append(pos + list(range(max_length - len(row))))
    rows[-1] = rows[-1] + [0] * (max_length - len(rows[-1]))
    return rows, positions


def _concat_spec(tokenizer, **more):
    return {"text": {"mode": "concat", "tokenizer": tokenizer, "max_length": 64, **more}}


def test_concat_packs_tokenized_text_into_rows_of_max_length(bpe, tokenizer_path, corpus):
    eos = bpe.token_to_id("</s>")
    spec = _concat_spec(tokenizer_path, eos_token_id=eos, add_special_tokens=False)
    batches = list(ad.batches(corpus, 8, sequences=spec))
    ids = _expected(bpe, TEXTS, add_special_tokens=False)
    rows, positions = _concat_rows(ids, 64, eos)
    got = np.concatenate([np.from_dlpack(b["text"]) for b in batches])
    assert got.shape == (len(rows), 64) and got.dtype == np.int32
    assert got.tolist() == rows
    got_positions = np.concatenate([np.from_dlpack(b["text_position_ids"]) for b in batches])
    assert got_positions.tolist() == positions
    # batch_size counts rows; cu_seqlens bounds every segment of the flattened rows.
    assert [len(np.from_dlpack(b["text"])) for b in batches[:-1]] == [8] * (len(batches) - 1)
    for batch in batches:
        cu = np.from_dlpack(batch["text_cu_seqlens"])
        flat_positions = np.from_dlpack(batch["text_position_ids"]).reshape(-1)
        assert cu[0] == 0 and cu[-1] == flat_positions.size and cu.dtype == np.int32
        assert sorted(set(np.flatnonzero(flat_positions == 0).tolist())) == cu[:-1].tolist()
        assert int(np.from_dlpack(batch["text_max_seqlen"])) == int(np.diff(cu).max())


def test_concat_of_a_list_column_and_a_dataset(bpe):
    import datasets

    docs = [list(range(i, i + i % 9)) for i in range(60)]
    table = pa.table({"input_ids": pa.array(docs, pa.list_(pa.int32()))})
    # An end-of-document id that no document holds.
    eos = 1000
    spec = {"input_ids": {"mode": "concat", "max_length": 16, "eos_token_id": eos}}
    rows, _ = _concat_rows(docs, 16, eos)
    got = np.concatenate([np.from_dlpack(b["input_ids"]) for b in ad.batches(table, 4, sequences=spec)])
    assert got.tolist() == rows
    ds = datasets.Dataset.from_dict({"input_ids": docs}).shuffle(seed=0)
    rows, _ = _concat_rows(ds["input_ids"][:], 16, eos)
    got = np.concatenate([np.from_dlpack(b["input_ids"]) for b in ad.batches(ds, 4, sequences=spec)])
    assert got.tolist() == rows


def test_concat_resumes_mid_epoch_to_equal_tensors(bpe, corpus):
    spec = _concat_spec(bpe, eos_token_id=1, split_documents=True)
    options = dict(sequences=spec, shuffle=True, seed=4, buffer_size=40)
    whole = list(ad.batches(corpus, 4, **options))
    assert len(whole) > 6
    for k in (1, 3, len(whole) - 1):
        loader = ad.batches(corpus, 4, **options)
        for _ in range(k):
            next(loader)
        state = loader.state_dict()
        assert set(state["concat"]) == {"documents", "token_type", "carry"}
        assert state["concat"]["token_type"] == "int32"
        rest = list(ad.batches(corpus, 4, state=state, **options))
        assert len(rest) == len(whole) - k
        for ours, theirs in zip(rest, whole[k:]):
            for name in theirs:
                np.testing.assert_array_equal(np.from_dlpack(ours[name]), np.from_dlpack(theirs[name]))


def test_concat_best_fit_keeps_documents_whole(bpe):
    docs = [[7] * n for n in (5, 3, 6, 2, 8, 1, 4)]
    table = pa.table({"t": pa.array(docs, pa.list_(pa.int64()))})
    spec = {"t": {"mode": "concat", "max_length": 8, "split_documents": False, "pad_value": -9}}
    got = np.concatenate([np.from_dlpack(b["t"]) for b in ad.batches(table, 2, sequences=spec)])
    assert got.shape[1] == 8
    assert (got == 7).sum() == sum(map(len, docs))
    for row in got.tolist():
        kept = [t for t in row if t != -9]
        assert kept == [7] * len(kept) and row[len(kept) :] == [-9] * (8 - len(kept))


def test_concat_errors_are_named(bpe):
    table = pa.table({"t": pa.array([[1, 2]], pa.list_(pa.int32())), "id": [0]})
    with pytest.raises(ValueError, match='sequence "t" is in mode "concat" without max_length'):
        ad.batches(table, 2, sequences={"t": "concat"})
    with pytest.raises(ValueError, match="expected no columns beside it"):
        ad.batches(table, 2, columns=["id"], sequences={"t": {"mode": "concat", "max_length": 4}})
    with pytest.raises(ValueError, match='apply to mode "concat" only'):
        ad.batches(table, 2, sequences={"t": {"mode": "pack", "eos_token_id": 3}})
    with pytest.raises(TypeError, match=r'\["eos_token_id"\] is str; expected int'):
        ad.batches(table, 2, sequences={"t": {"mode": "concat", "max_length": 4, "eos_token_id": "x"}})
    # The number of packed batches is not known in advance.
    with pytest.raises(TypeError):
        len(ad.batches(table, 2, sequences={"t": {"mode": "concat", "max_length": 4}}))


def test_batch_dataset_packs_with_concat_and_does_not_know_its_length(bpe, corpus):
    import torch

    spec = _concat_spec(bpe, eos_token_id=1)
    dataset = ad.BatchDataset(corpus, 4, sequences=spec)
    with pytest.raises(TypeError, match="not known in advance"):
        len(dataset)
    got = torch.cat([batch["text"] for batch in dataset])
    expected = np.concatenate([np.from_dlpack(b["text"]) for b in ad.batches(corpus, 4, sequences=spec)])
    assert got.shape[1] == 64 and got.numpy().tolist() == expected.tolist()


def test_text_parquet_in_object_storage_is_tokenized_packed_and_resumed(bpe, corpus, monkeypatch):
    import boto3
    from moto.server import ThreadedMotoServer

    for key in ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]:
        monkeypatch.delenv(key, raising=False)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys)
        client.create_bucket(Bucket="corpus")
        client.upload_file(corpus, "corpus", "corpus.parquet")
        options = {"endpoint": endpoint, "region": "us-east-1", **keys, "timeout": "10s"}
        url = "s3://corpus/corpus.parquet"
        packed = ad.batches(url, 16, columns=["id"], sequences=_pack(bpe), storage_options=options)
        assert _packed_rows(packed) == _expected(bpe, TEXTS)
        spec = _concat_spec(bpe, eos_token_id=1)
        run = dict(sequences=spec, storage_options=options, shuffle=True, seed=2, buffer_size=40)
        whole = [np.from_dlpack(b["text"]) for b in ad.batches(url, 4, **run)]
        local = [np.from_dlpack(b["text"]) for b in ad.batches(corpus, 4, **dict(run, storage_options=None))]
        assert [w.tolist() for w in whole] == [x.tolist() for x in local]
        loader = ad.batches(url, 4, **run)
        for _ in range(2):
            next(loader)
        rest = [np.from_dlpack(b["text"]) for b in ad.batches(url, 4, state=loader.state_dict(), **run)]
        assert [r.tolist() for r in rest] == [w.tolist() for w in whole[2:]]
    finally:
        server.stop()


def test_a_text_longer_than_the_limit_is_refused_naming_its_row(bpe):
    # The tokenizers crate holds about 190 bytes per byte of text and aborts when an allocation
    # fails: a text over 8 MiB is refused before it is encoded.
    table = pa.table({"text": ["short", "a" * ((8 << 20) + 1)]})
    with pytest.raises(ValueError, match=r"row 1.*text of 8388609 bytes is longer than the 8388608 bytes"):
        list(ad.batches(table, 2, sequences=_pack(bpe)))
