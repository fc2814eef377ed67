//! `arrow_dlpack::images` end to end: columns of encoded images (made here with the `image`
//! crate's encoders) decoded into one tensor, rows skipped or reported, draws keyed by row.

use std::io::Cursor;
use std::num::NonZeroUsize;

use arrow_array::{BinaryArray, StringArray, StructArray};
use arrow_dlpack::Error;
use arrow_dlpack::images::{
    Crop, DecodeOptions, ImageDType, ImageRow, ImageSize, ImageSource, ImageSpec, Layout, OnError,
    decode_images, decode_rows, image_sources, row_key,
};

/// A `width` x `height` RGB image whose pixels encode their position, as PNG.
fn png(width: u32, height: u32, seed: u8) -> Vec<u8> {
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x * 7) as u8 ^ seed, (y * 5) as u8, seed.wrapping_mul(3)])
    });
    let mut out = Vec::new();
    pixels
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

fn threads(n: usize) -> DecodeOptions {
    DecodeOptions::default().threads(NonZeroUsize::new(n).unwrap())
}

#[test]
fn decodes_at_own_size_exactly_in_both_layouts() {
    let data = png(5, 3, 1);
    let column = BinaryArray::from_vec(vec![data.as_slice()]);
    let spec = ImageSpec::new(ImageSize::new(3, 5)).crop(Crop::None);
    let nchw = decode_images("image", &[&column], &spec, &threads(1)).unwrap();
    let expected = image::load_from_memory(&data).unwrap().to_rgb8();
    let nchw = nchw.images.as_slice::<u8>().unwrap().to_vec();
    for (x, y, pixel) in expected.enumerate_pixels() {
        for channel in 0..3 {
            let index = channel * 15 + y as usize * 5 + x as usize;
            assert_eq!(nchw[index], pixel[channel], "({x}, {y}, {channel})");
        }
    }
    let spec = spec.layout(Layout::Nhwc);
    let nhwc = decode_images("image", &[&column], &spec, &threads(1)).unwrap();
    assert_eq!(nhwc.images.shape(), &[1, 3, 5, 3]);
    assert_eq!(
        nhwc.images.as_slice::<u8>().unwrap(),
        expected.as_raw().as_slice()
    );
}

#[test]
fn skip_drops_null_and_malformed_rows_and_keeps_order() {
    let good = [png(8, 6, 1), png(6, 8, 2)];
    let column = BinaryArray::from_opt_vec(vec![
        Some(good[0].as_slice()),
        None,
        Some(b"\x89PNG\r\n\x1a\nbroken".as_slice()),
        Some(good[1].as_slice()),
    ]);
    let spec = ImageSpec::new(ImageSize::square(4)).on_error(OnError::Skip);
    let decoded = decode_images("image", &[&column], &spec, &threads(3)).unwrap();
    assert_eq!(decoded.rows.as_slice::<i64>().unwrap(), &[0, 3]);
    assert_eq!(decoded.sizes.as_slice::<i32>().unwrap(), &[6, 8, 8, 6]);
    assert_eq!(decoded.images.shape(), &[2, 3, 4, 4]);
    let alone = decode_images(
        "image",
        &[&BinaryArray::from_vec(vec![good[1].as_slice()])],
        &spec,
        &threads(1),
    )
    .unwrap();
    assert_eq!(
        &decoded.images.as_slice::<u8>().unwrap()[48..],
        alone.images.as_slice::<u8>().unwrap()
    );
}

#[test]
fn raise_names_the_first_failing_row_whatever_the_threads() {
    let good = png(4, 4, 0);
    let mut rows: Vec<Option<&[u8]>> = vec![Some(good.as_slice()); 40];
    // A GIF header whose logical screen, read from "-truncat", is 29,741 x 30,066 pixels.
    rows[17] = Some(b"GIF89a-truncated");
    rows[33] = None;
    let column = BinaryArray::from_opt_vec(rows);
    let spec = ImageSpec::new(ImageSize::square(2));
    for n in [1, 2, 4, 8] {
        let error = decode_images("photo", &[&column], &spec, &threads(n)).unwrap_err();
        let Error::ImageRow {
            row,
            column,
            source,
        } = &error
        else {
            panic!("expected ImageRow, found {error:?}");
        };
        assert_eq!((*row, column.as_str()), (17, "photo"));
        assert!(
            matches!(
                **source,
                Error::ImageSize {
                    width: 29741,
                    height: 30066,
                    ..
                }
            ),
            "{source:?}"
        );
        assert_eq!(
            error.to_string(),
            "cannot decode image at row 17 of column \"photo\""
        );
    }
}

#[test]
fn random_draws_follow_the_row_keys_not_the_order() {
    let data: Vec<Vec<u8>> = (0..6).map(|seed| png(40, 30, seed)).collect();
    let spec = ImageSpec::new(ImageSize::square(8))
        .crop(Crop::RandomResized)
        .hflip(0.5);
    let rows = |order: &[usize]| -> Vec<ImageRow<'_>> {
        order
            .iter()
            .map(|&index| ImageRow {
                source: ImageSource::Bytes(&data[index]),
                row: index as u64,
                key: row_key(3, 0, index as u64),
            })
            .collect()
    };
    let options = threads(2).seed(9);
    let forward = decode_rows("image", &rows(&[0, 1, 2, 3, 4, 5]), &spec, &options).unwrap();
    let backward = decode_rows("image", &rows(&[5, 4, 3, 2, 1, 0]), &spec, &options).unwrap();
    let image = |decoded: &arrow_dlpack::images::DecodedImages, index: usize| {
        decoded.images.as_slice::<u8>().unwrap()[index * 192..(index + 1) * 192].to_vec()
    };
    for index in 0..6 {
        assert_eq!(image(&forward, index), image(&backward, 5 - index));
    }
    let other = decode_rows(
        "image",
        &rows(&[0, 1, 2, 3, 4, 5]),
        &spec,
        &options.seed(10),
    )
    .unwrap();
    assert!((0..6).any(|index| image(&forward, index) != image(&other, index)));
}

#[test]
fn float32_normalises_each_channel() {
    let data = png(4, 4, 5);
    let column = BinaryArray::from_vec(vec![data.as_slice()]);
    let spec = ImageSpec::new(ImageSize::square(4)).crop(Crop::None);
    let bytes = decode_images("image", &[&column], &spec, &threads(1)).unwrap();
    let (mean, std) = (vec![0.5, 0.25, 0.0], vec![0.5, 2.0, 1.0]);
    let spec = spec
        .dtype(ImageDType::Float32)
        .mean(mean.clone())
        .std(std.clone());
    let floats = decode_images("image", &[&column], &spec, &threads(1)).unwrap();
    let floats = floats.images.as_slice::<f32>().unwrap();
    for (index, &value) in bytes.images.as_slice::<u8>().unwrap().iter().enumerate() {
        let channel = index / 16;
        let expected = (f32::from(value) / 255.0 - mean[channel]) / std[channel];
        assert_eq!(floats[index], expected, "{index}");
    }
}

#[test]
fn struct_rows_read_their_path_against_the_image_root() {
    let directory =
        std::env::temp_dir().join(format!("arrow-dlpack-images-{}", std::process::id()));
    std::fs::create_dir_all(directory.join("sub")).unwrap();
    let data = png(4, 2, 3);
    std::fs::write(directory.join("sub/a.png"), &data).unwrap();
    let bytes = BinaryArray::from_opt_vec(vec![None, None]);
    let paths = StringArray::from(vec![Some("sub/a.png"), Some("sub/missing.png")]);
    let column = StructArray::from(vec![
        (
            std::sync::Arc::new(arrow_schema::Field::new(
                "bytes",
                arrow_schema::DataType::Binary,
                true,
            )),
            std::sync::Arc::new(bytes) as arrow_array::ArrayRef,
        ),
        (
            std::sync::Arc::new(arrow_schema::Field::new(
                "path",
                arrow_schema::DataType::Utf8,
                true,
            )),
            std::sync::Arc::new(paths) as arrow_array::ArrayRef,
        ),
    ]);
    assert_eq!(
        image_sources(&column).unwrap()[0],
        ImageSource::Path("sub/a.png")
    );
    let spec = ImageSpec::new(ImageSize::new(2, 4))
        .crop(Crop::None)
        .on_error(OnError::Skip);
    let options = threads(2).image_root(&directory);
    let decoded = decode_images("image", &[&column], &spec, &options).unwrap();
    assert_eq!(decoded.rows.as_slice::<i64>().unwrap(), &[0]);
    let error = decode_images(
        "image",
        &[&column],
        &spec.on_error(OnError::Raise),
        &options,
    )
    .unwrap_err();
    let messages = arrow_dlpack::error_messages(&error);
    assert_eq!(
        messages[0],
        "cannot decode image at row 1 of column \"image\""
    );
    assert!(
        messages[1].starts_with("cannot read image file"),
        "{messages:?}"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}
