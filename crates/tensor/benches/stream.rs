//! Criterion benchmark of `alloc::copy_to_uninit` (group `stream`): 8 runs of 10 MB copied into
//! one warm 80 MB output, as a table's columns or a column's chunks are, with plain
//! `copy_from_slice` (`memcpy/warm`, glibc's `memcpy`: the reference that the page judges the
//! kernel against) and with the streaming kernel (`copy_to_uninit`). The output is allocated and
//! written once before the clock starts, so neither side pays for page faults: the difference is
//! the read of each destination line that plain stores make.

use std::hint::black_box;
use std::mem::MaybeUninit;

use arrow_dlpack_tensor::alloc::copy_to_uninit;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const RUNS: usize = 8;
const RUN_BYTES: usize = 10_000_000;

fn stream(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream");
    group.sample_size(20);
    let total = RUNS * RUN_BYTES;
    group.throughput(Throughput::Bytes(total as u64));
    let runs: Vec<Vec<u8>> = (0..RUNS)
        .map(|run| vec![run as u8 + 1; RUN_BYTES])
        .collect();
    let mut out = vec![MaybeUninit::new(0u8); total];
    group.bench_function("memcpy/warm", |b| {
        b.iter(|| {
            for (run, slots) in runs.iter().zip(out.chunks_exact_mut(RUN_BYTES)) {
                // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; the run has `RUN_BYTES`.
                let bytes = unsafe { std::slice::from_raw_parts(run.as_ptr().cast(), RUN_BYTES) };
                black_box(slots).copy_from_slice(bytes);
            }
        })
    });
    group.bench_function("copy_to_uninit", |b| {
        b.iter(|| {
            for (run, slots) in runs.iter().zip(out.chunks_exact_mut(RUN_BYTES)) {
                copy_to_uninit(run, black_box(slots), total);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, stream);
criterion_main!(benches);
