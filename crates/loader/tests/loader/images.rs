//! Image columns (`BatchSpec::images`): encoded images decoded into `(B, C, H, W)` tensors with
//! their sizes, Hugging Face `Image` structs with path rows, random crops reproducible and
//! resumed exactly, rows that are not images skipped with the batches refilled, and errors that
//! name the row, the column and the file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_dlpack::images::{Crop, ImageSize, ImageSpec, OnError};
use arrow_dlpack_loader::{BatchSpec, Error, Source, TensorBatch, batches};
use arrow_schema::{DataType, Field, Fields};

use crate::data::{chain, collect, reader, values, write_ipc, write_parquet};

/// A PNG of `width` x `height` pixels, each `pixel(x, y)`.
fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    let image = image::RgbImage::from_fn(width, height, |x, y| image::Rgb(pixel(x, y)));
    let mut out = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// The solid colour of row `row`.
fn colour(row: i64) -> [u8; 3] {
    [(row * 10) as u8, 20, (255 - row) as u8]
}

/// A solid image of row `row`, of a size that varies with the row.
fn solid(row: i64) -> Vec<u8> {
    png(8 + row as u32, 6 + (row % 3) as u32, |_, _| colour(row))
}

/// Record batches of `sizes` rows: `image` (binary, `image(row)`) and `label` (the row).
fn image_table(sizes: &[usize], image: impl Fn(i64) -> Vec<u8>) -> Vec<RecordBatch> {
    let mut row = 0i64;
    let mut out = Vec::new();
    for &size in sizes {
        let labels: Vec<i64> = (row..row + size as i64).collect();
        let images: Vec<Vec<u8>> = labels.iter().map(|&label| image(label)).collect();
        let images = BinaryArray::from_iter_values(images.iter());
        out.push(
            RecordBatch::try_from_iter([
                ("image", Arc::new(images) as ArrayRef),
                ("label", Arc::new(Int64Array::from(labels)) as ArrayRef),
            ])
            .unwrap(),
        );
        row += size as i64;
    }
    out
}

fn labels(batches: &[TensorBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|batch| values::<i64>(&batch["label"]))
        .collect()
}

/// Each row's image bytes, by label.
fn images_by_label(batches: &[TensorBatch]) -> BTreeMap<i64, Vec<u8>> {
    let mut out = BTreeMap::new();
    for batch in batches {
        let pixels = values::<u8>(&batch["image"]);
        let labels = values::<i64>(&batch["label"]);
        let per_row = pixels.len() / labels.len().max(1);
        for (at, label) in labels.into_iter().enumerate() {
            out.insert(label, pixels[at * per_row..(at + 1) * per_row].to_vec());
        }
    }
    out
}

/// Asserts that every image of `batches` is the solid colour of its label.
fn assert_solid_colours(batches: &[TensorBatch], side: usize) {
    for (label, pixels) in images_by_label(batches) {
        let expected: Vec<u8> = colour(label)
            .iter()
            .flat_map(|&value| std::iter::repeat_n(value, side * side))
            .collect();
        assert_eq!(pixels, expected, "the image of label {label}");
    }
}

fn image_spec(side: u32) -> ImageSpec {
    ImageSpec::new(ImageSize::square(side))
}

#[test]
fn image_columns_load_as_tensors_with_their_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("train.parquet"),
        &image_table(&[10], solid),
        4,
    );
    let spec = BatchSpec::new(4)
        .columns(["label"])
        .image("image", image_spec(4));
    let got = collect(Source::ParquetFiles(vec![path]), spec);
    assert_eq!(
        got.iter().map(TensorBatch::num_rows).collect::<Vec<_>>(),
        [4, 4, 2]
    );
    assert_eq!(got[0]["image"].shape(), &[4, 3, 4, 4]);
    assert_eq!(got[0]["image_sizes"].shape(), &[4, 2]);
    assert_eq!(labels(&got), (0..10).collect::<Vec<_>>());
    let sizes: Vec<i32> = got
        .iter()
        .flat_map(|b| values::<i32>(&b["image_sizes"]))
        .collect();
    let expected: Vec<i32> = (0..10)
        .flat_map(|row: i32| [6 + row % 3, 8 + row])
        .collect();
    assert_eq!(sizes, expected);
    assert_solid_colours(&got, 4);
    // Every column not in a group: the image column is loaded as images, the label as itself.
    let every = BatchSpec::new(10).image(
        "image",
        image_spec(4).layout(arrow_dlpack::images::Layout::Nhwc),
    );
    let dir_path = dir.path().join("train.parquet");
    let all = collect(Source::ParquetFiles(vec![dir_path]), every);
    assert_eq!(all[0]["image"].shape(), &[10, 4, 4, 3]);
    assert_eq!(values::<i64>(&all[0]["label"]), (0..10).collect::<Vec<_>>());
}

/// Hugging Face's `Image` feature: `struct<bytes: binary, path: string>`, bytes or a path.
fn hugging_face_table(rows: i64) -> RecordBatch {
    let bytes: Vec<Option<Vec<u8>>> = (0..rows)
        .map(|row| (row % 2 == 0).then(|| solid(row)))
        .collect();
    let paths: Vec<Option<String>> = (0..rows)
        .map(|row| (row % 2 == 1).then(|| format!("images/{row}.png")))
        .collect();
    let fields = Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]);
    let bytes: ArrayRef = Arc::new(BinaryArray::from_iter(bytes.iter().map(|b| b.as_deref())));
    let paths: ArrayRef = Arc::new(StringArray::from(paths));
    let image = StructArray::new(fields, vec![bytes, paths], None);
    RecordBatch::try_from_iter([
        ("image", Arc::new(image) as ArrayRef),
        (
            "label",
            Arc::new(Int64Array::from((0..rows).collect::<Vec<_>>())) as ArrayRef,
        ),
    ])
    .unwrap()
}

fn write_images(dir: &Path, rows: i64, image: impl Fn(i64) -> Vec<u8>) {
    std::fs::create_dir_all(dir.join("images")).unwrap();
    for row in (0..rows).filter(|row| row % 2 == 1) {
        std::fs::write(dir.join(format!("images/{row}.png")), image(row)).unwrap();
    }
}

#[test]
fn hugging_face_structs_read_path_rows_from_the_files_directory_or_the_root() {
    let dir = tempfile::tempdir().unwrap();
    write_images(dir.path(), 6, solid);
    let table = hugging_face_table(6);
    let parquet = write_parquet(
        &dir.path().join("hf.parquet"),
        std::slice::from_ref(&table),
        4,
    );
    let ipc = write_ipc(&dir.path().join("hf.arrow"), std::slice::from_ref(&table));
    let spec = BatchSpec::new(3)
        .columns(["label"])
        .image("image", image_spec(2));
    for source in [
        Source::ParquetFiles(vec![parquet.clone()]),
        Source::IpcFiles(vec![ipc]),
    ] {
        let got = collect(source, spec.clone());
        assert_eq!(labels(&got), (0..6).collect::<Vec<_>>());
        assert_solid_colours(&got, 2);
    }
    // `image_root` replaces the file's directory: other images there.
    let other = tempfile::tempdir().unwrap();
    write_images(other.path(), 6, |row| png(3, 3, |_, _| colour(row + 1)));
    let rooted = spec.clone().image_root(other.path().to_str().unwrap());
    let got = collect(Source::ParquetFiles(vec![parquet]), rooted.clone());
    let pixels = images_by_label(&got);
    assert_eq!(pixels[&1][..4], [20, 20, 20, 20]); // colour(2): red 20
    assert_eq!(pixels[&0][..4], [0, 0, 0, 0]); // bytes rows are unchanged
    // A reader has no directory: a relative path needs a root.
    let error = batches(reader(vec![table.clone()]), spec)
        .unwrap()
        .find_map(Result::err)
        .expect("a relative path without a root");
    assert!(
        matches!(error, Error::RelativeImagePath { row: 1, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("\"images/1.png\""), "{error}");
    let got = collect(reader(vec![table]), rooted);
    assert_eq!(labels(&got), (0..6).collect::<Vec<_>>());
}

/// An image whose every pixel differs, so that crops and flips show.
fn gradient(row: i64) -> Vec<u8> {
    png(40, 30, move |x, y| {
        [
            (x * 6) as u8,
            (y * 8) as u8,
            ((x + y) as i64 * 3 + row) as u8,
        ]
    })
}

fn random_spec() -> ImageSpec {
    image_spec(8).crop(Crop::RandomResized).hflip(0.5)
}

#[test]
fn random_crops_are_reproducible_whatever_the_threads_order_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("g.parquet"),
        &image_table(&[24], gradient),
        5,
    );
    let source = || Source::ParquetFiles(vec![path.clone()]);
    let spec = BatchSpec::new(4)
        .columns(["label"])
        .image("image", random_spec());
    let shuffled = spec.clone().shuffle(3).buffer_size(8);
    let first = images_by_label(&collect(source(), shuffled.clone()));
    let again = images_by_label(&collect(source(), shuffled.clone().decode_threads(1)));
    assert_eq!(first.len(), 24);
    assert_eq!(first, again);
    // A row's crop depends on the seed, the epoch and the row, not on the order of the rows.
    let in_order = images_by_label(&collect(source(), spec.clone().seed_of(3)));
    assert_eq!(first, in_order);
    let other_seed = images_by_label(&collect(source(), shuffled.clone().shuffle(4)));
    assert_ne!(first, other_seed);
    let other_epoch = images_by_label(&collect(source(), shuffled.epoch(1)));
    assert_ne!(first, other_epoch);
    // The crops differ between rows (the images differ by 1 in blue only).
    let distinct: std::collections::BTreeSet<Vec<u8>> =
        first.values().map(|pixels| pixels[..64].to_vec()).collect();
    assert!(distinct.len() > 12, "{}", distinct.len());
}

/// `spec` with the seed `seed` and no shuffle.
trait SeedOf {
    fn seed_of(self, seed: u64) -> Self;
}

impl SeedOf for BatchSpec {
    fn seed_of(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// Every tensor's bytes, batch by batch.
fn dump(batches: &[TensorBatch]) -> Vec<Vec<(String, Vec<u8>)>> {
    batches
        .iter()
        .map(|batch| {
            batch
                .tensors()
                .iter()
                .map(|(name, tensor)| {
                    let dense = tensor.to_contiguous().unwrap();
                    let size = dense.dtype().size();
                    let from = dense.offset() * size;
                    let bytes = dense.buffer().as_slice()[from..from + dense.len() * size].to_vec();
                    (name.clone(), bytes)
                })
                .collect()
        })
        .collect()
}

#[test]
fn random_crops_resume_exactly_from_a_saved_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("g.parquet"),
        &image_table(&[23], gradient),
        5,
    );
    let source = || Source::ParquetFiles(vec![path.clone()]);
    for spec in [
        BatchSpec::new(4)
            .columns(["label"])
            .image("image", random_spec()),
        BatchSpec::new(4)
            .columns(["label"])
            .image("image", random_spec())
            .shuffle(9)
            .buffer_size(8),
    ] {
        let whole = collect(source(), spec.clone());
        let mut loader = batches(source(), spec.clone()).unwrap();
        let _ = (loader.next(), loader.next(), loader.next());
        let state = loader.state();
        drop(loader);
        let resumed = collect(source(), spec.clone().state(state));
        assert_eq!(dump(&resumed), dump(&whole[3..]));
    }
}

/// Rows whose bytes are not an image.
const CORRUPT: [i64; 4] = [2, 3, 9, 17];

fn with_corrupt_rows(row: i64) -> Vec<u8> {
    if CORRUPT.contains(&row) {
        let mut truncated = solid(row);
        truncated.truncate(if row % 2 == 0 { 30 } else { 3 });
        return truncated;
    }
    solid(row)
}

#[test]
fn skipped_rows_keep_batches_full_and_labels_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("c.parquet"),
        &image_table(&[20], with_corrupt_rows),
        6,
    );
    let source = || Source::ParquetFiles(vec![path.clone()]);
    let skip = image_spec(3).on_error(OnError::Skip);
    let spec = BatchSpec::new(4).columns(["label"]).image("image", skip);
    let loader = batches(source(), spec.clone()).unwrap();
    assert_eq!(
        loader.len(),
        None,
        "the number of batches is not known in advance"
    );
    let got: Vec<TensorBatch> = loader.collect::<Result<_, _>>().unwrap();
    let decodable: Vec<i64> = (0..20).filter(|row| !CORRUPT.contains(row)).collect();
    assert_eq!(
        got.iter().map(TensorBatch::num_rows).collect::<Vec<_>>(),
        [4, 4, 4, 4]
    );
    assert_eq!(labels(&got), decodable);
    assert_solid_colours(&got, 3);
    // A resumed run skips the same rows.
    let mut loader = batches(source(), spec.clone()).unwrap();
    let _ = loader.next();
    let state = loader.state();
    drop(loader);
    let resumed = collect(source(), spec.clone().state(state));
    assert_eq!(dump(&resumed), dump(&got[1..]));
    // With drop_last, a last batch that the skips leave short is dropped.
    let short = collect(source(), spec.clone().batch_size_of(5).drop_last(true));
    assert_eq!(labels(&short), decodable[..15].to_vec());
    // Shuffled, a batch loses its skipped rows: the batches are those cut in advance, as many
    // as the rows make.
    let shuffled = spec.clone().shuffle(1).buffer_size(8);
    let loader = batches(source(), shuffled.clone()).unwrap();
    assert_eq!(loader.len(), Some(5));
    let got: Vec<TensorBatch> = loader.collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), 5);
    let mut kept = labels(&got);
    kept.sort_unstable();
    assert_eq!(kept, decodable);
    assert!(got.iter().any(|batch| batch.num_rows() < 4));
    assert_solid_colours(&got, 3);
}

trait BatchSizeOf {
    fn batch_size_of(self, batch_size: usize) -> Self;
}

impl BatchSizeOf for BatchSpec {
    fn batch_size_of(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }
}

#[test]
fn an_image_that_cannot_be_decoded_names_its_row_column_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("c.parquet"),
        &image_table(&[20], with_corrupt_rows),
        6,
    );
    let spec = BatchSpec::new(4)
        .columns(["label"])
        .image("image", image_spec(3));
    let results: Vec<_> = batches(Source::ParquetFiles(vec![path.clone()]), spec)
        .unwrap()
        .collect();
    assert_eq!(results.len(), 1);
    let error = results.into_iter().next().unwrap().unwrap_err();
    let expected = format!(
        "cannot decode image at row 2 of column \"image\" in {}",
        path.display()
    );
    assert_eq!(error.to_string(), expected);
    assert!(chain(&error).len() > expected.len(), "{}", chain(&error));
}

#[test]
fn an_image_spec_is_recorded_in_the_state_and_its_names_are_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("s.parquet"), &image_table(&[8], solid), 4);
    let source = || Source::ParquetFiles(vec![path.clone()]);
    let spec = BatchSpec::new(2)
        .columns(["label"])
        .image("image", image_spec(3));
    let mut loader = batches(source(), spec.clone()).unwrap();
    let _ = loader.next();
    let state = loader.state();
    drop(loader);
    let other = BatchSpec::new(2)
        .columns(["label"])
        .image("image", image_spec(4))
        .state(state);
    let error = batches(source(), other).err().unwrap();
    assert!(error.to_string().contains("images[\"image\"]"), "{error}");
    // The sizes tensor's name is claimed: a column of that name cannot be loaded beside it.
    let claimed = BatchSpec::new(2)
        .columns(["label", "image_sizes"])
        .image("image", image_spec(3));
    let error = claimed.validate().unwrap_err();
    assert!(error.to_string().contains("claimed twice"), "{error}");
    // A column of another type is refused, naming the types expected.
    let label = BatchSpec::new(2)
        .columns(Vec::<String>::new())
        .image("label", image_spec(3));
    let error = batches(source(), label).err().unwrap();
    assert!(error.to_string().contains("binary"), "{error}");
}
