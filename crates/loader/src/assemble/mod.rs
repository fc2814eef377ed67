//! One batch from runs of rows: zero-copy views when the batch lies inside one record batch,
//! otherwise one fresh allocation per tensor, written in one pass from the record batches.
//!
//! The copies work per run of rows, with the record batch looked up once per run: a byte copy
//! for a column that has a tensor view, the byte kernel of [`row_copy`] for the columns of a
//! group that already have the group's dtype (a shuffled batch's runs are a row each), and
//! `arrow_dlpack::write_rows`, the kernel of `Tensor.from_arrow`, for long runs and for the
//! columns that need a conversion, one call per run at its row offset.
//! What a copy needs from a record batch (its views) is worked out once per [`Piece`], on first
//! use, and kept with it, so that a piece of a shuffle window that gives rows to many batches is
//! viewed once, and a batch costs time in its rows and runs, not in the pieces of the window.

use std::convert::Infallible;

use arrow_array::{Array, ArrayRef, RecordBatch, cast::AsArray};
use arrow_dlpack::{
    ArrayToTensorOptions, RowsDestination, Table, TableToTensorOptions, WriteRowsOptions,
    array_to_tensor, columns_to_tensor, write_rows,
};
use arrow_dlpack_tensor::alloc::{PooledVec, UninitBuffer};
use arrow_dlpack_tensor::{DType, Tensor};

use crate::columns::{Columns, Output, view};
use crate::sequences::tensors::{run_of, sequence_tensors};
use crate::{BatchSpec, Error, Result, TensorBatch};
use nulls::{check_no_nulls, copy_mask, place_nulls};

mod group_view;
#[cfg(feature = "images")]
mod images;
mod nulls;
mod row_copy;
pub(crate) mod writable;

use group_view::strided_group_view;
#[cfg(feature = "images")]
pub(crate) use images::{assemble_decoded, decode_filling, decode_runs};
use row_copy::{copy_bytes, copy_runs, copy_strided};

/// Runs of a group of at least this many rows are written by `write_rows`, whose blocked
/// transposition beats element-by-element copies on long runs; shorter runs are gathered.
const WRITE_ROWS_MIN_RUN: usize = 64;

/// `len` rows of piece `piece` from row `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) piece: usize,
    pub(crate) start: usize,
    pub(crate) len: usize,
}

/// A record batch that runs point into, and what the copies need from it, per output: worked
/// out on first use and kept as long as the piece.
pub(crate) struct Piece {
    batch: RecordBatch,
    /// Where the record batch's rows are, for messages: the shard's item and the index of its
    /// first row among the item's rows (`None` for record batches collated on their own).
    origin: Option<(u64, u64)>,
    /// Write each group's rows row-major once, on first use: a piece of a shuffle window, whose
    /// rows are drawn one at a time.
    stage_groups: bool,
    /// One slot per output of the [`Columns`], filled on the first copy that reads the output.
    sources: Vec<Option<Source>>,
}

/// What the copy of one output reads from one piece.
enum Source {
    /// A `Values` output: the view of the column, whose row `r` is the row's bytes at `r` rows
    /// from the view's offset, and whether the column holds nulls (then each run is checked).
    Rows { view: Tensor, has_nulls: bool },
    /// A group written row-major into `rows` (its values those of `write_rows`), so that a row is
    /// one run of bytes: one cache line to fetch for a shuffled row rather than one per column.
    Staged { rows: arrow_buffer::Buffer },
    /// A group: its columns, and their flat views when every column has the group's dtype and no
    /// nulls, so that its values are copied as bytes.
    Group {
        arrays: Vec<ArrayRef>,
        views: Option<Vec<Tensor>>,
    },
}

impl Piece {
    /// A piece whose sources are not worked out yet, for batches that take its rows in runs.
    pub(crate) fn new(batch: RecordBatch) -> Self {
        Piece {
            batch,
            origin: None,
            stage_groups: false,
            sources: Vec::new(),
        }
    }

    /// The piece, its rows being those of item `item` from row `first` on.
    pub(crate) fn at(self, item: u64, first: u64) -> Self {
        Piece {
            origin: Some((item, first)),
            ..self
        }
    }

    /// A piece of a shuffle window, whose rows are drawn one at a time: its groups are written
    /// row-major once, the first time a batch draws from it, so that a row's values are one run
    /// of bytes. The copy costs what an in-order batch's copy of the same rows does, and the
    /// window holds it as long as the piece.
    pub(crate) fn for_shuffle(batch: RecordBatch) -> Self {
        Piece {
            stage_groups: true,
            ..Piece::new(batch)
        }
    }

    /// Works out the source of output `at` (of `outputs` in all), unless it is already.
    fn resolve(&mut self, at: usize, outputs: usize, output: &Output) -> Result<()> {
        if self.sources.is_empty() {
            self.sources.resize_with(outputs, || None);
        }
        if self.sources[at].is_some() {
            return Ok(());
        }
        let source = match output {
            Output::Values {
                name,
                index,
                extension,
                ..
            } => {
                let array = self.batch.column(*index);
                match view(extension, array, false) {
                    Ok(view) => Source::Rows {
                        view,
                        has_nulls: false,
                    },
                    Err(arrow_dlpack::Error::Nulls { .. }) => Source::Rows {
                        view: view(extension, array, true)
                            .map_err(|error| Error::column(name, error))?,
                        has_nulls: true,
                    },
                    Err(error) => return Err(Error::column(name, error)),
                }
            }
            Output::Group {
                indices,
                column_names,
                dtype,
                null_to_nan,
                ..
            } => {
                let arrays: Vec<ArrayRef> = indices
                    .iter()
                    .map(|&i| self.batch.column(i).clone())
                    .collect();
                if self.stage_groups
                    && let Some(rows) = stage(*null_to_nan, column_names, &arrays, *dtype)?
                {
                    self.sources[at] = Some(Source::Staged { rows });
                    return Ok(());
                }
                let views = arrays
                    .iter()
                    .map(|array| flat_view(array, *dtype))
                    .collect::<Option<Vec<Tensor>>>();
                Source::Group { arrays, views }
            }
            Output::Bool { .. } | Output::Sequence { .. } | Output::Image { .. } => {
                return Ok(());
            }
        };
        self.sources[at] = Some(source);
        Ok(())
    }

    /// The record batch.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    pub(crate) fn batch(&self) -> &RecordBatch {
        &self.batch
    }

    /// Where the record batch's rows are: the shard's item and the index of its first row
    /// among the item's rows (`None` for record batches collated on their own).
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    pub(crate) fn origin(&self) -> Option<(u64, u64)> {
        self.origin
    }

    /// The source of output `at`, after [`resolve`](Piece::resolve).
    fn source(&self, at: usize) -> &Source {
        self.sources[at]
            .as_ref()
            .expect("resolved before the copy reads it")
    }
}

/// The rows of the group of `arrays` written row-major with `dtype` (nulls as NaN with
/// `null_to_nan`), as a batch of all of them would have them; `None` when `write_rows` refuses
/// the piece (nulls that are not allowed, which are then reported at the batch that holds them,
/// as the copy run by run does).
fn stage(
    null_to_nan: bool,
    column_names: &[String],
    arrays: &[ArrayRef],
    dtype: DType,
) -> Result<Option<arrow_buffer::Buffer>> {
    let Ok(table) = Table::try_from_columns(column_names, arrays) else {
        return Ok(None);
    };
    let num_rows = arrays.first().map_or(0, |array| array.len());
    let mut out = UninitBuffer::try_new(num_rows * arrays.len() * dtype.size())?;
    let mut destination = RowsDestination::from_bytes(out.as_uninit_mut(), dtype, num_rows, true);
    let options = WriteRowsOptions { null_to_nan };
    if write_rows(&table, 0..num_rows, &mut destination, 0, options).is_err() {
        return Ok(None);
    }
    // SAFETY: `write_rows` returned `Ok` for rows `0..num_rows` into a destination of exactly
    // `num_rows` rows of every column, so it initialised every byte.
    Ok(Some(unsafe { out.assume_init() }))
}

/// The flat view of `array` when it has no nulls and holds values of `dtype` (not bool, which
/// Arrow packs in bits), else `None`.
fn flat_view(array: &ArrayRef, dtype: DType) -> Option<Tensor> {
    if array.null_count() > 0 || dtype == DType::Bool {
        return None;
    }
    let tensor = array_to_tensor(array.as_ref(), ArrayToTensorOptions::default()).ok()?;
    let flat = tensor.shape() == [array.len()] && tensor.strides() == [1];
    (flat && tensor.dtype() == dtype).then_some(tensor)
}

/// The bytes of rows `start..start + len` of `view`, each row `row_bytes` long.
fn row_bytes_of(view: &Tensor, start: usize, len: usize, row_bytes: usize) -> &[u8] {
    let from = view.offset() * view.dtype().size() + start * row_bytes;
    &view.buffer().as_slice()[from..from + len * row_bytes]
}

/// Makes the batch whose rows are `runs`, in order, of `pieces`; image columns are decoded here
/// (and with `on_error="skip"`, the rows that are not images are left out of every tensor).
pub(crate) fn assemble(
    spec: &BatchSpec,
    columns: &Columns,
    pieces: &mut [Piece],
    runs: &[Run],
) -> Result<TensorBatch> {
    #[cfg(feature = "images")]
    if !spec.images.is_empty() {
        let decoded = decode_runs(spec, columns, pieces, runs)?;
        return assemble_decoded(spec, columns, pieces, decoded);
    }
    assemble_rows(spec, columns, pieces, runs, Vec::new())
}

/// Makes the batch whose rows are `runs`, in order, of `pieces`, with the images (and their
/// sizes) of the image outputs, in their order, from `images`.
fn assemble_rows(
    spec: &BatchSpec,
    columns: &Columns,
    pieces: &mut [Piece],
    runs: &[Run],
    images: Vec<(Tensor, Tensor)>,
) -> Result<TensorBatch> {
    let num_rows = runs.iter().map(|run| run.len).sum();
    let mut tensors = Vec::with_capacity(columns.outputs.len() + images.len());
    let mut images = images.into_iter();
    for (at, output) in columns.outputs.iter().enumerate() {
        if let Output::Image { name, image, .. } = output {
            let Some((pixels, sizes)) = images.next() else {
                unreachable!("every image output is decoded before the batch is assembled")
            };
            tensors.push((name.clone(), pixels));
            tensors.push((image.sizes_name(), sizes));
            continue;
        }
        if let Output::Sequence {
            name,
            index,
            sequence,
        } = output
        {
            let rows = runs
                .iter()
                .map(|run| {
                    let piece = &pieces[run.piece];
                    let column = piece.batch.column(*index);
                    run_of(
                        name,
                        column,
                        (run.start, run.len),
                        spec.allow_nulls,
                        piece.origin,
                        columns.origins.locate.as_ref(),
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            tensors.extend(sequence_tensors(sequence, &rows)?);
            continue;
        }
        let tensor = match runs {
            [run] => view_output(spec, output, &pieces[run.piece].batch, *run),
            _ => {
                let copy = OutputCopy {
                    spec,
                    at,
                    outputs: columns.outputs.len(),
                    num_rows,
                };
                copy.output(output, pieces, runs)
            }
        }
        .map_err(|error| {
            place_nulls(error, output, pieces, runs, columns.origins.locate.as_ref())
        })?;
        tensors.push((output.name().to_string(), tensor));
    }
    let mut masks = Vec::with_capacity(columns.masks.len());
    for (name, index) in &columns.masks {
        masks.push((
            name.clone(),
            copy_mask(pieces, runs, (name, *index), num_rows)?,
        ));
    }
    Ok(TensorBatch::new(num_rows, tensors, masks))
}

/// The tensor of `output` for rows that lie inside one record batch: a view where the Arrow
/// layer can share memory.
fn view_output(spec: &BatchSpec, output: &Output, batch: &RecordBatch, run: Run) -> Result<Tensor> {
    let slice = |index: usize| batch.column(index).slice(run.start, run.len);
    match output {
        Output::Values {
            name,
            index,
            extension,
            ..
        } => view(extension, &slice(*index), spec.allow_nulls)
            .map_err(|error| Error::column(name, error)),
        Output::Bool { name, index } => {
            let options = ArrayToTensorOptions {
                allow_nulls: spec.allow_nulls,
                allow_copy: true,
            };
            array_to_tensor(slice(*index).as_ref(), options)
                .map_err(|error| Error::column(name, error))
        }
        Output::Sequence { .. } | Output::Image { .. } => {
            unreachable!("sequences and images are assembled on their own")
        }
        Output::Group {
            name,
            indices,
            column_names,
            dtype,
            null_to_nan,
            flat,
            view_when_no_nulls,
        } => {
            let arrays: Vec<ArrayRef> = indices.iter().map(|&i| slice(i)).collect();
            if *view_when_no_nulls && arrays[0].null_count() == 0 {
                return array_to_tensor(arrays[0].as_ref(), ArrayToTensorOptions::default())
                    .map_err(|error| Error::column(name, error));
            }
            if !spec.row_major
                && !*flat
                && let Some(tensor) = strided_group_view(&arrays)
                && tensor.dtype() == *dtype
            {
                return Ok(tensor);
            }
            let options = TableToTensorOptions {
                row_major: spec.row_major || *flat,
                null_to_nan: *null_to_nan,
                dtype: Some(*dtype),
            };
            let tensor = columns_to_tensor(column_names, &arrays, options)
                .map_err(|error| Error::column(name, error))?;
            if *flat {
                // A group of one column, (B, 1) with row stride 1 in either layout: drop the
                // second dimension.
                let flat = Tensor::try_new(
                    tensor.buffer().clone(),
                    tensor.dtype(),
                    vec![run.len],
                    vec![1],
                    tensor.offset(),
                )?;
                Ok(flat.with_read_only(false))
            } else {
                Ok(tensor)
            }
        }
    }
}

/// The copy of one output for rows from several record batches (or shuffled rows), written
/// into one fresh allocation.
struct OutputCopy<'a> {
    spec: &'a BatchSpec,
    /// The output's position among the `outputs` of the [`Columns`].
    at: usize,
    outputs: usize,
    num_rows: usize,
}

impl OutputCopy<'_> {
    fn output(&self, output: &Output, pieces: &mut [Piece], runs: &[Run]) -> Result<Tensor> {
        match output {
            Output::Values { .. } => self.values(output, pieces, runs),
            Output::Bool { name, index } => self.bools(name, *index, pieces, runs),
            Output::Group { .. } => self.group(output, pieces, runs),
            Output::Sequence { .. } | Output::Image { .. } => {
                unreachable!("sequences and images are assembled on their own")
            }
        }
    }

    /// A numeric column, fixed-size list or fixed-shape tensor: the rows' bytes, run by run.
    fn values(&self, output: &Output, pieces: &mut [Piece], runs: &[Run]) -> Result<Tensor> {
        let Output::Values {
            name,
            index,
            extension,
            dtype,
            cell_shape,
            cell_strides,
            dim_names,
        } = output
        else {
            unreachable!("called for values outputs only")
        };
        let num_rows = self.num_rows;
        let cell: usize = cell_shape.iter().product();
        let row_bytes = cell * dtype.size();
        let total = num_rows * row_bytes;
        let mut out = UninitBuffer::try_new(total)?;
        let slots = out.as_uninit_mut();
        for run in runs {
            pieces[run.piece].resolve(self.at, self.outputs, output)?;
            let piece = &pieces[run.piece];
            let Source::Rows { has_nulls, .. } = piece.source(self.at) else {
                unreachable!("a values output resolves to rows")
            };
            if *has_nulls && !self.spec.allow_nulls {
                // The exact error (the nulls counted in this run), or nothing when the nulls lie
                // outside it.
                let array = piece.batch.column(*index);
                view(extension, &array.slice(run.start, run.len), false)
                    .map_err(|error| Error::column(name, error))?;
            }
        }
        let sources: Vec<&[u8]> = runs
            .iter()
            .map(|run| match pieces[run.piece].source(self.at) {
                Source::Rows { view: rows, .. } => {
                    row_bytes_of(rows, run.start, run.len, row_bytes)
                }
                _ => unreachable!("a values output resolves to rows"),
            })
            .collect();
        let mut written = 0;
        let copied = copy_runs::<_, Infallible>(
            &sources,
            |bytes| Some(bytes),
            |bytes| {
                copy_bytes(bytes, &mut slots[written..], total);
                written += bytes.len();
                Ok(())
            },
        );
        let Ok(()) = copied;
        // SAFETY: the runs' rows add up to `num_rows`, and each run's `run.len * row_bytes` bytes
        // were copied right after the previous run's, so all `num_rows * row_bytes` bytes are
        // written.
        let out = unsafe { out.assume_init() };
        let mut shape = Vec::with_capacity(cell_shape.len() + 1);
        shape.push(num_rows);
        shape.extend_from_slice(cell_shape);
        let mut strides = Vec::with_capacity(cell_strides.len() + 1);
        strides.push(cell as isize);
        strides.extend_from_slice(cell_strides);
        let tensor =
            Tensor::try_new(out, *dtype, shape, strides, 0)?.with_dim_names(dim_names.clone())?;
        Ok(tensor.with_read_only(false))
    }

    /// A boolean column, one byte per row.
    fn bools(&self, name: &str, index: usize, pieces: &[Piece], runs: &[Run]) -> Result<Tensor> {
        let mut out = PooledVec::<u8>::try_with_capacity(self.num_rows)?;
        for run in runs {
            let array = pieces[run.piece].batch.column(index);
            if !self.spec.allow_nulls {
                check_no_nulls(name, array, *run)?;
            }
            let values = array.as_boolean().values();
            out.extend((run.start..run.start + run.len).map(|i| u8::from(values.value(i))));
        }
        let tensor =
            Tensor::try_new_row_major(out.into_buffer(), DType::Bool, vec![self.num_rows])?;
        Ok(tensor.with_read_only(false))
    }

    /// A column group: short runs of columns of the group's dtype gathered as bytes, the rest
    /// written by `write_rows`, so that the values are those of `columns_to_tensor` wherever the
    /// runs come from.
    fn group(&self, output: &Output, pieces: &mut [Piece], runs: &[Run]) -> Result<Tensor> {
        let Output::Group {
            name,
            indices,
            column_names,
            dtype,
            null_to_nan,
            flat,
            ..
        } = output
        else {
            unreachable!("called for group outputs only")
        };
        let num_rows = self.num_rows;
        let k = indices.len();
        let size = dtype.size();
        let row_major = self.spec.row_major || *flat;
        let total = num_rows * k * size;
        let mut out = UninitBuffer::try_new(total)?;
        let options = WriteRowsOptions {
            null_to_nan: *null_to_nan,
        };
        for run in runs {
            pieces[run.piece].resolve(self.at, self.outputs, output)?;
        }
        let pieces: &[Piece] = pieces;
        let staged_bytes = |run: &Run| match pieces[run.piece].source(self.at) {
            Source::Staged { rows } => {
                Some(&rows.as_slice()[run.start * k * size..][..run.len * k * size])
            }
            _ => None,
        };
        let mut row = 0;
        copy_runs(runs, staged_bytes, |run| {
            let slots = out.as_uninit_mut();
            match pieces[run.piece].source(self.at) {
                Source::Staged { .. } => {
                    let bytes = staged_bytes(run).expect("a staged piece");
                    if row_major {
                        copy_bytes(bytes, &mut slots[row * k * size..], total);
                    } else {
                        for column in 0..k {
                            let to = (column * num_rows + row) * size;
                            let from = &bytes[column * size..];
                            copy_strided(from, k, &mut slots[to..], 1, size, run.len);
                        }
                    }
                }
                Source::Group {
                    views: Some(views), ..
                } if run.len < WRITE_ROWS_MIN_RUN => {
                    for (column, view) in views.iter().enumerate() {
                        let bytes = row_bytes_of(view, run.start, run.len, size);
                        if row_major {
                            let to = (row * k + column) * size;
                            copy_strided(bytes, 1, &mut slots[to..], k, size, run.len);
                        } else {
                            let to = (column * num_rows + row) * size;
                            copy_bytes(bytes, &mut slots[to..], total);
                        }
                    }
                }
                Source::Group { arrays, .. } => {
                    let table = Table::try_from_columns(column_names, arrays)
                        .map_err(|error| Error::column(name, error))?;
                    let mut destination =
                        RowsDestination::from_bytes(slots, *dtype, num_rows, row_major);
                    let rows = run.start..run.start + run.len;
                    write_rows(&table, rows, &mut destination, row, options)
                        .map_err(|error| Error::column(name, error))?;
                }
                Source::Rows { .. } => unreachable!("a group output resolves to a group"),
            }
            row += run.len;
            Ok::<(), Error>(())
        })?;
        // SAFETY: the runs' rows add up to `num_rows`, and for each run in turn rows
        // `row..row + run.len` of every one of the `k` columns were written, by the byte copies
        // (of whole rows in the row-major layout, or one per column at the element of that row
        // and column) or by `write_rows`, so every byte of the `num_rows * k` elements is
        // written.
        let out = unsafe { out.assume_init() };
        let (shape, strides) = if *flat {
            (vec![num_rows], vec![1])
        } else if self.spec.row_major {
            (vec![num_rows, k], vec![k as isize, 1])
        } else {
            (vec![num_rows, k], vec![1, num_rows.max(1) as isize])
        };
        let tensor = Tensor::try_new(out, *dtype, shape, strides, 0)?;
        Ok(tensor.with_read_only(false))
    }
}
