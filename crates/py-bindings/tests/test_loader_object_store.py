"""``ad.batches`` over object storage: a real S3 server (moto's, on loopback) and a small HTTP
server with byte ranges written here.

The same files are read from local disk and through ``s3://`` URLs, and must give identical
batches (with shuffling, column groups, fixed-shape tensors and shards). The failure cases name
the URL: a missing key (``FileNotFoundError``), wrong credentials (``PermissionError``), a
truncated object, a server that fails the first requests (retried), and one that stops
answering (an ``OSError`` after the timeout, well within the test's own bound).
Every server is started and stopped by these tests, on 127.0.0.1 and a free port.
"""

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from moto.server import ThreadedMotoServer

import _object_servers as _servers
import arrow_dlpack as ad


BUCKET = "train"
ROWS = 6000
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

#: Options that keep a failing test short: a short timeout and few, quick retries.
QUICK = {"timeout": "2s", "max_retries": 2, "retry_timeout": "5s", "retry_backoff": "10ms"}


def _table(start, rows):
    ids = np.arange(start, start + rows, dtype=np.int64)
    emb_type = pa.fixed_shape_tensor(pa.float32(), (2, 3))
    emb = pa.ExtensionArray.from_storage(
        emb_type,
        pa.FixedSizeListArray.from_arrays(
            pa.array((np.repeat(ids, 6) * 10 + np.tile(np.arange(6), rows)).astype(np.float32)),
            6,
        ),
    )
    return pa.table(
        {
            "id": ids,
            "x": (ids * 0.5).astype(np.float32),
            "small": (ids % 100).astype(np.int16),
            "emb": emb,
        }
    )


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on loopback with bucket ``train`` holding the same Parquet, IPC file
    and IPC stream files as a local directory; yields (endpoint, local directory)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    local = tmp_path_factory.mktemp("s3")
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys())
    client.create_bucket(Bucket=BUCKET)
    start = 0
    for index, rows in enumerate([2500, 1500, 2000]):
        table = _table(start, rows)
        start += rows
        name = f"parquet/part-{index}.parquet"
        (local / "parquet").mkdir(exist_ok=True)
        pq.write_table(table, local / name, row_group_size=500)
        client.upload_file(str(local / name), BUCKET, name)
    # Left out of listings: not a known format, and a hidden marker.
    client.put_object(Bucket=BUCKET, Key="parquet/_SUCCESS", Body=b"")
    client.put_object(Bucket=BUCKET, Key="parquet/README.txt", Body=b"not data")
    table = _table(0, 3000)
    feather.write_feather(table, local / "a.arrow", compression="uncompressed", chunksize=700)
    with pa.ipc.new_stream(local / "a.arrows", table.schema) as writer:
        for batch in table.to_batches(max_chunksize=700):
            writer.write_batch(batch)
    for name in ["a.arrow", "a.arrows"]:
        client.upload_file(str(local / name), BUCKET, f"ipc/{name}")
    data = (local / "parquet" / "part-0.parquet").read_bytes()
    client.put_object(Bucket=BUCKET, Key="broken/cut.parquet", Body=data[: len(data) // 2])
    yield endpoint, local
    server.stop()


def _boto_keys():
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture
def aws_env(s3, monkeypatch):
    """The environment as a user sets it for S3: endpoint, keys and region."""
    endpoint, _ = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    return s3


def _collect(source, *args, **options):
    """Every batch as a dict of numpy arrays."""
    return [
        {name: np.from_dlpack(tensor).copy() for name, tensor in batch.items()}
        for batch in ad.batches(source, *args, **options)
    ]


def _assert_same(got, expected):
    assert len(got) == len(expected) > 0
    for mine, theirs in zip(got, expected):
        assert mine.keys() == theirs.keys()
        for name in mine:
            assert mine[name].dtype == theirs[name].dtype
            np.testing.assert_array_equal(mine[name], theirs[name])


RICH = dict(
    columns=["id", "emb"],
    groups={"features": ["x", "small"]},
    shuffle=True,
    seed=7,
    buffer_size=900,
    decode_threads=2,
)


@pytest.mark.parametrize("rank", [0, 1])
def test_parquet_over_s3_gives_the_batches_of_the_local_files(aws_env, rank):
    _, local = aws_env
    paths = sorted(str(path) for path in (local / "parquet").glob("*.parquet"))
    expected = _collect(paths, 256, rank=rank, world_size=2, **RICH)
    got = _collect(f"s3://{BUCKET}/parquet/*.parquet", 256, rank=rank, world_size=2, **RICH)
    _assert_same(got, expected)
    assert got[0]["emb"].shape == (256, 2, 3)
    assert got[0]["features"].shape == (256, 2)


def test_a_prefix_a_glob_and_a_list_of_urls_name_the_same_objects_in_key_order(aws_env):
    _, local = aws_env
    paths = sorted(str(path) for path in (local / "parquet").glob("*.parquet"))
    expected = _collect(paths, 1000, columns=["id"])
    assert np.concatenate([b["id"] for b in expected]).tolist() == list(range(ROWS))
    urls = [f"s3://{BUCKET}/parquet/part-{index}.parquet" for index in range(3)]
    # A `?` is a glob's one character, not the start of a query (it was read as a query, and
    # the prefix `parquet/part-` listed).
    question = f"s3://{BUCKET}/parquet/part-?.parquet"
    for source in [f"s3://{BUCKET}/parquet/", f"s3://{BUCKET}/parquet", urls, question]:
        _assert_same(_collect(source, 1000, columns=["id"]), expected)
    loader = ad.batches(f"s3://{BUCKET}/parquet/", 1000, columns=["id"])
    assert len(loader) == 6 and loader.num_rows == ROWS
    loader.close()


@pytest.mark.parametrize("name", ["a.arrow", "a.arrows"])
def test_ipc_files_and_streams_over_s3_give_the_batches_of_the_local_files(aws_env, name):
    _, local = aws_env
    options = dict(columns=["id", "x", "emb"], shuffle=True, seed=3)
    expected = _collect(str(local / name), 512, **options)
    _assert_same(_collect(f"s3://{BUCKET}/ipc/{name}", 512, **options), expected)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_ipc_and_arrow_named_streams_over_s3_give_the_local_batches(
    aws_env, tmp_path, compression
):
    endpoint, _ = aws_env
    table = _table(0, 3000)
    options = pa.ipc.IpcWriteOptions(compression=compression)
    # A compressed IPC file, and a compressed stream named `.arrow` (as Hugging Face `datasets`
    # names its streams): the bytes fetched for the footer say which is which.
    paths = {"file": tmp_path / "c.arrow", "stream": tmp_path / "s.arrow"}
    with pa.ipc.new_file(paths["file"], table.schema, options=options) as writer:
        for batch in table.to_batches(max_chunksize=700):
            writer.write_batch(batch)
    with pa.ipc.new_stream(paths["stream"], table.schema, options=options) as writer:
        for batch in table.to_batches(max_chunksize=700):
            writer.write_batch(batch)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys())
    for kind, path in paths.items():
        key = f"compressed-{compression}/{kind}/{path.name}"
        client.upload_file(str(path), BUCKET, key)
        expected = _collect(path, 500, columns=["id", "x", "emb"])
        assert np.concatenate([b["id"] for b in expected]).tolist() == list(range(3000))
        _assert_same(_collect(f"s3://{BUCKET}/{key}", 500, columns=["id", "x", "emb"]), expected)


def test_storage_options_replace_the_environment(s3, monkeypatch):
    endpoint, local = s3
    for key in ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]:
        monkeypatch.delenv(key, raising=False)
    options = {
        "endpoint": endpoint,
        "aws_access_key_id": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "region": "us-east-1",
        **QUICK,
    }
    got = _collect(f"s3://{BUCKET}/parquet/part-1.parquet", 500, storage_options=options)
    expected = _collect(str(local / "parquet" / "part-1.parquet"), 500)
    _assert_same(got, expected)


def test_batch_dataset_workers_read_their_shards_over_s3(aws_env):
    from torch.utils.data import DataLoader

    dataset = ad.BatchDataset(f"s3://{BUCKET}/parquet/*.parquet", 250, columns=["id"])
    ids = [batch["id"] for batch in DataLoader(dataset, batch_size=None, num_workers=2)]
    assert sorted(np.concatenate([t.numpy() for t in ids]).tolist()) == list(range(ROWS))


def test_a_missing_key_is_file_not_found_naming_the_url(aws_env):
    url = f"s3://{BUCKET}/parquet/nothing-here.parquet"
    with pytest.raises(FileNotFoundError, match="nothing-here.parquet"):
        ad.batches(url, storage_options=QUICK)
    with pytest.raises(FileNotFoundError, match="no object of a known format"):
        ad.batches(f"s3://{BUCKET}/empty/*.parquet", storage_options=QUICK)


def test_a_truncated_object_is_refused_naming_the_url(aws_env):
    with pytest.raises((ValueError, OSError), match="cut.parquet"):
        ad.batches(f"s3://{BUCKET}/broken/cut.parquet", storage_options=QUICK)


def test_bad_urls_options_and_mixtures_are_refused(aws_env, tmp_path):
    with pytest.raises(ValueError, match="storage option .no_such_option."):
        ad.batches(f"s3://{BUCKET}/a.parquet", storage_options={"no_such_option": "1"})
    with pytest.raises(ValueError, match="retry_timeout"):
        ad.batches(f"s3://{BUCKET}/a.parquet", storage_options={"retry_timeout": "soon"})
    with pytest.raises(TypeError, match="storage_options"):
        ad.batches(f"s3://{BUCKET}/a.parquet", storage_options=[("region", "x")])
    with pytest.raises(TypeError, match=r"storage_options\[.region.\] is list"):
        ad.batches(f"s3://{BUCKET}/a.parquet", storage_options={"region": ["x"]})
    with pytest.raises(ValueError, match="mixes URLs of object storage and local paths"):
        ad.batches([f"s3://{BUCKET}/a.parquet", str(tmp_path / "a.parquet")])
    with pytest.raises(ValueError, match="storage_options apply to URLs"):
        ad.batches(pa.table({"x": [1.0]}), storage_options={"region": "x"})
    # The proxy's certificate and exclusions without a proxy, in the spellings the stores take,
    # are refused before anything is fetched.
    for proxy_only in ("proxy_ca_certificate", "PROXY_EXCLUDES", "aws_proxy_excludes"):
        with pytest.raises(ValueError, match=f'{proxy_only.lower()}.*without "proxy_url"'):
            ad.batches(f"s3://{BUCKET}/a.parquet", storage_options={proxy_only: "x"})


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _moto_with_auth(free_actions):
    """A moto server in its own process that authenticates every request after the first
    ``free_actions``."""
    port = _free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(free_actions))
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_wrong_credentials_are_a_permission_error_naming_the_url(tmp_path):
    # Five unauthenticated actions: the user, its policy, its key, the bucket, the object.
    with _moto_with_auth(5) as endpoint:
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys())
        iam.create_user(UserName="reader")
        iam.put_user_policy(
            UserName="reader",
            PolicyName="read",
            PolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
            '"Action": "s3:*", "Resource": "*"}]}',
        )
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys())
        s3.create_bucket(Bucket="private")
        pq.write_table(_table(0, 100), tmp_path / "a.parquet")
        s3.upload_file(str(tmp_path / "a.parquet"), "private", "a.parquet")
        url = "s3://private/a.parquet"
        base = {"endpoint": endpoint, "region": "us-east-1", **QUICK}
        good = {**base, "access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
        assert _collect(url, 100, columns=["id"], storage_options=good)[0]["id"].tolist() == list(
            range(100)
        )
        wrong = {**base, "access_key_id": "AKIAWRONGWRONGWRONG1", "secret_access_key": "nope"}
        with pytest.raises(PermissionError, match="s3://private/a.parquet"):
            ad.batches(url, 100, storage_options=wrong)


def test_an_http_url_with_a_query_is_refused_without_showing_the_query(tmp_path):
    # The query would not be sent: a pre-signed URL would be read without its signature, and
    # `?version=2` would read the same object as `?version=1`.
    files = {"/a.parquet": b"PAR1"}
    with _servers.range_server(files) as (server, base):
        for url in (f"{base}/a.parquet?X-Amz-Signature=secret", f"{base}/a.parquet#frag"):
            with pytest.raises(ValueError, match=r"query string|fragment") as raised:
                ad.batches(url, storage_options=QUICK)
            assert "secret" not in str(raised.value)
        assert server.requests == 0


def test_http_urls_with_retries_of_transient_errors(tmp_path):
    pq.write_table(_table(0, 3000), tmp_path / "a.parquet", row_group_size=1000)
    files = {"/data/a.parquet": (tmp_path / "a.parquet").read_bytes()}
    with _servers.range_server(files) as (server, base):
        server.fail_next = 2
        got = _collect(f"{base}/data/a.parquet", 512, columns=["id", "emb"], storage_options=QUICK)
        assert server.fail_next == 0
        _assert_same(got, _collect(str(tmp_path / "a.parquet"), 512, columns=["id", "emb"]))


@pytest.mark.parametrize("metadata", [0, 200_000])
def test_a_stream_is_fetched_once_past_its_schema(tmp_path, metadata):
    """The making of the loader reads the first stream's schema from short first ranges (64 KiB,
    then doubling: a schema with 200 KB of metadata takes three); the stream's bytes are then
    fetched once, not its first 8 MB twice."""
    table = _table(0, 60_000)
    if metadata:
        table = table.replace_schema_metadata({"notes": "x" * metadata})
    path = tmp_path / "s.arrows"
    with pa.ipc.new_stream(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=10_000):
            writer.write_batch(batch)
    data = path.read_bytes()
    assert len(data) > 1 << 20
    with _servers.range_server({"/s.arrows": data}) as (server, base):
        got = _collect(f"{base}/s.arrows", 4096, columns=["id", "emb"], storage_options=QUICK)
        ranges = [headers.get("range") for method, _, headers in server.seen if method == "GET"]
    moved = 0
    for ranged in ranges:
        first, _, last = ranged[len("bytes="):].partition("-")
        moved += int(last) if first == "" else int(last) + 1 - int(first)
    # The footer's tail (64 KiB), the schema's reads (64 KiB, doubling), then the stream once.
    assert moved <= len(data) + 65536 + max(65536, 4 * metadata), (moved, len(data), ranges)
    _assert_same(got, _collect(str(path), 4096, columns=["id", "emb"]))


def test_a_server_that_stops_answering_is_an_error_after_the_timeout(tmp_path):
    files = {"/a.parquet": b"PAR1" * 100}
    with _servers.range_server(files) as (server, base):
        server.stall.set()
        options = {"timeout": "300ms", "max_retries": 1, "retry_timeout": "1s", "retry_backoff": "10ms"}
        with pytest.raises(OSError, match="a.parquet") as raised:
            ad.batches(f"{base}/a.parquet", storage_options=options)
        assert "tim" in str(raised.value).lower()


def _self_signed(tmp_path):
    """A certificate for 127.0.0.1 that signs itself, and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert), str(key_file)


def test_https_verifies_the_server_certificate_each_time_unless_told_not_to(tmp_path):
    pq.write_table(_table(0, 1000), tmp_path / "a.parquet", row_group_size=500)
    files = {"/a.parquet": (tmp_path / "a.parquet").read_bytes()}
    with _servers.range_server(files, tls=_self_signed(tmp_path)) as (server, base):
        assert base.startswith("https://")
        # The system's store does not hold the certificate: refused, by every loader of the
        # process (the verifier is made once and shared).
        for _ in range(2):
            with pytest.raises(OSError, match="a.parquet") as raised:
                ad.batches(f"{base}/a.parquet", storage_options=QUICK)
            assert "certificate" in str(raised.value).lower(), raised.value
        # Told not to verify, the client reads the same rows as the local file.
        got = _collect(
            f"{base}/a.parquet", 256, columns=["id"], storage_options={**QUICK, "allow_invalid_certificates": "true"}
        )
        _assert_same(got, _collect(str(tmp_path / "a.parquet"), 256, columns=["id"]))


def test_the_example_of_the_loader_guide_runs_against_the_s3_server(aws_env, tmp_path):
    endpoint, _ = aws_env
    guide = pathlib.Path(__file__).resolve().parents[3] / "docs" / "loader.md"
    section = guide.read_text(encoding="utf-8").split("## Reading from object storage", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "http://127.0.0.1:9000" in code
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys())
    client.create_bucket(Bucket="bucket")
    rng = np.random.default_rng(5)
    columns = {f"f{i}": rng.standard_normal(3000).astype(np.float32) for i in range(16)}
    for part in range(2):
        table = pa.table({**columns, "label": np.arange(3000, dtype=np.int64) + 3000 * part})
        pq.write_table(table, tmp_path / f"{part}.parquet", row_group_size=1000)
        client.upload_file(str(tmp_path / f"{part}.parquet"), "bucket", f"train/part-{part}.parquet")
    scope = {}
    exec(compile(code.replace("http://127.0.0.1:9000", endpoint), str(guide), "exec"), scope)
    # The loop ran to its last batch: 6,000 rows in batches of 1,024, the last of 880.
    assert tuple(scope["x"].shape) == (880, 16) and tuple(scope["y"].shape) == (880,)


def test_a_run_over_s3_resumes_from_its_state(aws_env):
    url = f"s3://{BUCKET}/parquet/*.parquet"
    options = dict(columns=["id"], shuffle=True, seed=9, buffer_size=700)
    whole = _collect(url, 256, **options)
    iterator = ad.batches(url, 256, **options)
    first = [np.from_dlpack(next(iterator)["id"]).copy() for _ in range(5)]
    state = iterator.state_dict()
    iterator.close()
    rest = _collect(url, 256, state=state, **options)
    _assert_same([{"id": ids} for ids in first] + rest, whole)


def test_no_credentials_is_a_permission_error_that_says_how_to_read_a_public_bucket(
    s3, monkeypatch
):
    endpoint, local = s3
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)

    # A metadata service that gives no token, as one outside the cloud (or a proxy) does.
    def forbidden(request):
        request.send_response(403)
        request.send_header("Content-Length", "0")
        request.end_headers()
        return True

    url = f"s3://{BUCKET}/parquet/part-1.parquet"
    with _servers.range_server({}) as (metadata, metadata_base):
        metadata.handler = forbidden
        options = {
            "endpoint": endpoint,
            "region": "us-east-1",
            "metadata_endpoint": metadata_base,
            **QUICK,
        }
        with pytest.raises(PermissionError) as raised:
            ad.batches(url, 500, storage_options=options)
        message = str(raised.value)
        assert url in message
        assert "no credentials found" in message
        assert "AWS_ACCESS_KEY_ID" in message and "aws_access_key_id" in message
        assert metadata_base in message
        assert "skip_signature set to true" in message
        assert [(method, path) for method, path, _ in metadata.seen][:1] == [
            ("PUT", "/latest/api/token")
        ]
        # The way out the message names: a public object read without signing.
        client = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", **_boto_keys()
        )
        client.put_object_acl(Bucket=BUCKET, Key="parquet/part-1.parquet", ACL="public-read")
        got = _collect(url, 500, storage_options={**options, "skip_signature": True})
        _assert_same(got, _collect(str(local / "parquet" / "part-1.parquet"), 500))


def test_a_redirect_to_another_host_is_refused_unless_allowed_and_never_carries_credentials(
    tmp_path,
):
    pq.write_table(_table(0, 1000), tmp_path / "a.parquet", row_group_size=500)
    data = (tmp_path / "a.parquet").read_bytes()
    with _servers.range_server({"/bkt/a.parquet": data}) as (other, other_base):
        with _servers.range_server({}) as (endpoint, endpoint_base):

            def redirect(request):
                request.send_response(307)
                request.send_header("Location", other_base + request.path)
                request.send_header("Content-Length", "0")
                request.end_headers()
                return True

            endpoint.handler = redirect
            options = {
                "endpoint": endpoint_base,
                "region": "us-east-1",
                "aws_access_key_id": "AKIDEXAMPLE",
                "aws_secret_access_key": "wJalrXUtnFEMI",
                "aws_session_token": "the-session-token",
                **QUICK,
            }
            url = "s3://bkt/a.parquet"
            with pytest.raises(OSError, match="redirected to another host") as raised:
                ad.batches(url, 250, storage_options=options)
            assert "allow_redirects_to_other_hosts" in str(raised.value)
            assert other.seen == []
            allowed = {**options, "allow_redirects_to_other_hosts": True}
            got = _collect(url, 250, columns=["id"], storage_options=allowed)
            _assert_same(got, _collect(str(tmp_path / "a.parquet"), 250, columns=["id"]))
            assert other.seen
            for _, _, headers in other.seen:
                assert not any(
                    name == "authorization" or name.startswith("x-amz-") for name in headers
                ), headers
            assert all(
                headers.get("x-amz-security-token") == "the-session-token"
                for _, _, headers in endpoint.seen
            )


def test_credentials_in_urls_of_stores_and_endpoints_are_refused_without_being_shown():
    # A metadata service that cannot answer, should a URL not be refused.
    nowhere = {"metadata_endpoint": "http://127.0.0.1:9", **QUICK}
    with pytest.raises(ValueError) as raised:
        ad.batches(
            f"s3://{BUCKET}/a.parquet",
            storage_options={"endpoint": "http://minio:s3cret@127.0.0.1:9", **nowhere},
        )
    assert "http://***@127.0.0.1:9" in str(raised.value)
    assert "s3cret" not in str(raised.value) and "minio" not in str(raised.value)
    with pytest.raises(ValueError) as raised:
        ad.batches("s3://AKID:s3cret@bucket/a.parquet", storage_options=nowhere)
    assert "s3://***@bucket/a.parquet" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_glob_that_backtracking_would_never_finish_is_matched_at_once(aws_env):
    # A key of 200 `a`s and a glob with six stars before a `b` that never comes: a
    # backtracking matcher tries about 200^6 / 6! placements of the stars.
    client = boto3.client("s3", endpoint_url=aws_env[0], region_name="us-east-1", **_boto_keys())
    client.put_object(Bucket=BUCKET, Key="glob/" + "a" * 200 + ".parquet", Body=b"")
    with pytest.raises(FileNotFoundError, match="no object of a known format"):
        ad.batches(f"s3://{BUCKET}/glob/*a*a*a*a*a*a*b.parquet", storage_options=QUICK)
