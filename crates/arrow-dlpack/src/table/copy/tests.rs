//! The copy kernel against a naive reference: every value converted alone with the conversion of
//! `ConvertTo` and written at `row * num_columns + column` (or `column * num_rows + row`), nulls
//! as NaN, compared byte for byte (NaN payloads included), for every destination element type,
//! mixed column types, row counts that do not fill tiles or blocks, groups wider than
//! [`MAX_GROUP`], sliced arrays, and several pieces.

use std::sync::Arc;

use arrow_array::{ArrayRef, PrimitiveArray};
use arrow_buffer::ToByteSlice;

use super::*;

/// Every numeric table dtype.
const DTYPES: [DType; 11] = crate::data_type::ARROW_DTYPES;

/// Row counts around the tiles of 4 rows, and one past a block.
const ROW_COUNTS: [usize; 22] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 15, 16, 17, 31, 32, 33, 47, 63, 64, 70, 4097,
];

/// Column counts around the groups of 4 and of [`MAX_GROUP`].
const COLUMN_COUNTS: [usize; 17] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 16, 17, 20, 33, 40];

/// A xorshift generator: deterministic inputs without a dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

/// Float bits worth converting: zeros, infinities, quiet and signalling NaNs with payloads and
/// both signs, the extremes, and small integers.
fn float_bits<const BITS: u32>(random: &mut Random) -> u64 {
    let exponent_mask = match BITS {
        16 => 0x7c00,
        32 => 0x7f80_0000,
        _ => 0x7ff0_0000_0000_0000,
    };
    let sign = 1u64 << (BITS - 1);
    let raw = random.next() & (u64::MAX >> (64 - BITS));
    match random.below(8) {
        0 => exponent_mask | 1 | (raw & sign), // a signalling NaN
        1 => exponent_mask | (raw & !sign),    // a NaN (or infinity) with a payload
        2 => [0, sign, exponent_mask, exponent_mask | sign][random.below(4)],
        _ => raw,
    }
}

/// `len` values of `dtype` (after `offset` values sliced off), nulls in some rows when `nulls`.
fn column(dtype: DType, len: usize, offset: usize, nulls: bool, random: &mut Random) -> ArrayRef {
    fn array<T: ArrowPrimitiveType>(
        values: impl Fn(&mut Random) -> T::Native,
        len: usize,
        nulls: bool,
        random: &mut Random,
    ) -> ArrayRef {
        let values: Vec<Option<T::Native>> = (0..len)
            .map(|_| {
                let value = values(random);
                (!nulls || random.below(5) != 0).then_some(value)
            })
            .collect();
        Arc::new(PrimitiveArray::<T>::from_iter(values))
    }
    let full = len + offset;
    let array = match dtype {
        DType::Int8 => array::<Int8Type>(|r| r.next() as i8, full, nulls, random),
        DType::Int16 => array::<Int16Type>(|r| r.next() as i16, full, nulls, random),
        DType::Int32 => array::<Int32Type>(|r| r.next() as i32, full, nulls, random),
        DType::Int64 => array::<Int64Type>(|r| r.next() as i64, full, nulls, random),
        DType::UInt8 => array::<UInt8Type>(|r| r.next() as u8, full, nulls, random),
        DType::UInt16 => array::<UInt16Type>(|r| r.next() as u16, full, nulls, random),
        DType::UInt32 => array::<UInt32Type>(|r| r.next() as u32, full, nulls, random),
        DType::UInt64 => array::<UInt64Type>(|r| r.next(), full, nulls, random),
        DType::Float16 => array::<Float16Type>(
            |r| f16::from_bits(float_bits::<16>(r) as u16),
            full,
            nulls,
            random,
        ),
        DType::Float32 => array::<Float32Type>(
            |r| f32::from_bits(float_bits::<32>(r) as u32),
            full,
            nulls,
            random,
        ),
        DType::Float64 => {
            array::<Float64Type>(|r| f64::from_bits(float_bits::<64>(r)), full, nulls, random)
        }
        other => unreachable!("{other} is not a table dtype"),
    };
    array.slice(offset, len)
}

/// The checked columns of `arrays`.
fn copy_columns_of(arrays: &[ArrayRef]) -> Vec<CopyColumn<'_>> {
    let dtype = |array: &ArrayRef| crate::dtype_of(array.data_type()).expect("a numeric column");
    arrays
        .iter()
        .map(|array| CopyColumn {
            array: array.as_ref(),
            dtype: dtype(array),
            nulls: array.nulls().cloned(),
        })
        .collect()
}

/// The naive reference: each column converted alone by the contiguous writer (one
/// `ConvertTo::convert` per value), each value placed at its position, nulls as NaN.
fn reference<D: Element>(pieces: &[&[CopyColumn<'_>]], row_major: bool) -> Vec<D> {
    let num_columns = pieces[0].len();
    let num_rows: usize = pieces.iter().map(|columns| columns[0].array.len()).sum();
    let mut out = vec![D::default(); num_rows * num_columns];
    let mut first_row = 0;
    for columns in pieces {
        let len = columns[0].array.len();
        for (index, column) in columns.iter().enumerate() {
            let mut run = vec![MaybeUninit::<D>::uninit(); len];
            D::writer(column.dtype)(column.array, 0..len, &mut run);
            for (row, slot) in run.iter().enumerate() {
                // SAFETY: the writer initialised every slot of the run.
                let mut value = unsafe { slot.assume_init() };
                if column
                    .nulls
                    .as_ref()
                    .is_some_and(|nulls| nulls.is_null(row))
                {
                    value = D::NAN.expect("nulls only into floats");
                }
                let row = first_row + row;
                let position = if row_major {
                    row * num_columns + index
                } else {
                    index * num_rows + row
                };
                out[position] = value;
            }
        }
        first_row += len;
    }
    out
}

/// Random columns of `num_columns` of `dtypes` (mostly of those the fused kernels read, when
/// `D` is float64), of `len + offset` values sliced at `offset`.
fn random_columns<D: Element>(
    num_columns: usize,
    len: usize,
    random: &mut Random,
) -> Vec<ArrayRef> {
    let float = D::NAN.is_some();
    (0..num_columns)
        .map(|_| {
            let dtype = if D::DTYPE == DType::Float64 && random.below(4) != 0 {
                [DType::Float64, DType::Float32, DType::Int32, DType::Int64][random.below(4)]
            } else {
                DTYPES[random.below(DTYPES.len())]
            };
            let offset = [0, 0, 1, 3, 7][random.below(5)];
            column(dtype, len, offset, float && random.below(3) == 0, random)
        })
        .collect()
}

/// Checks `write_columns` of one table in one call and in several calls at row offsets, and
/// `copy_columns` of the table cut into pieces, both layouts, against the reference.
fn check<D: Element>(num_columns: usize, num_rows: usize, random: &mut Random) {
    let arrays = random_columns::<D>(num_columns, num_rows, random);
    let columns = copy_columns_of(&arrays);
    for row_major in [true, false] {
        let expected = reference::<D>(&[&columns], row_major);
        let context = format!(
            "{} {num_columns}x{num_rows} row-major {row_major}",
            D::DTYPE
        );

        // In one call, then in up to 3 calls of consecutive rows at their row offsets.
        let mut cuts = vec![0, num_rows];
        cuts.extend((0..random.below(3)).map(|_| random.below(num_rows + 1)));
        cuts.sort_unstable();
        for calls in [&[0, num_rows][..], &cuts] {
            let mut slots = vec![MaybeUninit::<D>::uninit(); num_rows * num_columns];
            for rows in calls.windows(2) {
                let target = Target {
                    slots: &mut slots,
                    num_rows,
                    row_offset: rows[0],
                    row_major,
                };
                write_columns(&columns, rows[0]..rows[1], target);
            }
            // SAFETY: the calls wrote every row of every column (`write_columns`'s contract).
            let written = unsafe { assume_init(&slots) };
            assert!(
                written.to_byte_slice() == expected.to_byte_slice(),
                "{context}, calls at {calls:?}"
            );
        }

        // The table cut into pieces of sliced columns, as `tables_to_tensor` stacks them.
        let pieces_arrays: Vec<Vec<ArrayRef>> = cuts
            .windows(2)
            .map(|rows| {
                let len = rows[1] - rows[0];
                arrays
                    .iter()
                    .map(|array| array.slice(rows[0], len))
                    .collect()
            })
            .collect();
        let pieces: Vec<(Vec<CopyColumn<'_>>, usize)> = pieces_arrays
            .iter()
            .map(|arrays| (copy_columns_of(arrays), arrays[0].len()))
            .collect();
        let tensor = copy_columns(&pieces, D::DTYPE, row_major).expect("a tensor");
        assert_eq!(tensor.shape(), [num_rows, num_columns]);
        assert!(
            tensor.buffer().as_slice() == expected.to_byte_slice(),
            "{context}, pieces at {cuts:?}"
        );
    }
}

#[test]
fn every_element_type_matches_the_naive_reference() {
    fn check_all<D: Element>(random: &mut Random) {
        for num_columns in COLUMN_COUNTS {
            for num_rows in ROW_COUNTS {
                check::<D>(num_columns, num_rows, random);
            }
        }
    }
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    macro_rules! check_all {
        ($d:ty, $arrow:ty) => {
            check_all::<$d>(&mut random)
        };
    }
    for dtype in DTYPES {
        with_element!(dtype, check_all);
    }
}

#[test]
fn float64_from_float32_keeps_the_bits_of_as() {
    // Signalling and quiet NaNs of both signs with payloads, infinities, zeros, subnormals.
    let bits: [u32; 12] = [
        0x7f80_0001,
        0xff80_0001,
        0x7fa0_0000,
        0x7fc0_0000,
        0xffc1_2345,
        0x7fff_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x8000_0000,
        0x0000_0001,
        0x807f_ffff,
        0x3f80_0000,
    ];
    let values: Vec<f32> = bits.iter().map(|&bits| f32::from_bits(bits)).collect();
    // 12 rows of 5 columns: whole tiles, a pair and a single column.
    let arrays: Vec<ArrayRef> = (0..5)
        .map(|_| Arc::new(arrow_array::Float32Array::from(values.clone())) as ArrayRef)
        .collect();
    let columns = copy_columns_of(&arrays);
    let tensor = copy_columns(&[(columns, values.len())], DType::Float64, true).expect("a tensor");
    let written: Vec<u64> = tensor
        .buffer()
        .typed_data::<f64>()
        .iter()
        .map(|value| value.to_bits())
        .collect();
    for (row, &value) in values.iter().enumerate() {
        let expected = (std::hint::black_box(value) as f64).to_bits();
        assert_eq!(
            written[row * 5..row * 5 + 5],
            [expected; 5],
            "{:#x}",
            bits[row]
        );
    }
}

#[test]
fn null_rows_are_the_gaps_between_valid_runs() {
    let validity = [false, true, true, false, false, true, false];
    let nulls = NullBuffer::from(validity.to_vec());
    let rows: Vec<usize> = null_rows(&nulls).collect();
    assert_eq!(rows, [0, 3, 4, 6]);
    let sliced = nulls.slice(1, 5); // true, true, false, false, true
    assert_eq!(null_rows(&sliced).collect::<Vec<_>>(), [2, 3]);
    let all_valid = NullBuffer::new_valid(3);
    assert_eq!(null_rows(&all_valid).count(), 0);
    let all_null = NullBuffer::new_null(3);
    assert_eq!(null_rows(&all_null).collect::<Vec<_>>(), [0, 1, 2]);
}

/// The streaming kernel of column-major float64 output (when this CPU has one), called directly
/// at every alignment of the output and around its groups of 4: every slot equals `as f64` of
/// its float32, int32 or int64 value, bit for bit, and nothing outside the run is written.
#[test]
fn the_streaming_kernel_widens_exactly_at_every_alignment() {
    let Some(stream) = fused::float64_streamed() else {
        return; // no kernel on this CPU: the plain writer, tested above, does the work
    };
    let mut random = Random(0x5EED);
    let floats: Vec<f32> = (0..80)
        .map(|_| f32::from_bits(random.next() as u32))
        .collect();
    let ints: Vec<i32> = (0..80).map(|_| random.next() as i32).collect();
    // Wide int64 values, which `as f64` rounds, and the extremes.
    let mut longs: Vec<i64> = (0..78).map(|_| random.next() as i64).collect();
    longs.extend([i64::MIN, i64::MAX]);
    for offset in 0..4 {
        for len in [0, 1, 3, 4, 5, 7, 8, 9, 31, 64, 73] {
            for kind in 0..3 {
                let sentinel = MaybeUninit::new(f64::from_bits(0xDEAD_BEEF));
                let mut out = vec![sentinel; 80 + 8];
                let slots = &mut out[offset..offset + len];
                let expected: Vec<u64> = match kind {
                    0 => {
                        stream(Run::Float32(&floats[..len]), slots);
                        floats[..len]
                            .iter()
                            .map(|&v| f64::from(v).to_bits())
                            .collect()
                    }
                    1 => {
                        stream(Run::Int32(&ints[..len]), slots);
                        ints[..len]
                            .iter()
                            .map(|&v| f64::from(v).to_bits())
                            .collect()
                    }
                    _ => {
                        let values = &longs[80 - len..];
                        stream(Run::Int64(values), slots);
                        values.iter().map(|&v| (v as f64).to_bits()).collect()
                    }
                };
                // SAFETY: every slot was filled with the sentinel before the call.
                let bits: Vec<u64> = out
                    .iter()
                    .map(|slot| unsafe { slot.assume_init() }.to_bits())
                    .collect();
                assert_eq!(
                    &bits[offset..offset + len],
                    &expected[..],
                    "offset {offset}, len {len}, kind {kind}"
                );
                assert!(
                    bits[..offset]
                        .iter()
                        .chain(&bits[offset + len..])
                        .all(|&b| b == 0xDEAD_BEEF)
                );
            }
        }
    }
}
