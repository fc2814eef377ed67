"""Image rows read by URL from a server that misbehaves: answers in part, breaks off and resumes
with another version, says "not modified" about another ETag; and a ``cache_dir`` whose folders
a local user replaced with links. Every case is the row's error or a miss, never other pixels.

The server is ``_object_servers.RangeServer`` on loopback; a test answers some requests itself
(``server.handler``), as a hostile server would.
"""

import io
import time

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

import _object_servers
import arrow_dlpack as ad

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SPEC = {"size": 16, "crop": "none"}


def bmp(seed):
    """An uncompressed image (BMP): any bytes of another version spliced in decode silently."""
    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(out, "BMP")
    return out.getvalue()


def table(count=1):
    rows = [{"bytes": None, "path": f"img/{i}.bmp"} for i in range(count)]
    return pa.table({"image": pa.array(rows, IMAGE), "label": list(range(count))})


def pixels(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).transpose(2, 0, 1)


def load(base, **options):
    (batch,) = ad.batches(table(), 1, images={"image": SPEC}, columns=["label"], image_root=f"{base}/data", **options)
    return np.from_dlpack(batch["image"])[0]


def broken_then_resumed(first, rest, e_tag, path="/data/img/", pause=0.0):
    """A handler that sends `first` cut in half (announcing all of it) with `e_tag`, waits
    `pause` seconds, closes the connection, and answers the request for the rest with the bytes
    of `rest` there; for the paths under `path` only."""

    def handle(handler):
        if not handler.path.startswith(path):
            return False
        ranged = handler.headers.get("Range")
        if ranged is None:
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(first)))
            handler.send_header("ETag", e_tag)
            handler.end_headers()
            handler.wfile.write(first[: len(first) // 2])
            handler.wfile.flush()
            time.sleep(pause)
            handler.close_connection = True
            return True
        start = int(ranged.removeprefix("bytes=").split("-")[0])
        handler.send_response(206)
        handler.send_header("Content-Length", str(len(rest) - start))
        handler.send_header("Content-Range", f"bytes {start}-{len(rest) - 1}/{len(rest)}")
        handler.send_header("ETag", e_tag)
        handler.end_headers()
        handler.wfile.write(rest[start:])
        return True

    return handle


def test_an_answer_that_breaks_off_is_not_resumed_with_another_version():
    """The rest of a broken-off answer could be another version's under the same ETag: a weak
    one may stay the same when the bytes change, and nginx's strong one is the modification time
    in seconds and the size. The row fails instead of holding an image of neither version."""
    old, new = bmp(1), bmp(2)
    assert len(old) == len(new)
    for e_tag in ('W/"a"', '"a"'):
        with _object_servers.range_server({}) as (server, base):
            server.handler = broken_then_resumed(old, new, e_tag)
            with pytest.raises(ValueError, match="broke off; an object read whole is not read in two parts"):
                load(base)


def test_an_answer_refused_slowly_does_not_stop_the_loader_asking_its_host():
    """The refusal above is the object's answer, not the network failing: the other rows of the
    host are still asked for, however long the refused answer took (a stall would stop them)."""
    old, new, good = bmp(1), bmp(2), bmp(7)
    with _object_servers.range_server({"/data/img/1.bmp": good}) as (server, base):
        server.handler = broken_then_resumed(old, new, 'W/"a"', path="/data/img/0.bmp", pause=0.8)
        batches = ad.batches(table(2), 1, images={"image": {**SPEC, "on_error": "skip"}}, columns=["label"],
                             image_root=f"{base}/data")
        (batch,) = list(batches)
        assert np.from_dlpack(batch["label"]).tolist() == [1]
        np.testing.assert_array_equal(np.from_dlpack(batch["image"])[0], pixels(good))


def test_a_partial_answer_to_a_whole_object_is_refused_and_not_kept(tmp_path):
    data = bmp(3)
    files = {"/data/img/0.bmp": data}

    def partial(handler):
        if handler.path != "/data/img/0.bmp":
            return False
        handler.send_response(206)
        handler.send_header("Content-Length", "100")
        handler.send_header("Content-Range", f"bytes 0-99/{len(data)}")
        handler.send_header("ETag", '"p"')
        handler.end_headers()
        handler.wfile.write(data[:100])
        return True

    with _object_servers.range_server(files) as (server, base):
        server.handler = partial
        with pytest.raises(ValueError, match=r"answer is 206 Partial Content"):
            load(base, cache_dir=str(tmp_path / "cache"))
        # Nothing of it was kept: the next epoch, answered whole, reads the image.
        server.handler = None
        np.testing.assert_array_equal(load(base, cache_dir=str(tmp_path / "cache")), pixels(data))


def test_not_modified_about_another_etag_is_the_rows_error(tmp_path):
    data = bmp(4)
    with _object_servers.range_server({"/data/img/0.bmp": data}) as (server, base):
        cache = str(tmp_path / "cache")
        np.testing.assert_array_equal(load(base, cache_dir=cache), pixels(data))

        def other(handler):
            if handler.headers.get("If-None-Match") is None:
                return False
            handler.send_response(304)
            handler.send_header("ETag", '"someone-else"')
            handler.end_headers()
            return True

        server.handler = other
        with pytest.raises(ValueError, match='"not modified" with ETag "someone-else"'):
            load(base, cache_dir=cache)


def test_cache_folders_that_are_links_are_neither_written_nor_read(tmp_path):
    data = bmp(5)
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    (cache / "v1").mkdir(parents=True)
    outside.mkdir()
    for folder in range(256):
        (cache / "v1" / f"{folder:02x}").symlink_to(outside, target_is_directory=True)
    with _object_servers.range_server({"/data/img/0.bmp": data}) as (server, base):
        for _ in range(2):
            np.testing.assert_array_equal(load(base, cache_dir=str(cache)), pixels(data))
        # Nothing was kept, so the second epoch asked without a condition.
        assert not any("if-none-match" in headers for _, _, headers in server.seen)
    assert list(outside.iterdir()) == []


def test_an_empty_etag_is_not_kept(tmp_path):
    data = bmp(6)

    def empty_etag(handler):
        if handler.path != "/data/img/0.bmp":
            return False
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("ETag", "")
        handler.end_headers()
        handler.wfile.write(data)
        return True

    cache = tmp_path / "cache"
    with _object_servers.range_server({}) as (server, base):
        server.handler = empty_etag
        for _ in range(2):
            np.testing.assert_array_equal(load(base, cache_dir=str(cache)), pixels(data))
    entries = [path for path in (cache / "v1").rglob("*") if path.is_file() and len(path.name) == 32]
    assert entries == []
