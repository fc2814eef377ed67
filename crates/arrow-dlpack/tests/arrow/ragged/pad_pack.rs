//! Padding, truncation, unpadding and packing.

use arrow_dlpack::{
    DType, Error, PadOptions, PadValue, RaggedTensor, Side, Tensor, half::f16, pack_pieces,
    pad_pieces,
};
use proptest::prelude::*;

use super::i32_tensor;

/// Rows [1, 2, 3], [], [4, 5].
fn sample() -> RaggedTensor {
    RaggedTensor::new(
        i32_tensor(vec![1, 2, 3, 4, 5]),
        i32_tensor(vec![0, 3, 3, 5]),
    )
    .unwrap()
}

fn padded(ragged: &RaggedTensor, options: PadOptions) -> (Vec<usize>, Vec<i32>) {
    let tensor = ragged.to_padded(&options).unwrap();
    assert!(!tensor.is_read_only());
    (
        tensor.shape().to_vec(),
        tensor.as_slice::<i32>().unwrap().to_vec(),
    )
}

#[test]
fn pads_right_with_zero_by_default() {
    let (shape, values) = padded(&sample(), PadOptions::default());
    assert_eq!(shape, [3, 3]);
    assert_eq!(values, [1, 2, 3, 0, 0, 0, 4, 5, 0]);
}

#[test]
fn pads_left_with_a_value() {
    let options = PadOptions {
        pad_value: PadValue::Int(-100),
        padding_side: Side::Left,
        ..Default::default()
    };
    let (_, values) = padded(&sample(), options);
    assert_eq!(values, [1, 2, 3, -100, -100, -100, -100, 4, 5]);
}

#[test]
fn truncates_either_side() {
    let right = PadOptions {
        max_length: Some(2),
        ..Default::default()
    };
    assert_eq!(
        padded(&sample(), right),
        (vec![3, 2], vec![1, 2, 0, 0, 4, 5])
    );
    let left = PadOptions {
        max_length: Some(2),
        truncation_side: Side::Left,
        padding_side: Side::Left,
        ..Default::default()
    };
    assert_eq!(
        padded(&sample(), left),
        (vec![3, 2], vec![2, 3, 0, 0, 4, 5])
    );
    let zero = PadOptions {
        max_length: Some(0),
        ..Default::default()
    };
    assert_eq!(padded(&sample(), zero), (vec![3, 0], vec![]));
}

#[test]
fn rounds_the_length_up_to_a_multiple() {
    let options = PadOptions {
        pad_to_multiple_of: Some(4),
        pad_value: PadValue::Int(9),
        ..Default::default()
    };
    let (shape, values) = padded(&sample(), options);
    assert_eq!(shape, [3, 4]);
    assert_eq!(values, [1, 2, 3, 9, 9, 9, 9, 9, 4, 5, 9, 9]);
    let zero = PadOptions {
        pad_to_multiple_of: Some(0),
        ..Default::default()
    };
    assert!(matches!(
        sample().to_padded(&zero),
        Err(Error::InvalidPadding { .. })
    ));
}

#[test]
fn pads_inner_dimensions_and_half_floats() {
    let values = Tensor::from_vec(
        (0..6).map(|v| f16::from_f32(v as f32)).collect(),
        vec![3, 2],
    )
    .unwrap();
    let ragged = RaggedTensor::new(values, i32_tensor(vec![0, 1, 3])).unwrap();
    let options = PadOptions {
        pad_value: PadValue::Float(-0.5),
        ..Default::default()
    };
    let tensor = ragged.to_padded(&options).unwrap();
    assert_eq!(tensor.shape(), &[2, 2, 2]);
    let got: Vec<f32> = tensor
        .as_slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(got, [0.0, 1.0, -0.5, -0.5, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn pad_values_are_checked_against_the_dtype() {
    let bytes = |value: PadValue, dtype| value.to_element_bytes(dtype);
    assert!(bytes(PadValue::Int(-100), DType::UInt8).is_err());
    assert!(bytes(PadValue::Float(0.5), DType::Int32).is_err());
    assert!(bytes(PadValue::Float(1e6), DType::Float16).is_err());
    assert!(bytes(PadValue::Int(2), DType::Bool).is_err());
    assert!(bytes(PadValue::Int(1), DType::Complex64).is_err());
    assert_eq!(bytes(PadValue::Float(3.0), DType::Int8).unwrap(), [3]);
    assert_eq!(
        bytes(PadValue::UInt(u64::MAX), DType::UInt64).unwrap(),
        u64::MAX.to_ne_bytes()
    );
    assert_eq!(bytes(PadValue::Bool(true), DType::Bool).unwrap(), [1]);
    assert_eq!(
        bytes(PadValue::Bool(true), DType::Float32).unwrap(),
        1f32.to_ne_bytes()
    );
    assert_eq!(bytes(PadValue::Int(0), DType::Complex128).unwrap(), [0; 16]);
    assert_eq!(
        bytes(PadValue::Float(f64::NEG_INFINITY), DType::Float16).unwrap(),
        f16::NEG_INFINITY.to_ne_bytes()
    );
    let error = sample()
        .to_padded(&PadOptions {
            pad_value: PadValue::Float(0.5),
            ..Default::default()
        })
        .unwrap_err();
    assert!(matches!(error, Error::PadValue { .. }), "{error}");
}

#[test]
fn pad_pieces_equals_padding_the_concatenation() {
    let a = sample();
    let b = RaggedTensor::new(i32_tensor(vec![7, 8, 9, 10]), i32_tensor(vec![0, 4])).unwrap();
    let options = PadOptions {
        pad_value: PadValue::Int(-1),
        ..Default::default()
    };
    let pieces = pad_pieces(&[a.clone(), b.clone()], &options).unwrap();
    let whole = RaggedTensor::concat(&[a, b])
        .unwrap()
        .to_padded(&options)
        .unwrap();
    assert_eq!(pieces.shape(), &[4, 4]);
    assert_eq!(
        pieces.as_slice::<i32>().unwrap(),
        whole.as_slice::<i32>().unwrap()
    );
    assert!(matches!(
        pad_pieces(&[], &options),
        Err(Error::NoPieces { .. })
    ));
}

#[test]
fn from_padded_inverts_padding_on_either_side() {
    let ragged = sample();
    for side in [Side::Left, Side::Right] {
        let options = PadOptions {
            padding_side: side,
            pad_value: PadValue::Int(-7),
            ..Default::default()
        };
        let tensor = ragged.to_padded(&options).unwrap();
        let back = RaggedTensor::from_padded(&tensor, &ragged.lengths().unwrap(), side).unwrap();
        assert_eq!(
            back.values().as_slice::<i32>().unwrap(),
            ragged.values().as_slice::<i32>().unwrap()
        );
        assert_eq!(back.offsets().as_slice::<i32>().unwrap(), &[0, 3, 3, 5]);
    }
    let too_long = Tensor::from_vec(vec![4u8, 0, 1], vec![3]).unwrap();
    let tensor = ragged.to_padded(&PadOptions::default()).unwrap();
    let error = RaggedTensor::from_padded(&tensor, &too_long, Side::Right).unwrap_err();
    assert!(matches!(error, Error::InvalidPadding { .. }), "{error}");
}

#[test]
fn from_padded_of_a_broadcast_of_2_62_rows_is_out_of_memory_not_an_abort() {
    // Zero strides: one element stands for every row, so the rows cost nothing until they are
    // read. The lengths were collected into an infallible `Vec` of `B` entries, which panicked
    // (capacity overflow) here and aborted the process at 2**31 rows.
    let rows = 1usize << 62;
    let broadcast = |value: i8, shape: Vec<usize>| {
        let strides = vec![0; shape.len()];
        Tensor::try_new(
            arrow_dlpack::Buffer::from_vec(vec![value]),
            DType::Int8,
            shape,
            strides,
            0,
        )
        .unwrap()
    };
    let padded = broadcast(0, vec![rows, 1]);
    let lengths = broadcast(1, vec![rows]);
    let error = RaggedTensor::from_padded(&padded, &lengths, Side::Right).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Tensor(arrow_dlpack::tensor::Error::OutOfMemory { .. })
        ),
        "{error}"
    );
}

#[test]
fn packs_with_cu_seqlens_and_position_ids() {
    let ragged = sample();
    let packed = ragged.to_packed().unwrap();
    assert_eq!(packed.values.data_ptr(), ragged.values().data_ptr());
    assert_eq!(packed.cu_seqlens.dtype(), DType::Int32);
    assert_eq!(packed.cu_seqlens.as_slice::<i32>().unwrap(), &[0, 3, 3, 5]);
    assert_eq!(
        packed.position_ids.as_slice::<i64>().unwrap(),
        &[0, 1, 2, 0, 1]
    );
    assert_eq!(packed.max_seqlen, 3);
    // Int64 offsets become int32 cu_seqlens; several pieces are copied once.
    let large = RaggedTensor::new(
        i32_tensor(vec![7, 8]),
        Tensor::from_vec(vec![0i64, 2], vec![2]).unwrap(),
    )
    .unwrap();
    let packed = pack_pieces(&[ragged, large]).unwrap();
    assert_eq!(
        packed.cu_seqlens.as_slice::<i32>().unwrap(),
        &[0, 3, 3, 5, 7]
    );
    assert_eq!(
        packed.values.as_slice::<i32>().unwrap(),
        &[1, 2, 3, 4, 5, 7, 8]
    );
    assert_eq!(
        packed.position_ids.as_slice::<i64>().unwrap(),
        &[0, 1, 2, 0, 1, 0, 1]
    );
}

/// Pads by a reference written element by element.
fn reference_padding(rows: &[Vec<i32>], options: &PadOptions, pad: i32) -> (usize, Vec<i32>) {
    let cap = options.max_length.unwrap_or(usize::MAX);
    let kept: Vec<Vec<i32>> = rows
        .iter()
        .map(|row| {
            let keep = row.len().min(cap);
            match options.truncation_side {
                Side::Right => row[..keep].to_vec(),
                Side::Left => row[row.len() - keep..].to_vec(),
            }
        })
        .collect();
    let longest = kept.iter().map(Vec::len).max().unwrap_or(0);
    let multiple = options.pad_to_multiple_of.unwrap_or(1);
    let width = longest.div_ceil(multiple) * multiple;
    let mut out = Vec::new();
    for row in kept {
        let padding = vec![pad; width - row.len()];
        match options.padding_side {
            Side::Right => out.extend(row.iter().chain(&padding)),
            Side::Left => out.extend(padding.iter().chain(&row)),
        }
    }
    (width, out)
}

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![Just(Side::Left), Just(Side::Right)]
}

proptest! {
    #[test]
    fn padding_matches_the_reference(
        rows in prop::collection::vec(prop::collection::vec(any::<i32>(), 0..12), 0..10),
        max_length in prop::option::of(0usize..10),
        multiple in prop::option::of(1usize..5),
        padding_side in side(),
        truncation_side in side(),
        pad in any::<i32>(),
        split in 0usize..10,
    ) {
        let options = PadOptions {
            pad_value: PadValue::Int(i64::from(pad)),
            max_length,
            pad_to_multiple_of: multiple,
            padding_side,
            truncation_side,
        };
        let (width, expected) = reference_padding(&rows, &options, pad);
        let tensors: Vec<Tensor> = rows.iter().map(|row| i32_tensor(row.clone())).collect();
        // Two pieces split at `split`, each built from its rows (an empty piece has no rows).
        let split = split.min(rows.len());
        let piece = |part: &[Tensor]| {
            if part.is_empty() {
                RaggedTensor::new(i32_tensor(vec![]), i32_tensor(vec![0])).unwrap()
            } else {
                RaggedTensor::from_rows(part).unwrap()
            }
        };
        let pieces = [piece(&tensors[..split]), piece(&tensors[split..])];
        let tensor = pad_pieces(&pieces, &options).unwrap();
        prop_assert_eq!(tensor.shape(), &[rows.len(), width]);
        prop_assert_eq!(tensor.as_slice::<i32>().unwrap(), expected.as_slice());
    }
}
