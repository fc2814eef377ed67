"""Tokenizing: ``_tokenize_column`` and ``ad.tokenize`` against the Python package
``tokenizers`` (the oracle: ``Tokenizer.encode_batch(texts, add_special_tokens=...)`` of the same
tokenizer) for tokenizers trained here of the four common kinds (byte-level BPE, a BPE with a
Llama-3-style split regex, WordPiece, Unigram with Metaspace), on generated text of many scripts,
emoji, long runs of whitespace, empty strings and very long documents."""

import os
import pathlib
import pty
import random
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

import arrow_dlpack as ad
from arrow_dlpack._arrow_dlpack import _tokenize_column as tokenize_column

SCRIPTS = [
    "abcdefghijklmnopqrstuvwxyzàéîõüßçñABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГД",
    "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔ",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "אבגדהוזחטיכלמנסעפצקרשת",
    "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह्ािीुूेैोौं",
    "กขคงจฉชซญดตถทนบปผพฟมยรลวศสหอฮะาิีึืุูเแโใไ่้๊๋",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "가나다라마바사아자차카타파하한국어",
    "あいうえおかきくけこアイウエオカキクケコ",
]
EMOJI = ["😀", "🐈", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🏳️‍🌈", "🤖", "\u200d", "e\u0301"]
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "   \n\n   "]
PUNCT = list(".,;:!?'\"()[]{}-–—…/\\@#$%^&*_+=<>|~`") + ["'s", "'t", "'re", "'ll", "n't", "<s>"]


def _word(rng):
    kind = rng.random()
    if kind < 0.06:
        return rng.choice(EMOJI)
    if kind < 0.12:
        return str(rng.randrange(10 ** rng.randrange(1, 8)))
    if kind < 0.2:
        return rng.choice(PUNCT)
    script = rng.choice(SCRIPTS)
    return "".join(rng.choice(script) for _ in range(rng.randrange(1, 12)))


def _document(rng, words):
    parts = []
    for _ in range(words):
        parts.append(_word(rng))
        parts.append(rng.choice(SPACES))
    return "".join(parts)


def _texts(count, seed=0, specials=True):
    """``count`` generated documents, then (with ``specials``) the hard cases: empty texts, long
    runs of whitespace, long words, a long document, control characters, special tokens."""
    rng = random.Random(seed)
    texts = [_document(rng, int(rng.lognormvariate(3.5, 1.0))) for _ in range(count)]
    if not specials:
        return texts
    texts += [
        "",
        " ",
        "\n",
        " " * 20_000,
        "a" + " " * 50_000 + "b",
        "\n" * 10_000,
        "\t \u3000" * 5_000 + "end",
        "x" * 30_000,
        "🐈" * 5_000,
        _document(rng, 5_000),
        "\x00\x01\x7f control",
        "<s> </s> [CLS] [SEP] <unk> literal special tokens",
        "it's we're they'll can't I'M",
    ]
    return texts


def _byte_level_bpe(corpus):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=800,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    return tokenizer


#: The pre-tokenizing regex of Llama 3 and cl100k: case-insensitive contractions, lookahead.
SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _split_regex_bpe(corpus):
    tokenizer = Tokenizer(models.BPE(byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=["<|begin_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)]
    )
    return tokenizer


def _wordpiece(corpus):
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=900, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]"], show_progress=False
    )
    tokenizer.train_from_iterator(corpus, trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tokenizer


def _unigram(corpus):
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=500, special_tokens=["<unk>", "</s>"], unk_token="<unk>", show_progress=False
    )
    # Unigram's training is the slowest of the four: a part of the corpus is enough.
    tokenizer.train_from_iterator(corpus[:100], trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tokenizer.token_to_id("</s>"))]
    )
    return tokenizer


KINDS = {
    "byte_level_bpe": _byte_level_bpe,
    "split_regex_bpe": _split_regex_bpe,
    "wordpiece": _wordpiece,
    "unigram": _unigram,
}


@pytest.fixture(scope="module")
def corpus():
    return _texts(300, seed=1)


@pytest.fixture(scope="module", params=list(KINDS))
def tokenizer(request, corpus):
    return KINDS[request.param](corpus[:300])


@pytest.fixture(scope="module")
def bpe(corpus):
    return _byte_level_bpe(corpus[:300])


def _expected(tokenizer, texts, add_special_tokens=True):
    return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)]


def _assert_same_ids(got, expected, texts):
    assert len(got) == len(expected)
    for i, (ours, theirs) in enumerate(zip(got, expected)):
        assert ours == theirs, f"row {i} differs, text {texts[i][:80]!r} ({len(texts[i])} chars)"


@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_ids_equal_encode_batch_of_the_python_package(tokenizer, add_special_tokens):
    texts = _texts(400, seed=2)
    got = tokenize_column(pa.array(texts), tokenizer, add_special_tokens=add_special_tokens)
    assert isinstance(got, ad.ListArray)
    assert got.type == "list<item: int32>"
    _assert_same_ids(got.to_pylist(), _expected(tokenizer, texts, add_special_tokens), texts)


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.text(max_size=300), max_size=12))
def test_ids_equal_encode_batch_for_any_unicode_text(texts):
    tokenizer = _ANY_TEXT_TOKENIZER
    got = tokenize_column(pa.array(texts, pa.string()), tokenizer).to_pylist()
    _assert_same_ids(got, _expected(tokenizer, texts), texts)


_ANY_TEXT_TOKENIZER = _split_regex_bpe(_texts(120, seed=3))


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.string_view()])
def test_every_string_layout_and_chunked_columns_give_the_same_ids(bpe, kind):
    texts = _texts(100, seed=4, specials=False) + _texts(0, seed=4)
    expected = _expected(bpe, texts)
    column = pa.chunked_array([pa.array(texts[:37], kind), pa.array(texts[37:], kind)])
    _assert_same_ids(tokenize_column(column, bpe).to_pylist(), expected, texts)
    for threads in [1, 3]:
        got = tokenize_column(pa.array(texts, kind).slice(10, 50), bpe, threads=threads)
        _assert_same_ids(got.to_pylist(), expected[10:60], texts[10:60])


def test_a_path_a_pathlike_and_a_transformers_fast_tokenizer_give_the_same_ids(bpe, tmp_path):
    from transformers import PreTrainedTokenizerFast

    texts = _texts(50, seed=5, specials=False)
    expected = _expected(bpe, texts)
    path = tmp_path / "tokenizer.json"
    bpe.save(str(path))
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe)
    for tokenizer in [str(path), path, fast]:
        _assert_same_ids(tokenize_column(pa.array(texts), tokenizer).to_pylist(), expected, texts)
    assert fast(texts[:3])["input_ids"] == expected[:3]


def test_padding_set_on_the_tokenizer_is_not_applied_and_truncation_is(bpe):
    texts = _texts(30, seed=6, specials=False)
    padded = Tokenizer.from_str(bpe.to_str())
    padded.enable_padding(pad_id=0, length=4096)
    assert tokenize_column(pa.array(texts), padded).to_pylist() == _expected(bpe, texts)
    truncated = Tokenizer.from_str(bpe.to_str())
    truncated.enable_truncation(max_length=7)
    got = tokenize_column(pa.array(texts), truncated).to_pylist()
    assert got == _expected(truncated, texts)
    assert max(len(ids) for ids in got) == 7


def test_a_null_text_names_its_row_unless_allow_nulls(bpe):
    column = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c", None, "d"])])
    with pytest.raises(ad.ArrowDLPackValueError, match=r"the text at row 3 is null.*allow_nulls=True"):
        tokenize_column(column, bpe)
    got = tokenize_column(column, bpe, allow_nulls=True, add_special_tokens=False).to_pylist()
    assert got == _expected(bpe, ["a", "b", "c", "", "d"], add_special_tokens=False)
    assert got[3] == []


def test_bad_tokenizers_columns_and_arguments_are_refused(bpe, tmp_path):
    broken = tmp_path / "tokenizer.json"
    broken.write_text('{"model": 3}')
    with pytest.raises(ad.ArrowDLPackValueError, match="cannot read the tokenizer of .*tokenizer.json"):
        tokenize_column(pa.array(["a"]), str(broken))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        tokenize_column(pa.array(["a"]), str(tmp_path / "missing.json"))
    # A file that is not text (not UTF-8) does not parse either: a ValueError, not an OSError.
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(ad.ArrowDLPackValueError, match="cannot read the tokenizer of .*binary.json"):
        tokenize_column(pa.array(["a"]), str(binary))
    with pytest.raises(ad.ArrowDLPackTypeError, match="tokenizer is int; expected a path"):
        tokenize_column(pa.array(["a"]), 3)
    with pytest.raises(ad.ArrowDLPackTypeError, match="cannot read values of type int64; expected string, large_string or string_view text$"):
        tokenize_column(pa.array([1, 2]), bpe)
    with pytest.raises(ad.ArrowDLPackValueError, match="threads is 0"):
        tokenize_column(pa.array(["a"]), bpe, threads=0)


# ad.tokenize: a source tokenized into a file.


@pytest.fixture(scope="module")
def table():
    texts = _texts(200, seed=7, specials=False)
    return pa.table({"id": pa.array(np.arange(len(texts)), pa.int64()), "text": texts})


def _write(table, path):
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=97)
    elif path.suffix == ".arrows":
        with pa.ipc.new_stream(path, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=97):
                writer.write_batch(batch)
    else:
        feather.write_feather(table, path, compression="uncompressed", chunksize=97)


def _read(path):
    if path.suffix == ".parquet":
        return pq.read_table(path)
    if path.suffix == ".arrows":
        return pa.ipc.open_stream(path).read_all()
    return feather.read_table(path)


@pytest.mark.parametrize("source_kind", [".parquet", ".arrow", ".arrows", "table"])
@pytest.mark.parametrize("out_kind", [".arrow", ".parquet", ".arrows"])
def test_tokenize_writes_the_ids_of_encode_batch_beside_the_columns(
    bpe, table, tmp_path, source_kind, out_kind
):
    if source_kind == "table":
        source = table
    else:
        source = tmp_path / f"in{source_kind}"
        _write(table, source)
    out = tmp_path / f"out{out_kind}"
    summary = ad.tokenize(source, bpe, out)
    expected = _expected(bpe, table["text"].to_pylist())
    assert summary == {"rows": table.num_rows, "tokens": sum(map(len, expected))}
    back = _read(out)
    assert back.column_names == ["id", "text", "input_ids"]
    assert back.schema.field("input_ids").type == pa.list_(pa.int32())
    assert back["id"].to_pylist() == table["id"].to_pylist()
    assert back["text"].to_pylist() == table["text"].to_pylist()
    _assert_same_ids(back["input_ids"].to_pylist(), expected, table["text"].to_pylist())
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_tokenize_keeps_the_columns_asked_for_and_names_the_output(bpe, table, tmp_path):
    out = tmp_path / "ids.parquet"
    ad.tokenize(table, bpe, out, keep_columns=[], output_column="tokens", add_special_tokens=False)
    back = pq.read_table(out)
    assert back.column_names == ["tokens"]
    assert back["tokens"].to_pylist() == _expected(bpe, table["text"].to_pylist(), False)
    renamed = table.rename_columns(["id", "body"])
    ad.tokenize(renamed, bpe, tmp_path / "b.arrow", column="body", keep_columns=["id"])
    assert feather.read_table(tmp_path / "b.arrow").column_names == ["id", "input_ids"]


def test_the_output_is_read_by_sequences_as_any_token_column(bpe, table, tmp_path):
    out = tmp_path / "tokens.arrow"
    ad.tokenize(table.slice(0, 50), bpe, out, keep_columns=["id"])
    expected = _expected(bpe, table["text"].to_pylist()[:50])
    batches = list(ad.batches(str(out), 8, sequences={"input_ids": "pack"}))
    values = np.concatenate([np.from_dlpack(b["input_ids"]) for b in batches])
    assert values.tolist() == [t for ids in expected for t in ids]
    lengths = np.concatenate([np.diff(np.from_dlpack(b["input_ids_cu_seqlens"])) for b in batches])
    assert lengths.tolist() == [len(ids) for ids in expected]


def test_tokenize_errors_name_the_row_and_leave_no_file(bpe, tmp_path):
    texts = ["a", "b", "c", None, "d"]
    source = pa.Table.from_batches(
        pa.table({"text": texts}).to_batches(max_chunksize=2)
    )
    out = tmp_path / "out.arrow"
    with pytest.raises(ad.ArrowDLPackValueError, match="the text at row 3 is null"):
        ad.tokenize(source, bpe, out)
    assert list(tmp_path.iterdir()) == []
    ad.tokenize(source, bpe, out, allow_nulls=True)
    assert feather.read_table(out)["input_ids"].to_pylist()[3] == []


def test_tokenize_refuses_bad_columns_formats_and_sources(bpe, table, tmp_path):
    with pytest.raises(ad.ArrowDLPackValueError, match="cannot tell the format of .*out.csv"):
        ad.tokenize(table, bpe, tmp_path / "out.csv")
    with pytest.raises(ad.ArrowDLPackValueError, match='column "body" not found'):
        ad.tokenize(table, bpe, tmp_path / "o.arrow", column="body")
    with pytest.raises(
        ad.ArrowDLPackTypeError,
        match='cannot tokenize column "id" of type int64; expected a string, large_string or '
        "string_view column$",
    ):
        ad.tokenize(table, bpe, tmp_path / "o.arrow", column="id", output_column="x")
    with pytest.raises(ad.ArrowDLPackValueError, match='output column "id"'):
        ad.tokenize(table, bpe, tmp_path / "o.arrow", output_column="id")
    with pytest.raises(FileNotFoundError):
        ad.tokenize(tmp_path / "missing.parquet", bpe, tmp_path / "o.arrow")
    with pytest.raises(ad.ArrowDLPackTypeError, match="neither a path"):
        ad.tokenize(3, bpe, tmp_path / "o.arrow")
    with pytest.raises(FileNotFoundError):
        ad.tokenize(table, bpe, tmp_path / "no" / "such" / "dir" / "o.arrow")
    assert list(tmp_path.iterdir()) == []


def test_tokenize_reads_parquet_and_ipc_objects_over_s3(bpe, table, tmp_path, monkeypatch):
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
        for name in ["texts.parquet", "texts.arrow"]:
            _write(table, tmp_path / name)
            client.upload_file(str(tmp_path / name), "corpus", name)
        options = {"endpoint": endpoint, "region": "us-east-1", **keys, "timeout": "10s"}
        expected = _expected(bpe, table["text"].to_pylist())
        for name in ["texts.parquet", "texts.arrow"]:
            out = tmp_path / f"out-{name}.arrow"
            ad.tokenize(f"s3://corpus/{name}", bpe, out, storage_options=options)
            back = feather.read_table(out)
            assert back["id"].to_pylist() == table["id"].to_pylist()
            _assert_same_ids(back["input_ids"].to_pylist(), expected, table["text"].to_pylist())
    finally:
        server.stop()


_PROGRESS_SCRIPT = """
import sys, pyarrow as pa, arrow_dlpack as ad
from tokenizers import Tokenizer
tokenizer = Tokenizer.from_file(sys.argv[1])
ad.tokenize(pa.table({"text": ["hello world"] * 1000}), tokenizer, sys.argv[2], progress=sys.argv[3] == "1")
"""


@pytest.mark.parametrize("on_terminal", [True, False])
@pytest.mark.parametrize("progress", [True, False])
def test_the_progress_line_is_drawn_on_a_terminal_only(bpe, tmp_path, on_terminal, progress):
    path = tmp_path / "tokenizer.json"
    bpe.save(str(path))
    args = [sys.executable, "-c", _PROGRESS_SCRIPT, str(path), str(tmp_path / "o.arrow")]
    args.append("1" if progress else "0")
    if on_terminal:
        main, child = pty.openpty()
        run = subprocess.run(args, stderr=child, stdout=subprocess.DEVNULL, timeout=120)
        os.close(child)
        output = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        os.close(main)
        text = output.decode()
    else:
        run = subprocess.run(args, capture_output=True, timeout=120)
        text = run.stderr.decode()
    assert run.returncode == 0, text
    if on_terminal and progress:
        # A table tells its rows ahead, so the line counts them against the total.
        expected = sum(map(len, _expected(bpe, ["hello world"] * 1000)))
        assert f"tokenizing: 1000/1000 rows (100%), {expected} tokens" in text
        assert "tokens/s" in text
    else:
        assert text == ""


def test_a_vocabulary_of_ids_far_beyond_its_size_is_a_value_error_not_a_panic(tmp_path):
    # A 1 KB file that tokenizers loads and encodes with: written back for its digest, its
    # vocabulary became a table of every id, a PanicException at 2**32 - 1 and an abort for want
    # of memory at 2**31. In a child, so that its stderr is the test's to read.
    import json

    for top in (2**32 - 1, 2**31):
        tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        spec = json.loads(tokenizer.to_str())
        spec["model"]["vocab"]["world"] = top
        path = tmp_path / f"top{top}.json"
        path.write_text(json.dumps(spec))
        assert Tokenizer.from_file(str(path)).encode("hello world").ids == [1, top]
        script = (
            "import sys, pyarrow as pa, arrow_dlpack as ad\n"
            "table = pa.table({'text': ['hello world']})\n"
            "try:\n"
            "    ad.batches(table, 1, sequences={'text': {'mode': 'pad', 'tokenizer': sys.argv[1]}})\n"
            "except ad.ArrowDLPackValueError as error:\n"
            "    print(error)\n"
        )
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
        assert f"its largest id is {top} for a vocabulary of 3 tokens" in done.stdout


def test_a_token_budget_of_2_32_or_more_is_refused():
    table = pa.table({"ids": pa.array([[1, 2]], pa.list_(pa.int32()))})
    with pytest.raises(ValueError, match=r"max_tokens is 4294967295; expected at most 4294967294"):
        ad.batches(table, 1, sequences={"ids": "jagged"}, max_tokens=2**32 - 1)
    assert next(ad.batches(table, 1, sequences={"ids": "jagged"}, max_tokens=2**32 - 2))["ids"].shape == (2,)


def test_a_tokenizers_json_text_is_taken_as_the_tokenizer(tmp_path):
    # Read as a path, it was an OSError of a name too long that showed the whole text.
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    table = pa.table({"text": ["hello world", "world"]})
    given = [
        np.from_dlpack(next(ad.batches(table, 2, sequences={"text": {"mode": "pad", "tokenizer": form}}))["text"]).tolist()
        for form in (str(path), tokenizer.to_str(), " \n" + tokenizer.to_str(pretty=True), tokenizer)
    ]
    assert given == [[[1, 2], [2, 0]]] * 4


def test_a_tokenizer_object_whose_json_loses_its_vocabulary_is_refused():
    # tokenizers writes a vocabulary holding the id 2**32 - 1 back as an empty one: read through
    # that JSON, every text became [] without an error.
    import json

    vocab = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    vocab["zzz"] = 2**32 - 1
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    assert tokenizer.encode("hello").ids == [7, 4, 11, 11, 14]
    assert json.loads(tokenizer.to_str())["model"]["vocab"] == {}
    table = pa.table({"text": ["hello world"]})
    with pytest.raises(ValueError, match=r"Tokenizer.to_str\(\) holds 0 tokens, and its get_vocab_size\(True\) gave 27"):
        ad.batches(table, 1, sequences={"text": {"mode": "pad", "tokenizer": tokenizer}})

    # An object that stands for a tokenizer and counts its tokens wrongly (or not as an int).
    class Counting:
        def __init__(self, count):
            self.count = count

        def to_str(self):
            return tokenizer.to_str()

        def get_vocab_size(self, with_added_tokens=True):
            return self.count

    for count in (-1, 2**70, "0", None):
        with pytest.raises(ValueError, match=rf"holds 0 tokens, and its get_vocab_size\(True\) gave {re.escape(repr(count))};"):
            ad.batches(table, 1, sequences={"text": {"mode": "pad", "tokenizer": Counting(count)}})


def test_tokenize_into_a_missing_folder_names_the_file_asked_for(tmp_path):
    # It named its temporary file (`cannot read nodir/.t.parquet.3996.partial`).
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    out = tmp_path / "nodir" / "t.parquet"
    with pytest.raises(FileNotFoundError) as raised:
        ad.tokenize(pa.table({"text": ["hello"]}), tokenizer, str(out), progress=False)
    assert raised.value.errno == 2 and raised.value.filename == str(out)
    assert str(raised.value) == f"[Errno 2] cannot write {out}: No such file or directory: '{out}'"
    assert not (tmp_path / "nodir").exists()
    # A folder in the file's place: the rename into place fails, said as a write.
    (tmp_path / "isdir.parquet").mkdir()
    with pytest.raises(IsADirectoryError, match="cannot write"):
        ad.tokenize(pa.table({"text": ["hello"]}), tokenizer, str(tmp_path / "isdir.parquet"), progress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["isdir.parquet"]
