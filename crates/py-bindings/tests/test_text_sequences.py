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
