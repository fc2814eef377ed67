"""``ad.decode_images``: encoded image columns decoded into one tensor, checked against PIL and
torchvision on generated photographs of every format.

PIL decides what the right pixels are: ``Image.open(...).convert(mode)``, ``resize`` with the
same filter, ``crop``. Photographs (gradients, noise, shapes, written with PIL at quality 90)
stay within 3 levels of 255 in mean absolute difference for every interpolation; lossless
formats decoded at their own size equal PIL's pixels exactly.
"""

import io
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch
from PIL import Image, ImageOps

import arrow_dlpack as ad

FILTERS = {
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    "nearest": Image.Resampling.NEAREST,
}

# Formats PIL writes, with the options that make photographs (lossy ones at quality 90).
FORMATS = {
    "jpeg": ("JPEG", {"quality": 90}),
    "jpeg_progressive": ("JPEG", {"quality": 90, "progressive": True}),
    "png": ("PNG", {}),
    "webp": ("WEBP", {"quality": 90}),
    "webp_lossless": ("WEBP", {"lossless": True}),
    "gif": ("GIF", {}),
    "bmp": ("BMP", {}),
}


def photo(width, height, seed=0):
    """A photograph-like RGB image: gradients, noise and a few shapes."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    image = np.stack(
        [x * 255 / width, y * 255 / height, 60 + (x + y) * 127 / (width + height)], axis=-1
    )
    image += rng.normal(0, 10, (height, width, 3))
    image[height // 4 : height // 2, width // 3 : width // 2] = (200, 30, 90)
    cy, cx, r = height * 0.6, width * 0.7, min(width, height) / 5
    image[(y - cy) ** 2 + (x - cx) ** 2 < r**2] = (20, 160, 220)
    return np.clip(image, 0, 255).astype(np.uint8)


def encode(image, fmt, **options):
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def encoded(name, width=160, height=120, seed=0):
    fmt, options = FORMATS[name]
    image = Image.fromarray(photo(width, height, seed))
    if fmt == "GIF":
        # A GIF holds 256 colours: PIL's palette conversion, then the same palette as PIL reads it.
        image = image.convert("P", palette=Image.Palette.ADAPTIVE)
    return encode(image, fmt, **options)


def reference(data, size, resize=None, crop="center", mode="RGB", interpolation="bilinear"):
    """PIL's pipeline: open, convert, resize the shorter side, centre crop (or resize straight to
    the size), as (C, H, W)."""
    image = Image.open(io.BytesIO(data))
    image = ImageOps.exif_transpose(image).convert(mode)
    height, width = (size, size) if isinstance(size, int) else size
    if crop == "none":
        image = image.resize((width, height), FILTERS[interpolation])
    else:
        shorter = resize or min(height, width)
        w, h = image.size
        new = (shorter, int(shorter * h / w)) if w <= h else (int(shorter * w / h), shorter)
        image = image.resize(new, FILTERS[interpolation])
        left = int(round((new[0] - width) / 2.0))
        top = int(round((new[1] - height) / 2.0))
        image = image.crop((left, top, left + width, top + height))
    pixels = np.asarray(image)
    return pixels[None] if pixels.ndim == 2 else pixels.transpose(2, 0, 1)


def decoded(column, size, **options):
    out = ad.decode_images(column, size, **options)
    return np.from_dlpack(out.images), np.from_dlpack(out.sizes), np.from_dlpack(out.rows)


def mean_difference(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return np.abs(a.astype(np.int32) - b.astype(np.int32)).mean()


@pytest.mark.parametrize("interpolation", FILTERS)
@pytest.mark.parametrize("name", FORMATS)
def test_matches_pil_within_3_levels_for_every_format_and_interpolation(name, interpolation):
    data = encoded(name)
    images, sizes, rows = decoded(pa.array([data]), 64, resize=80, interpolation=interpolation)
    assert images.shape == (1, 3, 64, 64) and images.dtype == np.uint8
    assert sizes.tolist() == [[120, 160]]
    assert rows.tolist() == [0]
    expected = reference(data, 64, resize=80, interpolation=interpolation)
    assert mean_difference(images[0], expected) <= 3.0


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "lanczos"])
def test_upscaling_and_non_square_sizes_match_pil(interpolation):
    data = encoded("png", 40, 30)
    for crop, size in [("none", (50, 70)), ("center", (90, 60))]:
        images, _, _ = decoded(pa.array([data]), size, crop=crop, interpolation=interpolation)
        expected = reference(data, size, crop=crop, interpolation=interpolation)
        assert mean_difference(images[0], expected) <= 1.0, crop


def lossless_cases():
    rgb = photo(37, 23)
    rgba = np.dstack([rgb, (np.arange(37 * 23) % 256).reshape(23, 37).astype(np.uint8)])
    palette = Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    palette_alpha = palette.copy()
    palette_alpha.info["transparency"] = 3
    grey16 = Image.fromarray((np.arange(37 * 23).reshape(23, 37) * 97).astype(np.uint16))
    rgb16 = Image.fromarray(rgb)  # widened below through the PNG encoder of 16-bit RGB
    return {
        "png_rgb": encode(Image.fromarray(rgb), "PNG"),
        "png_rgba": encode(Image.fromarray(rgba), "PNG"),
        "png_grey": encode(Image.fromarray(rgb).convert("L"), "PNG"),
        "png_palette_alpha": encode(palette_alpha, "PNG"),
        "png_grey_16bit": encode(grey16, "PNG"),
        "png_rgb_16bit": png_rgb16(np.asarray(rgb16)),
        "bmp": encode(Image.fromarray(rgb), "BMP"),
        "gif": encode(palette, "GIF"),
        "webp_lossless": encode(Image.fromarray(rgba), "WEBP", lossless=True),
    }


def png_rgb16(rgb):
    """A 16-bit RGB PNG whose samples are ``value * 257 + row`` (PIL keeps the high byte)."""
    import zlib

    height, width, _ = rgb.shape
    samples = rgb.astype(">u2") * 257 + np.arange(height, dtype=">u2")[:, None, None]
    raw = b"".join(b"\x00" + samples[row].tobytes() for row in range(height))

    def chunk(kind, body):
        return (
            len(body).to_bytes(4, "big")
            + kind
            + body
            + (zlib.crc32(kind + body) & 0xFFFFFFFF).to_bytes(4, "big")
        )

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([16, 2, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
@pytest.mark.parametrize("name", list(lossless_cases()))
def test_lossless_formats_equal_pil_at_their_own_size(name, mode):
    data = lossless_cases()[name]
    width, height = Image.open(io.BytesIO(data)).size
    images, sizes, _ = decoded(pa.array([data]), (height, width), crop="none", mode=mode)
    expected = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
    expected = expected[None] if expected.ndim == 2 else expected.transpose(2, 0, 1)
    assert sizes.tolist() == [[height, width]]
    np.testing.assert_array_equal(images[0], expected)


def jpeg_with_orientation(orientation):
    image = Image.fromarray(photo(48, 32))
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(image, "JPEG", quality=95, exif=exif.tobytes())


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientations_come_out_upright_as_pil_transposes_them(orientation):
    data = jpeg_with_orientation(orientation)
    upright = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    width, height = upright.size
    images, sizes, _ = decoded(pa.array([data]), (height, width), crop="none")
    assert sizes.tolist() == [[height, width]]
    assert mean_difference(images[0], np.asarray(upright).transpose(2, 0, 1)) <= 1.0
    # Without the transpose, the stored orientation.
    raw = Image.open(io.BytesIO(data)).convert("RGB")
    images, sizes, _ = decoded(pa.array([data]), raw.size[::-1], crop="none", exif_transpose=False)
    assert sizes.tolist() == [list(raw.size[::-1])]
    assert mean_difference(images[0], np.asarray(raw).transpose(2, 0, 1)) <= 1.0


def test_cmyk_and_greyscale_jpegs_match_pil():
    rgb = Image.fromarray(photo(64, 48))
    for image in [rgb.convert("CMYK"), rgb.convert("L")]:
        data = encode(image, "JPEG", quality=90)
        for mode in ["RGB", "L", "RGBA"]:
            images, _, _ = decoded(pa.array([data]), (48, 64), crop="none", mode=mode)
            expected = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
            expected = expected[None] if expected.ndim == 2 else expected.transpose(2, 0, 1)
            assert mean_difference(images[0], expected) <= 3.0, (image.mode, mode)


def test_matches_torchvision_decode_jpeg_and_v2_resize():
    from torchvision.io import decode_jpeg
    from torchvision.transforms import v2

    data = encoded("jpeg", 200, 150, seed=3)
    images, _, _ = decoded(pa.array([data]), 112, resize=128)
    pipeline = v2.Compose([v2.Resize(128, antialias=True), v2.CenterCrop(112)])
    expected = pipeline(decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8)))
    assert mean_difference(images[0], expected.numpy()) <= 3.0


def test_layouts_and_normalised_float32_follow_the_uint8_pixels():
    column = pa.array([encoded("png", 50, 40, seed) for seed in range(3)])
    nchw, _, _ = decoded(column, 32)
    nhwc, _, _ = decoded(column, 32, layout="NHWC")
    np.testing.assert_array_equal(nhwc, nchw.transpose(0, 2, 3, 1))
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    floats, _, _ = decoded(column, 32, dtype="float32", mean=mean, std=std)
    assert floats.dtype == np.float32 and floats.shape == (3, 3, 32, 32)
    expected = (nchw / np.float32(255) - np.array(mean, np.float32)[:, None, None]) / np.array(
        std, np.float32
    )[:, None, None]
    np.testing.assert_allclose(floats, expected, rtol=1e-6, atol=1e-6)
    plain, _, _ = decoded(column, 32, dtype="float32")
    np.testing.assert_allclose(plain, nchw / np.float32(255), rtol=1e-6)


def test_pad_keeps_the_aspect_ratio_around_the_pad_value():
    data = encoded("png", 80, 40)
    images, sizes, _ = decoded(pa.array([data]), 60, crop="pad", pad_value=7)
    assert sizes.tolist() == [[40, 80]]
    # 80 x 40 scaled by 0.75 to 60 x 30, 15 rows of padding above and below.
    assert (images[0, :, :15] == 7).all() and (images[0, :, 45:] == 7).all()
    inner = np.asarray(
        Image.open(io.BytesIO(data)).convert("RGB").resize((60, 30), Image.Resampling.BILINEAR)
    )
    assert mean_difference(images[0, :, 15:45], inner.transpose(2, 0, 1)) <= 1.0


def test_random_crops_and_flips_are_reproducible_from_the_seed():
    column = pa.array([encoded("jpeg", 90, 70, seed) for seed in range(6)])
    options = dict(crop="random_resized", hflip=0.5, seed=11)
    first, _, _ = decoded(column, 32, **options)
    again, _, _ = decoded(column, 32, threads=1, **options)
    np.testing.assert_array_equal(first, again)
    other, _, _ = decoded(column, 32, **{**options, "seed": 12})
    assert not np.array_equal(first, other)
    # Each row draws from its own generator: a row decoded alone draws what it drew in the batch.
    alone, _, _ = decoded(column.slice(2, 1), 32, **options)
    assert not np.array_equal(alone[0], first[2])  # its key is its row in the column it is in
    # A flip probability of 1 mirrors every image.
    straight, _, _ = decoded(column, 32, crop="none")
    flipped, _, _ = decoded(column, 32, crop="none", hflip=1.0)
    np.testing.assert_array_equal(flipped, straight[..., ::-1])


def test_random_crops_are_windows_of_the_resized_image():
    data = encoded("png", 60, 40)
    resized = np.asarray(
        Image.open(io.BytesIO(data)).convert("RGB").resize((60, 40), Image.Resampling.BILINEAR)
    ).transpose(2, 0, 1)
    column = pa.array([data] * 20)
    images, _, _ = decoded(column, 24, resize=40, crop="random", seed=5)
    offsets = set()
    for image in images:
        found = [
            (top, left)
            for top in range(40 - 24 + 1)
            for left in range(60 - 24 + 1)
            if np.array_equal(image, resized[:, top : top + 24, left : left + 24])
        ]
        assert found, "a random window is not a window of the resized image"
        offsets.add(found[0])
    assert len(offsets) > 5


def test_skip_drops_bad_rows_and_reports_the_rows_kept():
    good = encoded("png", 30, 20)
    column = pa.array([good, None, b"not an image", good[:40], good])
    images, sizes, rows = decoded(column, 16, on_error="skip")
    assert rows.tolist() == [0, 4]
    assert images.shape == (2, 3, 16, 16)
    assert sizes.tolist() == [[20, 30], [20, 30]]
    np.testing.assert_array_equal(images[0], images[1])


def test_errors_name_the_row_and_the_column():
    good = encoded("png", 30, 20)
    column = pa.array([good] * 1500 + [None])
    with pytest.raises(ValueError, match=r'^cannot decode image at row 1,500 of column "image": '
                       r'the row is null; expected encoded bytes or a path \(on_error="skip"'):
        ad.decode_images(column, 8, name="image")
    table = pa.table({"photo": [good, b"\x89PNG\r\n\x1a\n garbage"]})
    with pytest.raises(ad.ArrowDLPackValueError,
                       match=r'^cannot decode image at row 1 of column "photo": malformed PNG data: '):
        ad.decode_images(table["photo"], 8, name="photo")
    with pytest.raises(ValueError, match=r"unknown image format \(the data starts with \[00, 01\]\)"):
        ad.decode_images(pa.array([b"\x00\x01"]), 8)


def test_options_are_checked_with_the_keyword_names():
    column = pa.array([encoded("png", 8, 8)])
    cases = [
        (dict(size=0), ValueError, r"invalid size: expected a height and a width of at least 1"),
        (dict(size=(2, 3, 4)), TypeError, r"size has 3 items"),
        (dict(size=8, crop="middle"), ValueError, r'invalid crop: expected one of "center"'),
        (dict(size=8, hflip=2.0), ValueError, r"invalid hflip"),
        (dict(size=8, dtype="float32", mean=[0.5], std=[0.5]), ValueError,
         r"invalid mean: expected one value per channel of mode RGB \(3\), found 1"),
        (dict(size=8, mean=[0.5] * 3, std=[0.5] * 3), ValueError, r"applies to dtype float32"),
        (dict(size=8, scale=(1.0, 0.5)), ValueError, r"invalid scale"),
        (dict(size=8, pad_value=300), ValueError, r"pad_value is 300"),
        (dict(size=8, mode=3), TypeError, r"mode is int; expected str"),
        (dict(size=8, colour="RGB"), TypeError, r"unexpected keyword argument 'colour'|\"colour\""),
        (dict(size=8, threads=0), ValueError, r"threads is 0; expected a positive int"),
    ]
    for options, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            ad.decode_images(column, **options)
    with pytest.raises(TypeError, match="Arrow PyCapsule"):
        ad.decode_images([b"x"], 8)
    with pytest.raises(TypeError, match=r"cannot read int64 as encoded images"):
        ad.decode_images(pa.array([1]), 8)


def test_defaults_list_every_spec_key_and_the_stub_names_them():
    defaults = dict(ad._arrow_dlpack._IMAGE_SPEC_DEFAULTS)
    assert defaults == {
        "resize": None, "crop": "center", "scale": (0.08, 1.0), "ratio": (0.75, 4 / 3),
        "pad_value": 0, "hflip": 0.0, "mode": "RGB", "layout": "NCHW", "dtype": "uint8",
        "mean": None, "std": None, "interpolation": "bilinear", "exif_transpose": True,
        "on_error": "raise", "max_pixels": 89_478_485,
    }
    # Every key is accepted with its default value, and gives the default output.
    column = pa.array([encoded("png", 20, 10)])
    base, _, _ = decoded(column, 8)
    with_defaults, _, _ = decoded(column, 8, **defaults)
    np.testing.assert_array_equal(base, with_defaults)
    # The stub's keyword-only parameters are the spec keys and the call's own options.
    stub = (
        __import__("pathlib").Path(ad.__file__).with_name("_arrow_dlpack.pyi").read_text()
    )
    start = stub.index("def decode_images(")
    signature = stub[start : stub.index(") -> DecodedImages", start)]
    names = [line.strip().split(":")[0] for line in signature.splitlines()[1:] if ":" in line]
    assert names == ["column", "size", *defaults, "seed", "threads", "image_root", "name"]


def test_every_column_type_and_producer():
    good = [encoded("png", 20, 10, seed) for seed in range(3)]
    expected, _, _ = decoded(pa.array(good), 8)
    columns = [
        pa.array(good, pa.large_binary()),
        pa.array(good, pa.binary_view()),
        pa.chunked_array([good[:1], good[1:]]),
        pl.Series("image", good),
        ad.array(pa.array(good)),
    ]
    for column in columns:
        images, _, rows = decoded(column, 8)
        np.testing.assert_array_equal(images, expected)
        assert rows.tolist() == [0, 1, 2]


def test_hugging_face_image_structs_read_bytes_or_paths(tmp_path):
    good = [encoded("png", 20, 10, seed) for seed in range(3)]
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.png").write_bytes(good[1])
    column = pa.array(
        [
            {"bytes": good[0], "path": "ignored.png"},
            {"bytes": None, "path": "sub/b.png"},
            {"bytes": good[2], "path": None},
        ],
        pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    )
    expected, _, _ = decoded(pa.array(good), 8)
    images, _, _ = decoded(column, 8, image_root=str(tmp_path))
    np.testing.assert_array_equal(images, expected)
    with pytest.raises(ValueError, match=r'row 1: cannot read image file ".*sub/b.png"'):
        ad.decode_images(column, 8)


def test_empty_columns_give_empty_tensors():
    images, sizes, rows = decoded(pa.array([], pa.binary()), (4, 5), layout="NHWC", mode="L")
    assert images.shape == (0, 4, 5, 1) and sizes.shape == (0, 2) and rows.shape == (0,)


def test_decompression_bombs_are_refused_from_their_header_without_allocating():
    """A PNG and a JPEG whose headers claim 100,000 x 100,000 and 65,000 x 65,000 pixels are
    refused in a child process whose address space (4 GiB) could never hold their pixels."""
    script = textwrap.dedent(
        """
        import resource, struct, zlib
        import pyarrow as pa
        import arrow_dlpack as ad
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

        def chunk(kind, body):
            return struct.pack(">I", len(body)) + kind + body + struct.pack(
                ">I", zlib.crc32(kind + body))

        png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
               + chunk(b"IDAT", zlib.compress(b"\\x00" * 1000)) + chunk(b"IEND", b""))
        import io
        from PIL import Image
        small = io.BytesIO()
        Image.new("RGB", (16, 16)).save(small, "JPEG")
        jpeg = bytearray(small.getvalue())
        sof = jpeg.index(b"\\xff\\xc0")
        jpeg[sof + 5 : sof + 9] = struct.pack(">HH", 65000, 65000)
        jpeg = bytes(jpeg)
        for data in [png, jpeg]:
            try:
                ad.decode_images(pa.array([data]), 8)
            except ValueError as error:
                print(error)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [
        'cannot decode image at row 0: image of 100000 x 100000 pixels is refused; '
        "expected at least 1 and at most 89478485 pixels (max_pixels=)",
        'cannot decode image at row 0: image of 65000 x 65000 pixels is refused; '
        "expected at least 1 and at most 89478485 pixels (max_pixels=)",
    ]


def test_the_guide_example_runs():
    """The Python example of docs/images.md, run as written (its asserts check the output)."""
    from pathlib import Path

    guide = Path(__file__).resolve().parents[3] / "docs" / "images.md"
    text = guide.read_text()
    start = text.index("```python\n") + len("```python\n")
    code = text[start : text.index("```", start)]
    exec(compile(code, str(guide), "exec"), {})


@pytest.mark.parametrize("name", ["jpeg", "jpeg_progressive"])
@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.9])
def test_a_truncated_jpeg_is_refused_as_pil_refuses_it(name, fraction):
    data = encoded(name)
    cut = data[: int(len(data) * fraction)]
    with pytest.raises(OSError, match="truncated"):
        Image.open(io.BytesIO(cut)).convert("RGB")
    with pytest.raises(ValueError, match=r"row 0 of column .*truncated"):
        ad.decode_images(pa.array([cut]), 16, name="image")
    # Skipped instead of filled with grey; the whole file still decodes.
    out = ad.decode_images(pa.array([cut, data]), 16, on_error="skip")
    assert np.from_dlpack(out.rows).tolist() == [1]


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
def test_transparent_gif_pixels_keep_their_palette_colour_as_pil_gives_them(mode):
    indices = np.zeros((4, 6), np.uint8)
    indices[:, 3:] = 1
    indices[0, 0] = 2
    image = Image.fromarray(indices, "P")
    image.putpalette([10, 20, 30, 200, 100, 50, 7, 8, 9] + [0] * 759)
    data = encode(image, "GIF", transparency=1)
    expected = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
    out = ad.decode_images(pa.array([data]), (4, 6), crop="none", mode=mode, layout="NHWC")
    got = np.from_dlpack(out.images)[0]
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)
    # The transparent index's colour, not black.
    assert expected.reshape(4, 6, -1)[0, 3, 0] != 0
