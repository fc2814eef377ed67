"""Hostile encoded images: a sweep of truncated, byte-flipped and header-edited files of every
format through ``ad.decode_images``, with a fixed seed.

Every file either decodes into a tensor of the asked shape or raises ``ArrowDLPackValueError``
naming its row and column; nothing crashes, hangs or raises ``PanicException`` (a
``BaseException`` that ``except Exception`` would miss), and ``on_error="skip"`` keeps exactly
the files that decode alone. docs/reliability.md has the counts.
"""

import io
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

import arrow_dlpack as ad

# Mutants per kind per format: 3 kinds x 350 = 1,050 files of each format.
PER_KIND = 350
SEED = 20261202


def base_files():
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:30, 0:40]
    pixels = np.stack([x * 6, y * 8, (x + y) * 3], axis=-1) + rng.integers(0, 20, (30, 40, 3))
    image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))

    def encode(image, fmt, **options):
        out = io.BytesIO()
        image.save(out, fmt, **options)
        return out.getvalue()

    return {
        "jpeg": encode(image, "JPEG", quality=90),
        "jpeg_progressive": encode(image, "JPEG", quality=90, progressive=True),
        "png": encode(image.convert("RGBA"), "PNG"),
        "webp": encode(image, "WEBP", quality=90),
        "webp_lossless": encode(image, "WEBP", lossless=True),
        "gif": encode(image.convert("P", palette=Image.Palette.ADAPTIVE), "GIF"),
        "bmp": encode(image, "BMP"),
    }


def mutants(data, rng):
    """Truncated, byte-flipped and header-edited copies of ``data``, by kind."""
    out = []
    for _ in range(PER_KIND):
        out.append(("truncated", data[: int(rng.integers(0, len(data)))]))
    for _ in range(PER_KIND):
        flipped = bytearray(data)
        for position in rng.integers(0, len(data), int(rng.integers(1, 9))):
            flipped[position] ^= int(rng.integers(1, 256))
        out.append(("flipped", bytes(flipped)))
    for _ in range(PER_KIND):
        # The first 64 bytes hold every header field these formats size the image by (PNG's
        # IHDR, BMP's info header, GIF's screen descriptor, WebP's VP8 frame header, JPEG's
        # first markers); some writes are extreme values, some random bytes.
        edited = bytearray(data)
        position = int(rng.integers(0, min(64, len(data) - 4)))
        choice = int(rng.integers(0, 4))
        patch = [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff"][choice] if choice < 3 else bytes(rng.integers(0, 256, 4, dtype=np.uint8))
        edited[position : position + 4] = patch
        out.append(("header", bytes(edited)))
    return out


ROW_ERROR = re.compile(r'^cannot decode image at row 0 of column "image": (.+)$', re.S)


@pytest.mark.parametrize("name", list(base_files()))
def test_hostile_files_decode_or_raise_value_errors_naming_the_row(name):
    data = base_files()[name]
    rng = np.random.default_rng([SEED, sum(name.encode())])
    cases = mutants(data, rng)
    assert len(cases) >= 1000
    outcomes = Counter()
    decoded = []
    for index, (kind, mutant) in enumerate(cases):
        try:
            out = ad.decode_images(pa.array([mutant]), (12, 16), name="image", threads=1)
        except ValueError as error:
            assert isinstance(error, ad.ArrowDLPackValueError)
            match = ROW_ERROR.match(str(error))
            assert match, str(error)
            cause = match.group(1)
            assert "decoder panicked" not in cause, cause
            outcomes[(kind, cause.split(" ")[0])] += 1
        except MemoryError:
            outcomes[(kind, "MemoryError")] += 1
        except BaseException as error:  # a PanicException is a BaseException
            pytest.fail(f"mutant {index} ({kind}) raised {type(error).__name__}: {error}")
        else:
            assert np.from_dlpack(out.images).shape == (1, 3, 12, 16)
            outcomes[(kind, "decoded")] += 1
            decoded.append(index)
    # The same files in one column: skip keeps exactly those that decoded alone.
    column = pa.array([mutant for _, mutant in cases])
    out = ad.decode_images(column, (12, 16), on_error="skip", threads=2)
    assert np.from_dlpack(out.rows).tolist() == decoded
    assert np.from_dlpack(out.images).shape == (len(decoded), 3, 12, 16)
    # The unmutated file decodes; most mutants are refused or decode to something.
    assert sum(outcomes.values()) == len(cases)
    print(name, dict(sorted(outcomes.items())))


def test_a_resize_past_what_the_process_may_allocate_is_a_memory_error_not_an_abort():
    """A target of 300,000,000 x 1 pixels from a 40 x 30 image: its 900 MB output fits a 6 GB
    address space, but the resizer's coefficients (about 70 bytes per output row) do not, and
    the resizer allocates them without a way to fail; a probe makes that a MemoryError, through
    the loader's thread too. A tall target that fits still resizes."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import io, resource
        import numpy as np, pyarrow as pa
        from PIL import Image
        import arrow_dlpack as ad
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        out = io.BytesIO()
        Image.fromarray(np.full((30, 40, 3), 128, np.uint8)).save(out, "PNG")
        column = pa.array([out.getvalue()])
        print(ad.decode_images(column, (100_000, 1), crop="none").images.shape)
        try:
            ad.decode_images(column, (300_000_000, 1), crop="none")
        except MemoryError as error:
            print("MemoryError")
        table = pa.table({"image": column, "label": [0]})
        spec = {"image": {"size": (300_000_000, 1), "crop": "none"}}
        try:
            list(ad.batches(table, 1, columns=["label"], images=spec))
        except MemoryError as error:
            print("MemoryError")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["(1, 3, 100000, 1)", "MemoryError", "MemoryError"]


@pytest.mark.parametrize(
    "size, mode",
    [((2**31, 2**31), "RGBA"), ((2**32 - 1, 2**32 - 1), "RGB")],
)
def test_a_size_of_more_bytes_than_memory_can_address_is_refused_by_the_spec(size, mode):
    """One image of 2**31 x 2**31 RGBA pixels is 2**64 bytes: its element count overflowed
    where the batch is sized (a PanicException in debug builds)."""
    out = io.BytesIO()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(out, "PNG")
    column = pa.array([out.getvalue()])
    spec = {"size": size, "mode": mode, "on_error": "skip"}
    with pytest.raises(ValueError, match="more bytes than memory can address"):
        ad.decode_images(column, size, mode=mode, on_error="skip")
    table = pa.table({"image": column, "y": [1]})
    with pytest.raises(ValueError, match="more bytes than memory can address"):
        ad.batches(table, 1, columns=["y"], images={"image": spec})


def test_skip_never_drops_a_row_for_want_of_memory():
    """With room for one large image's decode and not two, two threads fail where one does not:
    a skip that dropped such rows would keep other rows for other thread counts, so a failed
    allocation is a MemoryError under on_error="skip" too."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import io, resource
        import numpy as np, pyarrow as pa
        from PIL import Image
        import arrow_dlpack as ad
        def png(a):
            out = io.BytesIO(); Image.fromarray(a).save(out, "PNG"); return out.getvalue()
        small = png(np.full((64, 64, 3), 7, np.uint8))
        big = png(np.zeros((6000, 6000, 3), np.uint8))
        column = pa.array([big, big, small, small])
        ad.decode_images(column.slice(1, 1), 64, crop="none", threads=2)
        used = int(open("/proc/self/statm").read().split()[0]) * 4096
        limit = used + (150 << 20)  # one decoded image (108 MB), not two
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for threads in (2, 1):
            try:
                out = ad.decode_images(column, 64, crop="none", on_error="skip", threads=threads)
                print(threads, np.from_dlpack(out.rows).tolist())
                del out
            except MemoryError:
                print(threads, "MemoryError")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 2, result.stdout
    for line in lines:
        threads, outcome = line.split(" ", 1)
        assert outcome in ("[0, 1, 2, 3]", "MemoryError"), line
    # Two threads start on the two large images at once, and one of them fails (a skip of it
    # kept rows [1, 2, 3] before); one thread holds one decode at a time: it fits.
    assert lines == ["2 MemoryError", "1 [0, 1, 2, 3]"]
