//! Criterion benchmarks of ragged tensors.
//!
//! - `ragged`: padding 1 million rows of int32 tokens (lengths 1 to 64, spread evenly, so that
//!   the padded output is about half padding) into a `(1M, 64)` tensor, on the right with 0, on
//!   the left with -100, and in two pieces; beside a plain `memcpy` of the padded output's bytes
//!   (`memcpy/alloc` allocates the destination, as padding does; `memcpy/into` copies into a
//!   preallocated buffer, the floor), and packing the same rows (positions written, values shared).
//!
//! Run with `cargo bench -p arrow-dlpack --bench ragged -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use arrow_dlpack::{PadOptions, PadValue, RaggedTensor, Side, Tensor, pad_pieces};
use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};

/// The number of rows.
const ROWS: usize = 1_000_000;

/// The longest row, and the padded length.
const LONGEST: usize = 64;

/// `ROWS` rows of int32 tokens, row `i` of length `1 + (i * 7919) % LONGEST`.
fn tokens() -> RaggedTensor {
    let lengths: Vec<usize> = (0..ROWS).map(|i| 1 + (i * 7919) % LONGEST).collect();
    let total: usize = lengths.iter().sum();
    let values = Tensor::from_vec((0..total as i32).collect(), vec![total]).unwrap();
    let mut offsets = Vec::with_capacity(ROWS + 1);
    offsets.push(0i32);
    let mut end = 0i32;
    for length in lengths {
        end += length as i32;
        offsets.push(end);
    }
    let offsets = Tensor::from_vec(offsets, vec![ROWS + 1]).unwrap();
    RaggedTensor::new(values, offsets).unwrap()
}

/// Benchmarks a plain `memcpy` of `bytes` bytes, with and without allocating the destination.
fn memcpy(group: &mut BenchmarkGroup<'_, WallTime>, bytes: usize) {
    let source = vec![7u8; bytes];
    group.bench_function(BenchmarkId::new("memcpy/alloc", ROWS), |b| {
        b.iter(|| black_box(black_box(&source).clone()))
    });
    let mut destination = vec![0u8; bytes];
    group.bench_function(BenchmarkId::new("memcpy/into", ROWS), |b| {
        b.iter(|| black_box(&mut destination).copy_from_slice(black_box(&source)))
    });
}

fn ragged(c: &mut Criterion) {
    let tokens = tokens();
    let mut group = c.benchmark_group("ragged");
    // Tens of milliseconds per iteration: flat sampling with few samples.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    let bytes = ROWS * LONGEST * 4;
    group.throughput(Throughput::Bytes(bytes as u64));
    memcpy(&mut group, bytes);
    group.bench_function(BenchmarkId::new("to_padded/right", ROWS), |b| {
        b.iter(|| {
            let padded = black_box(&tokens)
                .to_padded(&PadOptions::default())
                .unwrap();
            assert_eq!(padded.shape(), &[ROWS, LONGEST]);
            padded
        })
    });
    let left = PadOptions {
        pad_value: PadValue::Int(-100),
        padding_side: Side::Left,
        ..Default::default()
    };
    group.bench_function(BenchmarkId::new("to_padded/left-100", ROWS), |b| {
        b.iter(|| black_box(&tokens).to_padded(&left).unwrap())
    });
    let halves = [
        tokens.slice(0, ROWS / 2).unwrap(),
        tokens.slice(ROWS / 2, ROWS - ROWS / 2).unwrap(),
    ];
    group.bench_function(BenchmarkId::new("pad_pieces/2", ROWS), |b| {
        b.iter(|| pad_pieces(black_box(&halves), &PadOptions::default()).unwrap())
    });
    group.throughput(Throughput::Bytes(tokens.total_length() as u64 * 8));
    group.bench_function(BenchmarkId::new("to_packed", ROWS), |b| {
        b.iter(|| black_box(&tokens).to_packed().unwrap())
    });
    group.finish();
}

criterion_group!(benches, ragged);
criterion_main!(benches);
