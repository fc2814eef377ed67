//! Criterion benchmarks of the tensor layer.
//!
//! - `export+drop` and `import+drop` at 10, 10 thousand and 10 million elements: zero-copy, so
//!   the cost must not grow with the size.
//! - `to_contiguous` of a transposed matrix, of a reversed vector, of every other row and of every
//!   other element beside a plain `memcpy` of the same bytes, reported as throughput; beside
//!   `gapped`, `reference/read_20_write_10` reads and writes what it does in the simplest way.

use std::hint::black_box;

use arrow_buffer::Buffer;
use arrow_dlpack_tensor::{DType, ExportOptions, Tensor};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const SIZES: [usize; 3] = [10, 10_000, 10_000_000];

fn vector(len: usize) -> Tensor {
    let buffer = Buffer::from_vec((0..len).map(|i| i as f32).collect::<Vec<_>>());
    Tensor::try_new_row_major(buffer, DType::Float32, vec![len]).unwrap()
}

fn exchange(c: &mut Criterion) {
    let mut group = c.benchmark_group("tensor");
    for len in SIZES {
        let tensor = vector(len);
        group.bench_with_input(
            BenchmarkId::new("export+drop", len),
            &tensor,
            |b, tensor| {
                b.iter(|| {
                    drop(black_box(
                        tensor.to_dlpack_versioned(ExportOptions::default()),
                    ))
                })
            },
        );
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
                    |managed| drop(black_box(Tensor::from_managed(managed))),
                    criterion::BatchSize::SmallInput,
                )
            },
        );
    }
    group.finish();
}

fn copies(c: &mut Criterion) {
    let mut group = c.benchmark_group("copy");
    group.sample_size(20);
    let (rows, cols) = (2000usize, 1250usize);
    let bytes = rows * cols * 4;
    group.throughput(Throughput::Bytes(bytes as u64));
    let source: Vec<u8> = vec![7u8; bytes];
    group.bench_function("memcpy", |b| b.iter(|| black_box(source.clone())));
    let matrix = vector(rows * cols);
    let reversed = Tensor::try_new(
        matrix.buffer().clone(),
        DType::Float32,
        vec![rows * cols],
        vec![-1],
        rows * cols - 1,
    )
    .unwrap();
    group.bench_function("to_contiguous/reversed", |b| {
        b.iter(|| black_box(reversed.to_contiguous().unwrap()))
    });
    let matrix =
        Tensor::try_new_row_major(matrix.buffer().clone(), DType::Float32, vec![rows, cols])
            .unwrap();
    let transposed = matrix.permuted(&[1, 0]).unwrap();
    group.bench_function("to_contiguous/transposed", |b| {
        b.iter(|| black_box(transposed.to_contiguous().unwrap()))
    });
    // Half the rows: half the bytes move.
    group.throughput(Throughput::Bytes(bytes as u64 / 2));
    let gapped = Tensor::try_new(
        matrix.buffer().clone(),
        DType::Float32,
        vec![rows / 2, cols],
        vec![2 * cols as isize, 1],
        0,
    )
    .unwrap();
    group.bench_function("to_contiguous/row_gapped", |b| {
        b.iter(|| black_box(gapped.to_contiguous().unwrap()))
    });
    // Every other int64 of twice as many: the output has `bytes` bytes (the Python bench's
    // `copy_to_contiguous/gapped`).
    group.throughput(Throughput::Bytes(bytes as u64));
    let count = bytes / 8;
    let doubled = Buffer::from_vec((0..2 * count as i64).collect::<Vec<_>>());
    let every_other =
        Tensor::try_new(doubled.clone(), DType::Int64, vec![count], vec![2], 0).unwrap();
    group.bench_function("to_contiguous/gapped", |b| {
        b.iter(|| black_box(every_other.to_contiguous().unwrap()))
    });
    // The floor of `gapped`: the same 20 MB read and 10 MB written in the simplest way, each
    // output the XOR of a pair, into one warm output reused by every iteration (as
    // `to_contiguous` writes into warm pooled pages).
    let pairs = doubled.typed_data::<i64>();
    let mut output = vec![0i64; count];
    group.bench_function("reference/read_20_write_10", |b| {
        b.iter(|| {
            for (out, pair) in output.iter_mut().zip(pairs.chunks_exact(2)) {
                *out = pair[0] ^ pair[1];
            }
            black_box(&mut output);
        })
    });
    group.finish();
}

criterion_group!(benches, exchange, copies);
criterion_main!(benches);
