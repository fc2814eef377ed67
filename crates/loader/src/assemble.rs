//! One batch from runs of rows: zero-copy views when the batch lies inside one record batch,
//! otherwise one fresh allocation per tensor, written in one pass from the record batches (a
//! column group through `arrow_dlpack::write_rows`, the kernel of `Tensor.from_arrow`, one call
//! per run at its row offset).

use arrow_array::{Array, ArrayRef, RecordBatch, cast::AsArray};
use arrow_dlpack::{
    ArrayToTensorOptions, RecordBatchToTensorOptions, RowsDestination, Table, WriteRowsOptions,
    array_to_tensor, columns_to_tensor, write_rows,
};
use arrow_dlpack_tensor::alloc::{PooledVec, UninitBuffer};
use arrow_dlpack_tensor::{DType, Tensor};

use crate::columns::{Columns, Output, view};
use crate::group_view::strided_group_view;
use crate::{BatchSpec, Error, Result, TensorBatch};

/// `len` rows of piece `piece` from row `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) piece: usize,
    pub(crate) start: usize,
    pub(crate) len: usize,
}

/// Makes the batch whose rows are `runs`, in order, of the record batches `pieces`.
pub(crate) fn assemble(
    spec: &BatchSpec,
    columns: &Columns,
    pieces: &[RecordBatch],
    runs: &[Run],
) -> Result<TensorBatch> {
    let num_rows = runs.iter().map(|run| run.len).sum();
    let mut tensors = Vec::with_capacity(columns.outputs.len());
    for output in &columns.outputs {
        let tensor = match runs {
            [run] => view_output(spec, output, &pieces[run.piece], *run)?,
            _ => copy_output(spec, output, pieces, runs, num_rows)?,
        };
        tensors.push((output.name().to_string(), tensor));
    }
    let mut masks = Vec::with_capacity(columns.masks.len());
    for (name, index) in &columns.masks {
        masks.push((name.clone(), copy_mask(pieces, runs, *index, num_rows)?));
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
        Output::Group {
            name,
            indices,
            column_names,
            flat,
            view_when_no_nulls,
            ..
        } => {
            let arrays: Vec<ArrayRef> = indices.iter().map(|&i| slice(i)).collect();
            if *view_when_no_nulls && arrays[0].null_count() == 0 {
                return array_to_tensor(arrays[0].as_ref(), ArrayToTensorOptions::default())
                    .map_err(|error| Error::column(name, error));
            }
            if !spec.row_major
                && !*flat
                && let Some(tensor) = strided_group_view(&arrays)
            {
                return Ok(tensor);
            }
            let options = RecordBatchToTensorOptions {
                row_major: spec.row_major || *flat,
                null_to_nan: spec.null_to_nan,
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

/// The tensor of `output` for rows from several record batches (or shuffled rows), written into
/// one fresh allocation.
fn copy_output(
    spec: &BatchSpec,
    output: &Output,
    pieces: &[RecordBatch],
    runs: &[Run],
    num_rows: usize,
) -> Result<Tensor> {
    match output {
        Output::Values {
            name,
            index,
            extension,
            dtype,
            cell_shape,
            cell_strides,
            dim_names,
        } => {
            let cell: usize = cell_shape.iter().product();
            let row_bytes = cell * dtype.size();
            let mut out = PooledVec::<u8>::try_with_capacity(num_rows * row_bytes)?;
            // Each piece is viewed once per batch, however many runs come from it.
            let mut views: Vec<Option<(Tensor, bool)>> = vec![None; pieces.len()];
            for run in runs {
                let array = pieces[run.piece].column(*index);
                let (piece_view, has_nulls) = match &mut views[run.piece] {
                    Some(cached) => &*cached,
                    slot => {
                        let cached = match view(extension, array, false) {
                            Ok(tensor) => (tensor, false),
                            Err(arrow_dlpack::Error::Nulls { .. }) => {
                                let tensor = view(extension, array, true)
                                    .map_err(|error| Error::column(name, error))?;
                                (tensor, true)
                            }
                            Err(error) => return Err(Error::column(name, error)),
                        };
                        &*slot.insert(cached)
                    }
                };
                if *has_nulls && !spec.allow_nulls {
                    // The exact error (the nulls counted in this run), or nothing when the nulls
                    // lie outside it.
                    view(extension, &array.slice(run.start, run.len), false)
                        .map_err(|error| Error::column(name, error))?;
                }
                let start = (piece_view.offset() + run.start * cell) * dtype.size();
                let bytes = &piece_view.buffer().as_slice()[start..start + run.len * row_bytes];
                out.extend_from_slice(bytes);
            }
            let mut shape = Vec::with_capacity(cell_shape.len() + 1);
            shape.push(num_rows);
            shape.extend_from_slice(cell_shape);
            let mut strides = Vec::with_capacity(cell_strides.len() + 1);
            strides.push(cell as isize);
            strides.extend_from_slice(cell_strides);
            let tensor = Tensor::try_new(out.into_buffer(), *dtype, shape, strides, 0)?
                .with_dim_names(dim_names.clone())?;
            Ok(tensor.with_read_only(false))
        }
        Output::Bool { name, index } => {
            let mut out = PooledVec::<u8>::try_with_capacity(num_rows)?;
            for run in runs {
                let array = pieces[run.piece].column(*index);
                if !spec.allow_nulls {
                    check_no_nulls(name, array, *run)?;
                }
                let values = array.as_boolean().values().slice(run.start, run.len);
                out.extend(values.iter().map(u8::from));
            }
            let tensor = Tensor::try_new_row_major(out.into_buffer(), DType::Bool, vec![num_rows])?;
            Ok(tensor.with_read_only(false))
        }
        Output::Group {
            name,
            indices,
            column_names,
            dtype,
            flat,
            ..
        } => {
            let k = indices.len();
            let row_major = spec.row_major || *flat;
            let bytes = num_rows * k * dtype.size();
            let mut out = UninitBuffer::try_new(bytes)?;
            let mut destination =
                RowsDestination::from_bytes(out.as_uninit_mut(), *dtype, num_rows, row_major);
            let options = WriteRowsOptions {
                null_to_nan: spec.null_to_nan,
            };
            let mut row = 0;
            for run in runs {
                let batch = &pieces[run.piece];
                let arrays: Vec<ArrayRef> =
                    indices.iter().map(|&i| batch.column(i).clone()).collect();
                let table = Table::try_from_columns(column_names, &arrays)
                    .map_err(|error| Error::column(name, error))?;
                write_rows(
                    &table,
                    run.start..run.start + run.len,
                    &mut destination,
                    row,
                    options,
                )
                .map_err(|error| Error::column(name, error))?;
                row += run.len;
            }
            // SAFETY: the runs' rows add up to `num_rows`, and `write_rows` initialised rows
            // `row..row + run.len` of every one of the `k` columns for each run in turn, so every
            // byte of the `num_rows * k` elements is written.
            let out = unsafe { out.assume_init() };
            let (shape, strides) = if *flat {
                (vec![num_rows], vec![1])
            } else if spec.row_major {
                (vec![num_rows, k], vec![k as isize, 1])
            } else {
                (vec![num_rows, k], vec![1, num_rows.max(1) as isize])
            };
            let tensor = Tensor::try_new(out, *dtype, shape, strides, 0)?;
            Ok(tensor.with_read_only(false))
        }
    }
}

/// The validity of column `index` over `runs`, one byte (1 = valid) per row.
///
/// Written here rather than with `arrow_dlpack::validity_to_tensor` so that a mask over several
/// record batches is one pass too.
fn copy_mask(
    pieces: &[RecordBatch],
    runs: &[Run],
    index: usize,
    num_rows: usize,
) -> Result<Tensor> {
    let mut out = PooledVec::<u8>::try_with_capacity(num_rows)?;
    for run in runs {
        match pieces[run.piece].column(index).logical_nulls() {
            None => out.extend(std::iter::repeat_n(1u8, run.len)),
            Some(nulls) => {
                out.extend((run.start..run.start + run.len).map(|i| u8::from(nulls.is_valid(i))))
            }
        }
    }
    let tensor = Tensor::try_new_row_major(out.into_buffer(), DType::Bool, vec![num_rows])?;
    Ok(tensor.with_read_only(false))
}

/// The nulls of `array` within `run`.
fn nulls_in(array: &ArrayRef, run: Run) -> usize {
    match array.nulls() {
        Some(nulls) if nulls.null_count() > 0 => nulls.slice(run.start, run.len).null_count(),
        _ => 0,
    }
}

/// Refuses nulls of a single column within `run`, as the Arrow layer words it.
fn check_no_nulls(name: &str, array: &ArrayRef, run: Run) -> Result<()> {
    let null_count = nulls_in(array, run);
    if null_count == 0 {
        return Ok(());
    }
    let source = arrow_dlpack::Error::Nulls {
        null_count,
        location: arrow_dlpack::NullLocation::Array { depth: 0 },
    };
    Err(Error::column(name, source))
}
