//! The `"concat"` packing of token sequences ([`ConcatPacker`]): property tests against a
//! plain model of the packing, the invariants of best-fit packing, resuming from the carry,
//! and the errors.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, ListArray};
use arrow_dlpack::{ListToRaggedOptions, RaggedTensor, list_to_ragged};
use arrow_dlpack_loader::{
    ConcatBatch, ConcatCarry, ConcatPackOptions, ConcatPacker, Error, Result,
};
use arrow_dlpack_tensor::DType;
use proptest::prelude::*;

/// The documents as a ragged tensor of int32 tokens.
fn ragged(docs: &[Vec<i32>]) -> RaggedTensor {
    let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
        docs.iter().map(|doc| Some(doc.iter().map(|&t| Some(t)))),
    ));
    list_to_ragged(list.as_ref(), ListToRaggedOptions::default()).unwrap()
}

/// One batch as plain vectors: ids and position ids row by row, cu_seqlens, max_seqlen.
#[derive(Debug, Clone, PartialEq)]
struct Plain {
    ids: Vec<Vec<i32>>,
    positions: Vec<Vec<i64>>,
    cu_seqlens: Vec<i32>,
    max_seqlen: usize,
}

fn plain(batch: &ConcatBatch, max_length: usize) -> Plain {
    let rows = batch.num_rows();
    assert_eq!(batch.ids.shape(), &[rows, max_length]);
    assert_eq!(batch.position_ids.shape(), &[rows, max_length]);
    assert_eq!(batch.position_ids.dtype(), DType::Int64);
    assert_eq!(batch.cu_seqlens.dtype(), DType::Int32);
    let ids = batch.ids.as_slice::<i32>().unwrap();
    let positions = batch.position_ids.as_slice::<i64>().unwrap();
    Plain {
        ids: ids.chunks(max_length).map(<[i32]>::to_vec).collect(),
        positions: positions.chunks(max_length).map(<[i64]>::to_vec).collect(),
        cu_seqlens: batch.cu_seqlens.as_slice::<i32>().unwrap().to_vec(),
        max_seqlen: batch.max_seqlen,
    }
}

/// A record of a run: every batch, and after each batch the documents pushed so far and the
/// carry then.
struct Run {
    batches: Vec<Plain>,
    marks: Vec<(usize, ConcatCarry)>,
}

/// Feeds `docs` from document `from` on, in record batches of `cuts` sizes (cycled), into
/// `packer`, taking batches as they are ready, then finishes.
fn run(mut packer: ConcatPacker, docs: &[Vec<i32>], from: usize, cuts: &[usize]) -> Run {
    let max_length = packer.options().max_length;
    let mut out = Run {
        batches: Vec::new(),
        marks: Vec::new(),
    };
    let mut pushed = from;
    let mut cut = 0;
    while pushed < docs.len() {
        let size = cuts[cut % cuts.len()].max(1).min(docs.len() - pushed);
        cut += 1;
        let piece = ragged(&docs[pushed..pushed + size]);
        let mut start = 0;
        loop {
            start += packer.push(&piece, start).unwrap();
            while let Some(batch) = packer.next_batch().unwrap() {
                out.batches.push(plain(&batch, max_length));
                out.marks.push((pushed + start, packer.carry()));
            }
            if start == size {
                break;
            }
        }
        pushed += size;
    }
    packer.finish();
    while let Some(batch) = packer.next_batch().unwrap() {
        out.batches.push(plain(&batch, max_length));
    }
    out
}

/// The model of `split_documents` packing: the token stream cut into rows, the segments those
/// of each document's piece in a row, and padding as a segment of its own.
fn model_split(docs: &[Vec<i32>], options: &ConcatPackOptions) -> Vec<Plain> {
    let max = options.max_length;
    // Every token with the index of its document.
    let mut stream: Vec<(i32, usize)> = Vec::new();
    for (d, doc) in docs.iter().enumerate() {
        let mut full: Vec<i32> = Vec::new();
        full.extend(options.bos_token_id.map(|t| t as i32));
        full.extend(doc);
        full.extend(options.eos_token_id.map(|t| t as i32));
        stream.extend(full.into_iter().map(|t| (t, d)));
    }
    let mut rows: Vec<Vec<(i32, usize)>> = stream.chunks(max).map(<[_]>::to_vec).collect();
    if rows.last().is_some_and(|row| row.len() < max) && options.drop_last {
        rows.pop();
    }
    let mut batches: Vec<Vec<Vec<(i32, usize)>>> =
        rows.chunks(options.batch_size).map(<[_]>::to_vec).collect();
    if options.drop_last && batches.last().is_some_and(|b| b.len() < options.batch_size) {
        batches.pop();
    }
    batches
        .into_iter()
        .map(|rows| {
            let mut plain = Plain {
                ids: Vec::new(),
                positions: Vec::new(),
                cu_seqlens: vec![0],
                max_seqlen: 0,
            };
            let mut end = 0i32;
            for row in rows {
                let mut ids = Vec::new();
                let mut positions = Vec::new();
                let mut length = 0usize;
                for (i, &(token, doc)) in row.iter().enumerate() {
                    if i > 0 && row[i - 1].1 != doc {
                        end += length as i32;
                        plain.cu_seqlens.push(end);
                        plain.max_seqlen = plain.max_seqlen.max(length);
                        length = 0;
                    }
                    ids.push(token);
                    positions.push(length as i64);
                    length += 1;
                }
                end += length as i32;
                plain.cu_seqlens.push(end);
                plain.max_seqlen = plain.max_seqlen.max(length);
                let pad = max - row.len();
                if pad > 0 {
                    ids.extend(std::iter::repeat_n(options.pad_value as i32, pad));
                    positions.extend(0..pad as i64);
                    end += pad as i32;
                    plain.cu_seqlens.push(end);
                    plain.max_seqlen = plain.max_seqlen.max(pad);
                }
                plain.ids.push(ids);
                plain.positions.push(positions);
            }
            plain
        })
        .collect()
}

/// Checks that position ids and cu_seqlens describe the same segments, and returns the
/// segments' tokens (padding segments left out) and the padding of each row.
fn segments_of(batch: &Plain, pad_value: i32) -> (Vec<Vec<i32>>, Vec<usize>) {
    let max = batch.ids[0].len();
    let flat_ids: Vec<i32> = batch.ids.concat();
    let flat_pos: Vec<i64> = batch.positions.concat();
    assert_eq!(batch.cu_seqlens[0], 0);
    assert_eq!(*batch.cu_seqlens.last().unwrap() as usize, flat_ids.len());
    let mut segments = Vec::new();
    let mut pads = vec![0; batch.ids.len()];
    let mut longest = 0;
    for pair in batch.cu_seqlens.windows(2) {
        let (start, end) = (pair[0] as usize, pair[1] as usize);
        assert!(start < end, "empty segment in {:?}", batch.cu_seqlens);
        assert_eq!(
            start / max,
            (end - 1) / max,
            "a segment crosses a row start"
        );
        let expected: Vec<i64> = (0..(end - start) as i64).collect();
        assert_eq!(flat_pos[start..end], expected[..]);
        longest = longest.max(end - start);
        segments.push((start / max, flat_ids[start..end].to_vec()));
    }
    assert_eq!(batch.max_seqlen, longest);
    // Every row start is a boundary.
    for row in 0..batch.ids.len() {
        assert!(batch.cu_seqlens.contains(&((row * max) as i32)));
    }
    // Padding is a segment of its own holding only the pad value, which no document holds.
    let documents = segments
        .into_iter()
        .filter_map(|(row, tokens)| {
            if tokens.iter().all(|&t| t == pad_value) {
                pads[row] += tokens.len();
                None
            } else {
                Some(tokens)
            }
        })
        .collect();
    (documents, pads)
}

fn options_strategy() -> impl Strategy<Value = ConcatPackOptions> {
    (
        1usize..12,
        1usize..5,
        proptest::option::of(Just(9001i64)),
        proptest::option::of(Just(9002i64)),
        any::<bool>(),
        1usize..4,
        any::<bool>(),
    )
        .prop_map(
            |(max_length, batch_size, bos, eos, split, open_rows, drop_last)| {
                ConcatPackOptions {
                    bos_token_id: bos,
                    eos_token_id: eos,
                    split_documents: split,
                    // A value no document holds, so that the tests can tell padding apart.
                    pad_value: i64::from(i32::MIN),
                    open_rows,
                    drop_last,
                    ..ConcatPackOptions::new(max_length, batch_size)
                }
            },
        )
}

fn docs_strategy() -> impl Strategy<Value = Vec<Vec<i32>>> {
    proptest::collection::vec(proptest::collection::vec(1i32..1000, 0..30), 0..25)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// With `split_documents`, the batches equal the model: every token once, in order, rows
    /// of exactly `max_length`, position ids restarting at every document and row start, and
    /// cu_seqlens at the same boundaries; however the documents come in record batches.
    #[test]
    fn split_packing_equals_the_model(
        options in options_strategy(),
        docs in docs_strategy(),
        cuts in proptest::collection::vec(1usize..8, 1..4),
    ) {
        let options = ConcatPackOptions { split_documents: true, ..options };
        let packer = ConcatPacker::new(options.clone(), DType::Int32).unwrap();
        let got = run(packer, &docs, 0, &cuts).batches;
        prop_assert_eq!(got, model_split(&docs, &options));
    }

    /// Without `split_documents`, every document (special tokens included) is one segment of
    /// one row, or fills rows of its own when longer than a row; every row is `max_length`
    /// long, its documents first and its padding after, and nothing is lost or repeated.
    #[test]
    fn best_fit_packing_keeps_documents_whole(
        options in options_strategy(),
        docs in docs_strategy(),
        cuts in proptest::collection::vec(1usize..8, 1..4),
    ) {
        let options = ConcatPackOptions { split_documents: false, drop_last: false, ..options };
        let packer = ConcatPacker::new(options.clone(), DType::Int32).unwrap();
        let batches = run(packer, &docs, 0, &cuts).batches;
        let max = options.max_length;
        let mut found: Vec<Vec<i32>> = Vec::new();
        for (i, batch) in batches.iter().enumerate() {
            if i + 1 < batches.len() {
                prop_assert_eq!(batch.ids.len(), options.batch_size);
            }
            let (segments, pads) = segments_of(batch, i32::MIN);
            for (row, pad) in batch.ids.iter().zip(&pads) {
                prop_assert_eq!(row.len(), max);
                prop_assert!(row[max - pad..].iter().all(|&t| t == i32::MIN));
                prop_assert!(row[..max - pad].iter().all(|&t| t != i32::MIN));
            }
            found.extend(segments);
        }
        let mut expected: Vec<Vec<i32>> = Vec::new();
        for doc in &docs {
            let mut full: Vec<i32> = Vec::new();
            full.extend(options.bos_token_id.map(|t| t as i32));
            full.extend(doc);
            full.extend(options.eos_token_id.map(|t| t as i32));
            expected.extend(full.chunks(max).map(<[i32]>::to_vec));
        }
        found.sort();
        expected.sort();
        prop_assert_eq!(found, expected);
    }

    /// A packer resumed from the carry taken after any batch (through JSON, as a saved state
    /// travels) and fed the documents that follow gives the batches of an uninterrupted run.
    #[test]
    fn a_resumed_packer_gives_the_uninterrupted_batches(
        options in options_strategy(),
        docs in docs_strategy(),
        cuts in proptest::collection::vec(1usize..8, 1..4),
        at in any::<prop::sample::Index>(),
    ) {
        let packer = ConcatPacker::new(options.clone(), DType::Int32).unwrap();
        let whole = run(packer, &docs, 0, &cuts);
        prop_assume!(!whole.marks.is_empty());
        let k = at.index(whole.marks.len());
        let (pushed, carry) = &whole.marks[k];
        let json = serde_json::to_string(carry).unwrap();
        let carry: ConcatCarry = serde_json::from_str(&json).unwrap();
        let resumed = ConcatPacker::resume(options.clone(), DType::Int32, carry).unwrap();
        let rest = run(resumed, &docs, *pushed, &cuts).batches;
        prop_assert_eq!(&whole.batches[k + 1..], &rest[..]);
    }
}

#[test]
fn a_worked_example_of_split_packing() {
    // Documents [1 2 3], [4 5 6 7 8], [9] with eos 0 in rows of 4: the stream is
    // 1 2 3 0 | 4 5 6 7 | 8 0 9 0, the second document running over a row start.
    let options = ConcatPackOptions {
        eos_token_id: Some(0),
        ..ConcatPackOptions::new(4, 3)
    };
    let mut packer = ConcatPacker::new(options, DType::Int32).unwrap();
    let docs = ragged(&[vec![1, 2, 3], vec![4, 5, 6, 7, 8], vec![9]]);
    assert_eq!(packer.push(&docs, 0).unwrap(), 3);
    // The twelve tokens fill the three rows of a batch exactly.
    let batch = packer.next_batch().unwrap().unwrap();
    let plain = plain(&batch, 4);
    assert_eq!(plain.ids, [[1, 2, 3, 0], [4, 5, 6, 7], [8, 0, 9, 0]]);
    assert_eq!(plain.positions, [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 1]]);
    assert_eq!(plain.cu_seqlens, [0, 4, 8, 10, 12]);
    assert_eq!(plain.max_seqlen, 4);
    packer.finish();
    assert!(packer.next_batch().unwrap().is_none());
}

#[test]
fn the_ids_keep_the_documents_element_type() {
    let list: ArrayRef = Arc::new(ListArray::new(
        Arc::new(arrow_schema::Field::new_list_field(
            arrow_schema::DataType::UInt16,
            true,
        )),
        arrow_buffer::OffsetBuffer::from_lengths([2, 3]),
        Arc::new(arrow_array::UInt16Array::from(vec![1, 2, 65535, 4, 5])),
        None,
    ));
    let docs = list_to_ragged(list.as_ref(), ListToRaggedOptions::default()).unwrap();
    let options = ConcatPackOptions {
        pad_value: 7,
        ..ConcatPackOptions::new(3, 2)
    };
    let mut packer = ConcatPacker::new(options, DType::UInt16).unwrap();
    packer.push(&docs, 0).unwrap();
    packer.finish();
    let batch = packer.next_batch().unwrap().unwrap();
    assert_eq!(batch.ids.dtype(), DType::UInt16);
    assert_eq!(
        batch.ids.as_slice::<u16>().unwrap(),
        &[1, 2, 65535, 4, 5, 7]
    );
}

fn invalid_spec(result: Result<ConcatPacker>) -> String {
    match result {
        Err(Error::InvalidSpec { reason }) => reason,
        other => panic!("expected InvalidSpec, got {other:?}"),
    }
}

#[test]
fn rejects_options_that_cannot_make_rows() {
    let reason = invalid_spec(ConcatPacker::new(
        ConcatPackOptions::new(0, 8),
        DType::Int32,
    ));
    assert!(reason.contains("max_length = 0"), "{reason}");
    let reason = invalid_spec(ConcatPacker::new(
        ConcatPackOptions::new(1 << 20, 1 << 12),
        DType::Int32,
    ));
    assert!(reason.contains("int32 cu_seqlens"), "{reason}");
    let reason = invalid_spec(ConcatPacker::new(
        ConcatPackOptions {
            pad_value: -100,
            ..ConcatPackOptions::new(8, 2)
        },
        DType::UInt8,
    ));
    assert!(reason.contains("pad_value = -100"), "{reason}");
    let reason = invalid_spec(ConcatPacker::new(
        ConcatPackOptions {
            eos_token_id: Some(200),
            ..ConcatPackOptions::new(8, 2)
        },
        DType::Int8,
    ));
    assert!(reason.contains("eos_token_id = 200"), "{reason}");
    let reason = invalid_spec(ConcatPacker::new(
        ConcatPackOptions::new(8, 2),
        DType::Float32,
    ));
    assert!(reason.contains("integer tokens"), "{reason}");
}

#[test]
fn rejects_documents_of_another_type_and_pushes_after_finish() {
    let mut packer = ConcatPacker::new(ConcatPackOptions::new(4, 1), DType::Int64).unwrap();
    let reason = match packer.push(&ragged(&[vec![1]]), 0) {
        Err(Error::InvalidSpec { reason }) => reason,
        other => panic!("{other:?}"),
    };
    assert!(
        reason.contains("rows of int32") && reason.contains("int64"),
        "{reason}"
    );
    let mut packer = ConcatPacker::new(ConcatPackOptions::new(4, 1), DType::Int32).unwrap();
    packer.finish();
    assert!(matches!(
        packer.push(&ragged(&[vec![1]]), 0),
        Err(Error::InvalidSpec { .. })
    ));
}

#[test]
fn rejects_a_carry_that_the_options_cannot_have_made() {
    let options = ConcatPackOptions::new(4, 2);
    let short_closed = ConcatCarry {
        closed: vec![arrow_dlpack_loader::CarriedRow {
            tokens: vec![1, 2],
            segments: vec![2],
        }],
        open: vec![],
    };
    let bad_segments = ConcatCarry {
        closed: vec![],
        open: vec![arrow_dlpack_loader::CarriedRow {
            tokens: vec![1, 2],
            segments: vec![1],
        }],
    };
    for carry in [short_closed, bad_segments] {
        match ConcatPacker::resume(options.clone(), DType::Int32, carry) {
            Err(Error::InvalidState { reason }) => {
                assert!(reason.contains("max_length = 4"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    let too_large = ConcatCarry {
        closed: vec![],
        open: vec![arrow_dlpack_loader::CarriedRow {
            tokens: vec![300],
            segments: vec![1],
        }],
    };
    assert!(matches!(
        ConcatPacker::resume(options, DType::UInt8, too_large),
        Err(Error::InvalidState { .. })
    ));
}
