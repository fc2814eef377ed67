//! Criterion benchmarks of the Arrow layer.
//!
//! - `exchange`: the zero-copy crossings at 10, 10 thousand and 10 million elements, whose cost
//!   must not grow with the size: a `Float32Array` exported to a versioned managed tensor and
//!   dropped; a managed tensor imported into an Arrow array and dropped; a fixed-shape tensor
//!   array (cells of 2x5) to a tensor, and a tensor to a fixed-shape tensor array.
//! - `copy`: the paths that copy, reported as throughput beside a plain `memcpy` of the same
//!   number of output bytes (`memcpy/alloc` clones a `Vec<u8>`, allocation included as in every
//!   copy path; `memcpy/into` copies into a preallocated buffer, the floor): booleans unpacked to
//!   one byte each, four chunks concatenated, and a record batch of ten `float64` columns copied
//!   into a 2-D tensor, row-major and column-major (1 million rows, where this machine's page
//!   faults dominate, and 100 thousand rows), and of ten mixed `int32`/`float32` columns promoted
//!   to `float64`.
//!
//! Run with `cargo bench -p arrow-dlpack -- --warm-up-time 1 --measurement-time 3` for a quick
//! pass (about two minutes once built).

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
};
use arrow_buffer::Buffer;
use arrow_dlpack::{
    ArrayToTensorOptions, ConcatOptions, FixedShapeTensorArray, Table, TableToTensorOptions,
    TensorToArrayOptions, array_to_tensor, concat_chunks, table_to_tensor, tables_to_tensor,
    tensor_to_array,
};
use arrow_dlpack_tensor::{DType, ExportOptions, Tensor};
use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};

/// Element counts of the zero-copy benchmarks.
const SIZES: [usize; 3] = [10, 10_000, 10_000_000];

/// The cell shape of the fixed-shape tensor benchmarks: 10 elements per cell.
const CELL: [usize; 2] = [2, 5];

fn float32(len: usize) -> Float32Array {
    Float32Array::from_iter_values((0..len).map(|i| i as f32))
}

fn exchange(c: &mut Criterion) {
    let mut group = c.benchmark_group("exchange");
    for len in SIZES {
        let array = float32(len);
        group.bench_with_input(BenchmarkId::new("export+drop", len), &array, |b, array| {
            b.iter(|| {
                let tensor =
                    array_to_tensor(black_box(array), ArrayToTensorOptions::default()).unwrap();
                drop(black_box(
                    tensor.to_dlpack_versioned(ExportOptions::default()),
                ))
            })
        });

        let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
        group.bench_with_input(
            BenchmarkId::new("import+drop", len),
            &tensor,
            |b, tensor| {
                b.iter_batched(
                    || {
                        tensor
                            .to_dlpack_versioned(ExportOptions::default())
                            .unwrap()
                    },
                    |managed| {
                        let imported = Tensor::from_managed(managed).unwrap();
                        drop(black_box(tensor_to_array(
                            &imported,
                            TensorToArrayOptions::default(),
                        )))
                    },
                    BatchSize::SmallInput,
                )
            },
        );

        let cells = len / (CELL[0] * CELL[1]);
        let buffer = Buffer::from_vec((0..len).map(|i| i as f32).collect::<Vec<_>>());
        let stacked =
            Tensor::try_new_row_major(buffer, DType::Float32, vec![cells, CELL[0], CELL[1]])
                .unwrap();
        group.bench_with_input(
            BenchmarkId::new("fixed_shape_tensor/from_tensor", len),
            &stacked,
            |b, stacked| {
                b.iter(|| {
                    black_box(FixedShapeTensorArray::from_tensor(
                        black_box(stacked),
                        TensorToArrayOptions::default(),
                    ))
                })
            },
        );
        let column =
            FixedShapeTensorArray::from_tensor(&stacked, TensorToArrayOptions::default()).unwrap();
        group.bench_with_input(
            BenchmarkId::new("fixed_shape_tensor/to_tensor", len),
            &column,
            |b, column| {
                b.iter(|| black_box(black_box(column).to_tensor(ArrayToTensorOptions::default())))
            },
        );
    }
    group.finish();
}

/// Benchmarks a plain `memcpy` of `bytes` bytes, with and without allocating the destination.
fn memcpy(group: &mut BenchmarkGroup<'_, WallTime>, bytes: usize) {
    let mut source: Option<Vec<u8>> = None;
    group.bench_function(BenchmarkId::new("memcpy/alloc", bytes), |b| {
        let source = source.get_or_insert_with(|| vec![7u8; bytes]);
        b.iter(|| black_box(black_box(&*source).clone()))
    });
    let mut buffers: Option<(Vec<u8>, Vec<u8>)> = None;
    group.bench_function(BenchmarkId::new("memcpy/into", bytes), |b| {
        let (source, destination) =
            buffers.get_or_insert_with(|| (vec![7u8; bytes], vec![0u8; bytes]));
        b.iter(|| black_box(&mut *destination).copy_from_slice(black_box(&*source)))
    });
}

fn copies(c: &mut Criterion) {
    // Inputs are built on first use, so that a filtered run builds only what it measures.
    let mut group = c.benchmark_group("copy");
    // Tens of milliseconds per iteration: flat sampling with few samples keeps each benchmark
    // within its measurement time.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);

    // Booleans: 10 million bits become 10 million bytes.
    let len = 10_000_000;
    group.throughput(Throughput::Bytes(len as u64));
    memcpy(&mut group, len);
    let mut booleans: Option<BooleanArray> = None;
    let options = ArrayToTensorOptions {
        allow_copy: true,
        ..Default::default()
    };
    group.bench_function(BenchmarkId::new("bool_unpack", len), |b| {
        let booleans = booleans
            .get_or_insert_with(|| BooleanArray::from_iter((0..len).map(|i| Some(i % 3 == 0))));
        b.iter(|| black_box(array_to_tensor(black_box(&*booleans), options)))
    });
    // And back: 10 million bytes (0 or 1) packed into bits.
    let mut bytes: Option<Tensor> = None;
    group.bench_function(BenchmarkId::new("bool_pack", len), |b| {
        let bytes = bytes.get_or_insert_with(|| {
            let values: Vec<u8> = (0..len).map(|i| u8::from(i % 3 == 0)).collect();
            Tensor::try_new_row_major(Buffer::from_vec(values), DType::Bool, vec![len]).unwrap()
        });
        let options = TensorToArrayOptions { allow_copy: true };
        b.iter(|| black_box(tensor_to_array(black_box(&*bytes), options)))
    });

    // Chunks: four chunks of 2.5 million float32, 40 MB in all.
    group.throughput(Throughput::Bytes(len as u64 * 4));
    memcpy(&mut group, len * 4);
    let mut chunks: Option<Vec<ArrayRef>> = None;
    group.bench_function(BenchmarkId::new("concat_chunks", "4x2500000"), |b| {
        let chunks = chunks.get_or_insert_with(|| {
            (0..4)
                .map(|_| Arc::new(float32(len / 4)) as ArrayRef)
                .collect()
        });
        b.iter(|| {
            black_box(concat_chunks(
                black_box(&*chunks),
                ConcatOptions { allow_copy: true },
            ))
        })
    });

    // A table: ten float64 columns of a million rows, 80 MB, and of a hundred thousand rows, 8 MB
    // (an output small enough for the allocator to reuse, so that no page faults are measured).
    for rows in [1_000_000, 100_000] {
        let columns = 10;
        group.throughput(Throughput::Bytes((rows * columns * 8) as u64));
        memcpy(&mut group, rows * columns * 8);
        let mut batch: Option<RecordBatch> = None;
        for (name, row_major) in [("row_major", true), ("column_major", false)] {
            let options = layout(row_major);
            let id = BenchmarkId::new(
                format!("record_batch_to_tensor/{name}"),
                format!("{columns}x{rows}"),
            );
            group.bench_function(id, |b| {
                let batch = batch.get_or_insert_with(|| float64_table(columns, rows));
                b.iter(|| black_box(table_to_tensor(&Table::from(black_box(&*batch)), options)))
            });
        }
    }
    // Mixed types promoted to float64, 8 MB written: five int32 and five float32 columns, and
    // int32, float32 and float64 repeating (when row-major, every column read where it is and
    // the int32 and float32 values widened as they are loaded, where the CPU has AVX2, else
    // staged); and five int64 and five float64 columns (the int64 columns staged: converted into
    // a float64 run in cache, then read by the same transposition).
    for (types, make) in [
        ("int32+float32", mixed_table as fn(usize) -> RecordBatch),
        ("int32+float32+float64", three_type_table),
        ("int64+float64", int64_float64_table),
    ] {
        let mut batch: Option<RecordBatch> = None;
        for (name, row_major) in [("row_major", true), ("column_major", false)] {
            let options = layout(row_major);
            let id = BenchmarkId::new(
                format!("record_batch_to_tensor/{name}/{types}"),
                "10x100000",
            );
            group.bench_function(id, |b| {
                let batch = batch.get_or_insert_with(|| make(100_000));
                b.iter(|| black_box(table_to_tensor(&Table::from(black_box(&*batch)), options)))
            });
            // The same rows as two chunks, stacked by `tables_to_tensor`.
            let id = BenchmarkId::new(format!("tables_to_tensor/{name}/{types}"), "2x10x50000");
            group.bench_function(id, |b| {
                let batch = batch.get_or_insert_with(|| make(100_000));
                let halves = [batch.slice(0, 50_000), batch.slice(50_000, 50_000)];
                b.iter(|| {
                    let tables = [Table::from(&halves[0]), Table::from(&halves[1])];
                    black_box(tables_to_tensor(black_box(&tables), options))
                })
            });
        }
    }
    group.finish();
}

/// The options of a table copy laid out row- or column-major.
fn layout(row_major: bool) -> TableToTensorOptions {
    TableToTensorOptions {
        row_major,
        ..TableToTensorOptions::default()
    }
}

/// Ten columns of `rows` rows: int32, float32 and float64, repeating.
fn three_type_table(rows: usize) -> RecordBatch {
    RecordBatch::try_from_iter((0..10).map(|column| {
        let array: ArrayRef = match column % 3 {
            0 => Arc::new(Int32Array::from_iter_values(
                (0..rows).map(|row| row as i32),
            )),
            1 => Arc::new(float32(rows)),
            _ => Arc::new(Float64Array::from_iter_values(
                (0..rows).map(|row| row as f64 * 0.5),
            )),
        };
        (format!("c{column}"), array)
    }))
    .unwrap()
}

/// Five int32 and five float32 columns of `rows` rows, alternating.
fn mixed_table(rows: usize) -> RecordBatch {
    alternating_table(
        rows,
        |rows| {
            Arc::new(Int32Array::from_iter_values(
                (0..rows).map(|row| row as i32),
            ))
        },
        |rows| Arc::new(float32(rows)),
    )
}

/// Five int64 and five float64 columns of `rows` rows, alternating.
fn int64_float64_table(rows: usize) -> RecordBatch {
    alternating_table(
        rows,
        |rows| {
            Arc::new(Int64Array::from_iter_values(
                (0..rows).map(|row| row as i64 * 3),
            ))
        },
        |rows| {
            Arc::new(Float64Array::from_iter_values(
                (0..rows).map(|row| row as f64 * 0.5),
            ))
        },
    )
}

/// Ten columns of `rows` rows made by `even` and `odd`, alternating.
fn alternating_table(
    rows: usize,
    even: fn(usize) -> ArrayRef,
    odd: fn(usize) -> ArrayRef,
) -> RecordBatch {
    RecordBatch::try_from_iter((0..10).map(|column| {
        let make = if column % 2 == 0 { even } else { odd };
        (format!("c{column}"), make(rows))
    }))
    .unwrap()
}

/// A record batch of `columns` float64 columns of `rows` rows.
fn float64_table(columns: usize, rows: usize) -> RecordBatch {
    RecordBatch::try_from_iter((0..columns).map(|column| {
        let values = (0..rows).map(|row| (row * columns + column) as f64);
        (
            format!("c{column}"),
            Arc::new(Float64Array::from_iter_values(values)) as ArrayRef,
        )
    }))
    .unwrap()
}

criterion_group!(benches, exchange, copies);
criterion_main!(benches);
