//! The `"concat"` mode of a sequence in the loader ([`Sequence::concat`]): batches equal those of
//! a [`ConcatPacker`] fed the same documents, a run stopped after any batch resumes to the same
//! rows (the carried tokens in the typed state), shards pack their own documents, and the spec's
//! errors.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch};
use arrow_dlpack::{ListToRaggedOptions, list_to_ragged};
use arrow_dlpack_loader::{
    BatchSpec, ConcatPackOptions, ConcatPacker, Error, LoaderState, Sequence, Source, TensorBatch,
    batches, merge_states,
};
use arrow_dlpack_tensor::DType;

use crate::data::{chain, collect, reader, values};

/// Document `i` holds `i % 7` tokens `1000 * i + j`, so every token names its document.
fn documents(count: usize) -> Vec<Vec<i32>> {
    (0..count)
        .map(|i| (0..(i % 7) as i32).map(|j| 1000 * i as i32 + j).collect())
        .collect()
}

/// The documents in record batches of `sizes` rows, with an `id` column.
fn source(docs: &[Vec<i32>], sizes: &[usize]) -> Source {
    let mut out = Vec::new();
    let mut start = 0;
    for &size in sizes {
        let part = &docs[start..start + size];
        let tokens: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
            part.iter().map(|doc| Some(doc.iter().map(|&t| Some(t)))),
        ));
        let id: ArrayRef = Arc::new(Int64Array::from_iter_values(
            start as i64..(start + size) as i64,
        ));
        out.push(RecordBatch::try_from_iter([("id", id), ("tokens", tokens)]).unwrap());
        start += size;
    }
    reader(out)
}

// The end-of-document id 999 is held by no document (their ids are 1000 * i + j, j < 7).
const SIZES: [usize; 4] = [9, 4, 13, 6];

fn concat() -> Sequence {
    Sequence::concat("tokens", 6).eos_token_id(999)
}

fn spec() -> BatchSpec {
    BatchSpec::new(3).sequence(concat())
}

/// The tensors of a batch as plain vectors, in name order.
fn plain(batch: &TensorBatch) -> (Vec<i32>, Vec<i64>, Vec<i32>, Vec<i64>) {
    (
        values(&batch["tokens"]),
        values(&batch["tokens_position_ids"]),
        values(&batch["tokens_cu_seqlens"]),
        values(&batch["tokens_max_seqlen"]),
    )
}

#[test]
fn batches_equal_those_of_a_concat_packer_fed_the_same_documents() {
    let docs = documents(32);
    let got: Vec<_> = collect(source(&docs, &SIZES), spec())
        .iter()
        .map(plain)
        .collect();
    let mut options = ConcatPackOptions::new(6, 3);
    options.eos_token_id = Some(999);
    let mut packer = ConcatPacker::new(options, DType::Int32).unwrap();
    let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
        docs.iter().map(|doc| Some(doc.iter().map(|&t| Some(t)))),
    ));
    let ragged = list_to_ragged(list.as_ref(), ListToRaggedOptions::default()).unwrap();
    let mut expected = Vec::new();
    let mut start = 0;
    loop {
        start += packer.push(&ragged, start).unwrap();
        while let Some(batch) = packer.next_batch().unwrap() {
            let max_seqlen = vec![batch.max_seqlen as i64];
            expected.push((
                batch.ids.as_slice::<i32>().unwrap().to_vec(),
                batch.position_ids.as_slice::<i64>().unwrap().to_vec(),
                batch.cu_seqlens.as_slice::<i32>().unwrap().to_vec(),
                max_seqlen,
            ));
        }
        if start == docs.len() {
            packer.finish();
            if let Some(batch) = packer.next_batch().unwrap() {
                expected.push((
                    batch.ids.as_slice::<i32>().unwrap().to_vec(),
                    batch.position_ids.as_slice::<i64>().unwrap().to_vec(),
                    batch.cu_seqlens.as_slice::<i32>().unwrap().to_vec(),
                    vec![batch.max_seqlen as i64],
                ));
            }
            break;
        }
    }
    assert!(expected.len() > 4);
    assert_eq!(got, expected);
    // Every row but the last is exactly max_length tokens of documents and separators.
    let tokens: usize = docs.iter().map(|doc| doc.len() + 1).sum();
    assert_eq!(got.len(), tokens.div_ceil(6).div_ceil(3));
}

#[test]
fn a_run_stopped_after_any_batch_resumes_to_the_same_rows() {
    let docs = documents(32);
    for shuffled in [false, true] {
        let spec = if shuffled {
            spec().shuffle(5).buffer_size(10)
        } else {
            spec()
        };
        let whole: Vec<_> = collect(source(&docs, &SIZES), spec.clone())
            .iter()
            .map(plain)
            .collect();
        for k in 0..=whole.len() {
            let mut loader = batches(source(&docs, &SIZES), spec.clone()).unwrap();
            for _ in 0..k {
                loader.next().unwrap().unwrap();
            }
            let state = loader.state();
            assert!(state.concat.is_some());
            // Through JSON, as a checkpoint keeps it.
            let text = serde_json::to_string(&state).unwrap();
            let state: LoaderState = serde_json::from_str(&text).unwrap();
            let rest: Vec<_> = collect(source(&docs, &SIZES), spec.clone().state(state))
                .iter()
                .map(plain)
                .collect();
            assert_eq!(rest, whole[k..], "shuffled {shuffled}, stopped after {k}");
        }
    }
}

#[test]
fn a_state_of_other_concat_options_is_refused_naming_the_option() {
    let docs = documents(20);
    let mut loader = batches(source(&docs, &[20]), spec()).unwrap();
    loader.next().unwrap().unwrap();
    let state = loader.state();
    let other = BatchSpec::new(3).sequence(Sequence::concat("tokens", 6).eos_token_id(998));
    let error = batches(source(&docs, &[20]), other.state(state.clone()))
        .err()
        .expect("another eos_token_id is refused");
    assert_eq!(
        chain(&error),
        "cannot resume from the state: sequences[\"tokens\"].eos_token_id: saved 999, given 998"
    );
    let merged = merge_states(&[state]).unwrap_err();
    assert!(
        chain(&merged).contains("\"concat\" sequence"),
        "{}",
        chain(&merged)
    );
}

#[test]
fn shards_pack_their_own_documents() {
    let docs = documents(40);
    let mut seen = Vec::new();
    for shard in 0..2 {
        for batch in collect(source(&docs, &[10, 10, 10, 10]), spec().shard(shard, 2)) {
            let tokens: Vec<i32> = values(&batch["tokens"]);
            // Every token but the end-of-document ids (and the padding of a last short row).
            seen.extend(tokens.into_iter().filter(|&t| t > 0 && t != 999));
        }
    }
    seen.sort_unstable();
    let mut all: Vec<i32> = docs.concat().into_iter().filter(|&t| t > 0).collect();
    all.sort_unstable();
    assert_eq!(seen, all);
}

#[test]
fn a_concat_sequence_needs_max_length_and_stands_alone() {
    let invalid = |spec: BatchSpec| match batches(source(&documents(5), &[5]), spec) {
        Err(error @ Error::InvalidSpec { .. }) => chain(&error),
        Err(other) => panic!("expected an invalid spec, got {}", chain(&other)),
        Ok(_) => panic!("the spec was accepted"),
    };
    let without = Sequence::new("tokens", arrow_dlpack_loader::SequenceMode::Concat);
    assert!(invalid(BatchSpec::new(2).sequence(without)).contains("without max_length"),);
    let message = invalid(spec().columns(["id"]));
    assert!(
        message.contains("expected no columns beside it"),
        "{message}"
    );
    let message = invalid(spec().max_tokens(10));
    assert!(
        message.contains("expected no max_tokens beside it"),
        "{message}"
    );
    let message = invalid(BatchSpec::new(2).sequence(Sequence::pack("tokens").eos_token_id(1)));
    assert!(
        message.contains("apply to mode \"concat\" only"),
        "{message}"
    );
    // Rows of 2**31 tokens or more do not fit int32 cu_seqlens.
    let huge = BatchSpec::new(1 << 20).sequence(Sequence::concat("tokens", 1 << 12));
    assert!(batches(source(&documents(5), &[5]), huge).is_err());
}
