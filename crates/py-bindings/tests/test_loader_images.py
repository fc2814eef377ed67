"""``images=`` in the loader: encoded image columns of Parquet files, IPC files and streams
decoded into ``(B, C, H, W)`` batches on the loader's threads, checked against PIL.

PIL decides what the right pixels are (``Image.open(...).convert("RGB")``, the shorter side
resized, a centre crop); the loader's images stay within 3 levels of 255 of it on photographs.
Hugging Face ``Image`` columns come from a real ``datasets.Dataset`` written with
``to_parquet``; S3 is a moto server on loopback.
"""

import io
import os

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from moto.server import ThreadedMotoServer
from PIL import Image

import _object_servers
import arrow_dlpack as ad

SPEC = {"size": 224, "resize": 256}


def photo(width, height, seed):
    """A photograph-like RGB image: gradients, noise and a disc, different for every seed."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    image = np.stack(
        [x * 255 / width, y * 255 / height, (seed * 37 + (x + y) * 127 / (width + height)) % 256],
        axis=-1,
    )
    image += rng.normal(0, 8, (height, width, 3))
    cy, cx, r = height * 0.5, width * (0.3 + 0.05 * (seed % 8)), min(width, height) / 5
    image[(y - cy) ** 2 + (x - cx) ** 2 < r**2] = (20 + seed % 200, 160, 220)
    return np.clip(image, 0, 255).astype(np.uint8)


def encode(array, fmt):
    out = io.BytesIO()
    options = {"JPEG": {"quality": 90}, "WEBP": {"quality": 90}}.get(fmt, {})
    Image.fromarray(array).save(out, fmt, **options)
    return out.getvalue()


def sizes(row):
    """ImageNet-like shapes, smaller: the long side 260 to 330 pixels."""
    return 260 + (row * 7) % 70, 240 + (row * 11) % 40


def encoded_rows(rows, fmt):
    return [encode(photo(*sizes(row), seed=row), fmt) for row in range(rows)]


def reference(data, size=224, resize=256):
    """PIL's pipeline, as (3, H, W) uint8."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    width, height = image.size
    # torchvision's Resize: the shorter side to `resize`, the longer to int(resize * long / short).
    if width <= height:
        new = (resize, int(resize * height / width))
    else:
        new = (int(resize * width / height), resize)
    image = image.resize(new, Image.Resampling.BILINEAR)
    left, top = int(round((new[0] - size) / 2.0)), int(round((new[1] - size) / 2.0))
    image = image.crop((left, top, left + size, top + size))
    return np.asarray(image).transpose(2, 0, 1)


def assert_close_to_pil(images, data, labels):
    for image, label in zip(images, labels):
        expected = reference(data[label])
        difference = np.abs(image.astype(np.int16) - expected.astype(np.int16)).mean()
        assert difference <= 3.0, (label, difference)


def write(tmp_path, fmt, rows=70, row_group_size=32):
    data = encoded_rows(rows, fmt)
    path = tmp_path / f"train-{fmt.lower()}.parquet"
    table = pa.table({"image": pa.array(data, pa.binary()), "label": np.arange(rows)})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path, data


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_the_done_when_loop_gives_uint8_batches_close_to_pil(tmp_path, fmt):
    path, data = write(tmp_path, fmt)
    shapes, labels = [], []
    for b in ad.batches(str(path), 64, images={"image": {"size": 224, "resize": 256}}, columns=["label"]):
        image = torch.from_dlpack(b["image"])
        shapes.append(tuple(image.shape))
        assert image.dtype == torch.uint8
        label = torch.from_dlpack(b["label"]).numpy()
        labels.extend(label.tolist())
        assert_close_to_pil(image.numpy(), data, label)
        sizes_ = np.from_dlpack(b["image_sizes"])
        expected = np.array([sizes(row)[::-1] for row in label], dtype=np.int32)
        np.testing.assert_array_equal(sizes_, expected)
    assert shapes == [(64, 3, 224, 224), (6, 3, 224, 224)]
    assert labels == list(range(70))


def test_hugging_face_image_columns_of_a_dataset_written_with_to_parquet(tmp_path):
    import datasets
    images = [Image.fromarray(photo(*sizes(row), seed=row)) for row in range(12)]
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    dataset = datasets.Dataset.from_dict({"image": images, "label": list(range(12))}, features=features)
    path = tmp_path / "hf.parquet"
    dataset.to_parquet(str(path))
    column = pq.read_table(path).column("image")
    assert pa.types.is_struct(column.type)
    data = [row["bytes"] for row in column.to_pylist()]
    got = list(ad.batches(str(path), 8, images={"image": SPEC}, columns=["label"]))
    assert [tuple(np.from_dlpack(b["image"]).shape) for b in got] == [(8, 3, 224, 224), (4, 3, 224, 224)]
    for b in got:
        assert_close_to_pil(np.from_dlpack(b["image"]), data, np.from_dlpack(b["label"]))


def test_path_rows_are_read_beside_the_file_or_under_image_root(tmp_path):
    data = encoded_rows(6, "PNG")
    (tmp_path / "images").mkdir()
    for row in range(6):
        (tmp_path / "images" / f"{row}.png").write_bytes(data[row])
    # Hugging Face's layout with its bytes null: each row's file, relative to the dataset.
    image = pa.array(
        [{"bytes": None, "path": f"images/{row}.png"} for row in range(6)],
        pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    )
    table = pa.table({"image": image, "label": np.arange(6)})
    path = tmp_path / "paths.parquet"
    pq.write_table(table, path)
    got = list(ad.batches(str(path), 6, images={"image": SPEC}, columns=["label"]))
    assert_close_to_pil(np.from_dlpack(got[0]["image"]), data, range(6))
    # A table has no directory: the root says where its files are; without one, an error.
    rooted = list(ad.batches(table, 6, images={"image": SPEC}, image_root=tmp_path, columns=["label"]))
    np.testing.assert_array_equal(np.from_dlpack(rooted[0]["image"]), np.from_dlpack(got[0]["image"]))
    with pytest.raises(ValueError, match=r"row 0 of column \"image\".*relative.*image_root="):
        list(ad.batches(table, 6, images={"image": SPEC}, columns=["label"]))


def test_shuffled_and_sharded_batches_hold_each_row_once_with_its_own_image(tmp_path):
    path, data = write(tmp_path, "JPEG", rows=40, row_group_size=8)
    spec = {"size": 32, "resize": 40}
    options = dict(images={"image": spec}, columns=["label"], shuffle=True, seed=5, world_size=2)
    seen = {}
    for rank in range(2):
        for b in ad.batches(str(path), 8, rank=rank, **options):
            for image, label in zip(np.from_dlpack(b["image"]), np.from_dlpack(b["label"])):
                assert label not in seen
                seen[int(label)] = image.copy()
    assert sorted(seen) == list(range(40))
    in_order = {}
    for b in ad.batches(str(path), 8, images={"image": spec}, columns=["label"]):
        for image, label in zip(np.from_dlpack(b["image"]), np.from_dlpack(b["label"])):
            in_order[int(label)] = image.copy()
    for label in range(40):
        np.testing.assert_array_equal(seen[label], in_order[label])


def test_random_crops_and_flips_resume_exactly_from_a_saved_state(tmp_path):
    path, _ = write(tmp_path, "JPEG", rows=40, row_group_size=8)
    spec = {"size": 48, "crop": "random_resized", "hflip": 0.5}
    options = dict(images={"image": spec}, columns=["label"], shuffle=True, seed=11, buffer_size=16)

    def dump(loader):
        return [(np.from_dlpack(b["label"]).copy(), np.from_dlpack(b["image"]).copy()) for b in loader]

    whole = dump(ad.batches(str(path), 8, **options))
    again = dump(ad.batches(str(path), 8, decode_threads=1, **options))
    for (a_labels, a_images), (b_labels, b_images) in zip(whole, again):
        np.testing.assert_array_equal(a_labels, b_labels)
        np.testing.assert_array_equal(a_images, b_images)
    loader = ad.batches(str(path), 8, **options)
    next(loader), next(loader)
    state = loader.state_dict()
    resumed = dump(ad.batches(str(path), 8, state=state, **options))
    assert len(resumed) == len(whole) - 2
    for (a_labels, a_images), (b_labels, b_images) in zip(resumed, whole[2:]):
        np.testing.assert_array_equal(a_labels, b_labels)
        np.testing.assert_array_equal(a_images, b_images)
    other = dict(options, images={"image": dict(spec, hflip=0.0)})
    with pytest.raises(ValueError, match=r"images\[\"image\"\]"):
        ad.batches(str(path), 8, state=state, **other)


CORRUPT = {3, 4, 17, 30}


def test_skip_keeps_batches_full_and_labels_aligned_with_their_images(tmp_path):
    data = encoded_rows(40, "PNG")
    rows = [d[: len(d) // 3] if row in CORRUPT else d for row, d in enumerate(data)]
    rows[30] = b"not an image"
    table = pa.table({"image": pa.array(rows, pa.binary()), "label": np.arange(40)})
    path = tmp_path / "corrupt.parquet"
    pq.write_table(table, path, row_group_size=7)
    spec = {"size": 32, "resize": 40, "on_error": "skip"}
    loader = ad.batches(str(path), 8, images={"image": spec}, columns=["label"])
    with pytest.raises(TypeError):
        len(loader)  # the number of batches is not known in advance
    got = list(loader)
    decodable = [row for row in range(40) if row not in CORRUPT]
    assert [len(np.from_dlpack(b["label"])) for b in got] == [8, 8, 8, 8, 4]
    labels = np.concatenate([np.from_dlpack(b["label"]) for b in got])
    assert labels.tolist() == decodable
    for b in got:
        for image, label in zip(np.from_dlpack(b["image"]), np.from_dlpack(b["label"])):
            expected = reference(data[label], size=32, resize=40)
            assert np.abs(image.astype(int) - expected.astype(int)).mean() <= 3.0
    # Raised instead: the first corrupt row, named in its file.
    with pytest.raises(ValueError, match=rf"cannot decode image at row 3 of column \"image\" in .*corrupt\.parquet: "):
        list(ad.batches(str(path), 8, images={"image": {"size": 32}}, columns=["label"]))


def _labels(batches):
    return [np.from_dlpack(b["label"]).tolist() for b in batches]


def test_skip_when_shuffled_or_over_ranks_leaves_the_rows_out_of_the_batches_cut_in_advance(tmp_path):
    data = encoded_rows(40, "PNG")
    rows = [d[: len(d) // 3] if row in CORRUPT else d for row, d in enumerate(data)]
    paths = {}
    for name, images in (("corrupt", rows), ("clean", data)):
        paths[name] = str(tmp_path / f"{name}.parquet")
        table = pa.table({"image": pa.array(images, pa.binary()), "label": np.arange(40)})
        pq.write_table(table, paths[name], row_group_size=7)
    spec = {"size": 32, "resize": 40, "on_error": "skip"}
    shuffled = dict(images={"image": spec}, columns=["label"], shuffle=True, seed=3, buffer_size=16)
    # Shuffled: the batches are those of the same rows all decodable, less the rows skipped;
    # their number is known in advance, and a resumed run gives the rest exactly.
    clean = _labels(ad.batches(paths["clean"], 8, **shuffled))
    loader = ad.batches(paths["corrupt"], 8, **shuffled)
    assert len(loader) == len(clean) == 5
    got = _labels(loader)
    assert got == [[label for label in batch if label not in CORRUPT] for batch in clean]
    assert any(len(batch) < 8 for batch in got)
    loader = ad.batches(paths["corrupt"], 8, **shuffled)
    first = _labels([next(loader), next(loader)])
    rest = _labels(ad.batches(paths["corrupt"], 8, state=loader.state_dict(), **shuffled))
    assert first + rest == got
    for batch in ad.batches(paths["corrupt"], 8, **shuffled):
        for image, label in zip(np.from_dlpack(batch["image"]), np.from_dlpack(batch["label"])):
            expected = reference(data[label], size=32, resize=40)
            assert np.abs(image.astype(int) - expected.astype(int)).mean() <= 3.0
    # Two ranks, in order: as many batches each (no rank waits for another's last batch), and
    # every decodable row once.
    ranks = [
        _labels(ad.batches(paths["corrupt"], 8, images={"image": spec}, columns=["label"],
                           rank=rank, world_size=2))
        for rank in range(2)
    ]
    assert len(ranks[0]) == len(ranks[1])
    assert sorted(label for batches in ranks for b in batches for label in b) == [
        row for row in range(40) if row not in CORRUPT]


def test_bad_image_options_name_the_column_and_the_key():
    table = pa.table({"image": pa.array([b"x"], pa.binary())})
    with pytest.raises(TypeError, match=r"images\[\"image\"\].*size"):
        ad.batches(table, 1, images={"image": {"resize": 3}})
    with pytest.raises(ValueError, match=r"images\[\"image\"\]"):
        ad.batches(table, 1, images={"image": {"size": 0}})
    with pytest.raises(TypeError, match="images"):
        ad.batches(table, 1, images=["image"])
    with pytest.raises(TypeError, match="image_root"):
        ad.batches(table, 1, images={"image": {"size": 2}}, image_root=3)


def test_collate_fn_decodes_images_as_ad_batches_does(tmp_path):
    path, data = write(tmp_path, "JPEG", rows=10)
    table = pq.read_table(path)
    collate = ad.ray.collate_fn(images={"image": SPEC}, columns=["label"])
    tensors = collate(table)
    assert tuple(tensors["image"].shape) == (10, 3, 224, 224)
    assert tensors["image"].dtype == torch.uint8
    (expected,) = list(ad.batches(str(path), 10, images={"image": SPEC}, columns=["label"]))
    np.testing.assert_array_equal(tensors["image"].numpy(), np.from_dlpack(expected["image"]))


def test_batch_dataset_with_images_in_a_dataloader_with_two_workers(tmp_path):
    path, data = write(tmp_path, "JPEG", rows=48, row_group_size=8)
    dataset = ad.BatchDataset(str(path), 8, images={"image": {"size": 32, "resize": 40}}, columns=["label"])
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    labels = []
    for b in loader:
        assert tuple(b["image"].shape) == (8, 3, 32, 32)
        for image, label in zip(b["image"].numpy(), b["label"].numpy()):
            expected = reference(data[label], size=32, resize=40)
            assert np.abs(image.astype(int) - expected.astype(int)).mean() <= 3.0
        labels.extend(b["label"].tolist())
    assert sorted(labels) == list(range(48))


@pytest.fixture(scope="module")
def s3_images(tmp_path_factory):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    local = tmp_path_factory.mktemp("s3images")
    path, data = write(local, "JPEG", rows=20, row_group_size=8)
    keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys)
    client.create_bucket(Bucket="images")
    client.upload_file(str(path), "images", "train.parquet")
    yield endpoint, path, data
    server.stop()


def test_images_of_a_parquet_file_over_s3_equal_those_of_the_local_file(s3_images, monkeypatch):
    endpoint, path, data = s3_images
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    options = dict(images={"image": SPEC}, columns=["label"])
    remote = list(ad.batches("s3://images/train.parquet", 8, **options))
    local = list(ad.batches(str(path), 8, **options))
    assert len(remote) == len(local) == 3
    for a, b in zip(remote, local):
        np.testing.assert_array_equal(np.from_dlpack(a["image"]), np.from_dlpack(b["image"]))
        np.testing.assert_array_equal(np.from_dlpack(a["label"]), np.from_dlpack(b["label"]))


def test_a_path_row_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path):
    # A FIFO blocked the loader's thread for good (and close() and exit with it); /dev/zero was
    # read until memory ran out. Run in a child, so that a regression fails one test.
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / "fifo.png")
    script = f"""
import pyarrow as pa, arrow_dlpack as ad
image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
for path in ["fifo.png", "/dev/zero", "."]:
    table = pa.table({{"image": pa.array([{{"bytes": None, "path": path}}], image), "label": [0]}})
    try:
        next(iter(ad.batches(table, 1, images={{"image": {{"size": 4}}}}, columns=["label"], image_root={str(root)!r})))
    except ValueError as error:
        assert "not a regular file" in str(error), error
    else:
        raise AssertionError(path)
print("ok")
"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_path_rows_in_object_storage_are_read_beside_the_file_or_under_image_root(s3_images, monkeypatch, tmp_path):
    """Hugging Face ``Image`` rows that hold a relative path and no bytes, in a Parquet file in S3:
    read from beside the file, or under an ``s3://`` image_root for a table in memory; a missing
    object is the row's error, or its skip."""
    endpoint, _, data = s3_images
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for row, encoded in enumerate(data[:6]):
        client.put_object(Bucket="images", Key=f"paths/img/{row}.jpg", Body=encoded)
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    rows = [{"bytes": None, "path": f"img/{row}.jpg"} for row in range(6)]
    table = pa.table({"image": pa.array(rows, image), "label": np.arange(6)})
    pq.write_table(table, tmp_path / "paths.parquet")
    client.upload_file(str(tmp_path / "paths.parquet"), "images", "paths/train.parquet")
    options = dict(images={"image": SPEC}, columns=["label"])
    for batches in (
        ad.batches("s3://images/paths/train.parquet", 4, **options),
        ad.batches(table, 4, image_root="s3://images/paths/", **options),
        ad.batches(table, 4, image_root="s3://images/paths", shuffle=True, seed=3, **options),
    ):
        labels = []
        for batch in batches:
            images, batch_labels = np.from_dlpack(batch["image"]), np.from_dlpack(batch["label"])
            assert_close_to_pil(images, data, batch_labels)
            labels.extend(batch_labels.tolist())
        assert sorted(labels) == list(range(6))
    missing = table.set_column(0, "image", pa.array(rows[:2] + [{"bytes": None, "path": "img/nope.jpg"}] + rows[3:], image))
    with pytest.raises(ValueError, match=r'row 2 of column "image".*s3://images/paths/img/nope\.jpg.*not found'):
        list(ad.batches(missing, 4, image_root="s3://images/paths", **options))
    skipped = ad.batches(missing, 4, image_root="s3://images/paths", images={"image": {**SPEC, "on_error": "skip"}}, columns=["label"])
    assert [np.from_dlpack(b["label"]).tolist() for b in skipped] == [[0, 1, 3, 4], [5]]



def test_image_urls_are_read_whole_past_16_mib_named_by_path_and_checked_up_front(tmp_path):
    """An object of 17 MiB (over the client's bound of an answer without a range) is read: an
    image may be 256 MiB. A row's key with `%` or a space is the key, not an escape; a URL with
    a query string is refused rather than read as another object; an image_root no row could be
    read under is refused when the loader is made; paths beside a source whose URL carries
    credentials are refused rather than sent with the masked credentials."""
    big = io.BytesIO()
    Image.fromarray(np.full((2400, 2400, 3), 77, np.uint8)).save(big, "BMP")
    assert len(big.getvalue()) > 16 << 20
    # The server answers the path as sent: the key "img/50% off.png" must arrive escaped.
    files = {"/data/big.bmp": big.getvalue(), "/data/img/50%25%20off.png": encode(photo(40, 30, 1), "PNG")}
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    with _object_servers.range_server(files) as (server, base):
        table = pa.table({"image": pa.array([{"bytes": None, "path": "big.bmp"},
                                             {"bytes": None, "path": "img/50% off.png"}], image),
                          "label": [0, 1]})
        (batch,) = ad.batches(table, 2, images={"image": {"size": 8}}, columns=["label"], image_root=f"{base}/data")
        assert np.from_dlpack(batch["image"])[0].min() == 77
        queried = table.set_column(0, "image", pa.array([{"bytes": None, "path": f"{base}/data/big.bmp?v=1"}] * 2, image))
        with pytest.raises(ValueError, match="query string"):
            list(ad.batches(queried, 2, images={"image": {"size": 8}}, columns=["label"]))
        pq.write_table(table, tmp_path / "t.parquet")
        files["/data/t.parquet"] = (tmp_path / "t.parquet").read_bytes()
        secret = base.replace("http://", "http://alice:hunter2@")
        with pytest.raises(ValueError, match="carries credentials") as caught:
            list(ad.batches(f"{secret}/data/t.parquet", 2, images={"image": {"size": 8}}, columns=["label"]))
        assert "hunter2" not in str(caught.value)
    for root in ("ftp://host/images", "s3://", "http://[::1/x"):
        with pytest.raises(ValueError, match="image_root"):
            ad.batches(table, 2, images={"image": {"size": 8}}, columns=["label"], image_root=root)


def _stalling_image_server(tmp_path, rows, stalls):
    """A Parquet file of `rows` image paths, served with images that exist; `stalls(path)` says
    whether the server stalls that request (until the test ends) instead of answering."""
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"image": pa.array([{"bytes": None, "path": f"img/{i}.png"} for i in range(rows)], image),
                      "label": list(range(rows))})
    pq.write_table(table, tmp_path / "t.parquet")
    files = {"/data/t.parquet": (tmp_path / "t.parquet").read_bytes()}
    files.update({f"/data/img/{i}.png": encode(photo(12, 10, i), "PNG") for i in range(rows)})
    asked = []

    def handler(request):
        if not request.path.startswith("/data/img/"):
            return False
        asked.append(request.path)
        if not stalls(request.path):
            return False
        request.server.stopping.wait(30)
        request.close_connection = True
        return True

    return files, handler, asked


STALL_OPTIONS = {"timeout": "1s", "retry_timeout": "20s", "max_retries": "1"}


def test_a_server_that_stalls_costs_one_timeout_per_batch_not_its_retries_for_every_row(tmp_path):
    """Rows naming a server that stopped answering, skipped: the first batch's requests wait
    their timeout and retries; after that, one probe per batch (one request, one timeout) and
    the batch's other rows fail at once (before, every 16 rows waited the retries again: with
    the defaults, a job of hours)."""
    files, handler, asked = _stalling_image_server(tmp_path, 40, lambda path: True)
    with _object_servers.range_server(files) as (server, base):
        server.handler = handler
        skipped = ad.batches(f"{base}/data/t.parquet", 8, images={"image": {"size": 8, "on_error": "skip"}},
                             columns=["label"], storage_options=STALL_OPTIONS)
        assert list(skipped) == []
    # The first batch's 8 rows (each tried twice), then one probe for each later read.
    rows = sorted(set(asked))
    assert 8 <= len(rows) <= 16 and len(rows) < 40, rows


def test_a_server_that_stalls_for_a_moment_costs_only_the_rows_it_did_not_answer(tmp_path):
    """A stall of a moment: its rows are skipped, and the next batch's probe finds the server
    answering again, so every other row loads (failing the server's rows at once for a while
    lost every row of a file read in order, since skipped rows are refilled at once)."""
    stalled = {f"/data/img/{i}.png" for i in range(4)}
    files, handler, asked = _stalling_image_server(tmp_path, 40, lambda path: path in stalled)
    with _object_servers.range_server(files) as (server, base):
        server.handler = handler
        batches = ad.batches(f"{base}/data/t.parquet", 4, images={"image": {"size": 8, "on_error": "skip"}},
                             columns=["label"], storage_options=STALL_OPTIONS)
        labels = [label for b in batches for label in np.from_dlpack(b["label"]).tolist()]
    assert labels == list(range(4, 40))
