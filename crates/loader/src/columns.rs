//! The outputs of a batch, resolved once against the first record batch's schema: which column
//! feeds which tensor, and the dtype and cell shape each tensor has.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray, RecordBatch};
use arrow_dlpack::{
    ArrayToTensorOptions, EXTENSION_NAME, FixedShapeTensorArray, FixedShapeTensorType,
    TableToTensorOptions, array_to_tensor, columns_to_tensor,
};
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{DataType, Field, Schema};

use crate::error::{EXTENSION_METADATA_KEY, EXTENSION_NAME_KEY};
use crate::images::{ImageColumn, Origins};
use crate::sequences::Sequence;
use crate::{BatchSpec, Error, NullToNan, Result};

/// The types a single column may have.
const SINGLE_TYPES: &str = "a numeric or boolean column, a fixed-size list of numbers, or an \
                            arrow.fixed_shape_tensor column";

/// What a variable-length list column needs to be loaded, when it is not named in `sequences`.
const LIST_TYPES: &str = "a numeric or boolean column, a fixed-size list of numbers, or an \
                          arrow.fixed_shape_tensor column; a list of varying length loads as a \
                          sequence: name it with BatchSpec::sequence and a SequenceMode (Pad, \
                          Pack or Jagged)";

/// How one output tensor is made from its column or columns.
#[derive(Debug, Clone)]
pub(crate) enum Output {
    /// A numeric column, a fixed-size list or a fixed-shape tensor: a view inside one record
    /// batch, a byte copy across several.
    Values {
        name: String,
        index: usize,
        /// The extension type of an `arrow.fixed_shape_tensor` column.
        extension: Option<FixedShapeTensorType>,
        dtype: DType,
        /// The shape of one row (empty for a primitive column).
        cell_shape: Vec<usize>,
        /// The strides of one row's dimensions, in elements (a permutation for a fixed-shape
        /// tensor with one).
        cell_strides: Vec<isize>,
        /// The dimension names of the view, the outermost included.
        dim_names: Option<Vec<String>>,
    },
    /// A boolean column, unpacked to one byte per row.
    Bool { name: String, index: usize },
    /// A variable-length list column: padded, packed or jagged, into the tensors its mode names.
    Sequence {
        name: String,
        index: usize,
        sequence: Sequence,
    },
    /// A column of encoded images, decoded into the tensors `name` and `name_sizes`.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    Image {
        name: String,
        index: usize,
        image: ImageColumn,
    },
    /// A group of numeric columns, or a numeric single column whose nulls become NaN (a group of
    /// one whose tensor is 1-D): converted to `dtype` and copied.
    Group {
        name: String,
        indices: Vec<usize>,
        column_names: Vec<String>,
        dtype: DType,
        /// Whether nulls are written as NaN ([`BatchSpec::null_to_nan`] for this output).
        null_to_nan: bool,
        /// A single column with `null_to_nan`: the tensor is `(B,)`, not `(B, 1)`.
        flat: bool,
        /// The source is float-typed already: with no nulls in range, a view is enough.
        view_when_no_nulls: bool,
    },
}

impl Output {
    /// The tensor's name in the batch.
    pub(crate) fn name(&self) -> &str {
        match self {
            Output::Values { name, .. }
            | Output::Bool { name, .. }
            | Output::Sequence { name, .. }
            | Output::Image { name, .. }
            | Output::Group { name, .. } => name,
        }
    }
}

/// The outputs and masks of a spec, resolved against a schema.
#[derive(Debug, Clone)]
pub(crate) struct Columns {
    pub(crate) outputs: Vec<Output>,
    /// The masks asked for: the column's name and its index.
    pub(crate) masks: Vec<(String, usize)>,
    /// The sequence columns, each with its index, in the order of their outputs.
    pub(crate) sequences: Vec<(usize, Sequence)>,
    /// The first record batch's columns, to check every later batch against.
    pub(crate) schema: Arc<Schema>,
    /// Where each unit's rows lie in the source's files, for a source of files (what image
    /// rows are keyed by, named by, and resolved against), and the reader of image URLs.
    pub(crate) origins: Origins,
}

impl Columns {
    /// Resolves `spec` against `batch`'s schema, probing each output on zero rows of `batch` so
    /// that the Arrow layer decides types, promotion and cell shapes exactly as for real rows.
    pub(crate) fn resolve(spec: &BatchSpec, batch: &RecordBatch) -> Result<Self> {
        let schema = batch.schema();
        spec.check_schema(&schema)?;
        let find = |column: &str| -> Result<usize> {
            schema.index_of(column).map_err(|_| Error::MissingColumn {
                column: column.to_string(),
                available: schema.fields().iter().map(|f| f.name().clone()).collect(),
            })
        };
        let source_names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let mut singles = spec.single_columns(&source_names);
        // A sequence or image column needs no entry in `columns`: those without one come
        // after them.
        let listed = spec.sequences.iter().map(|sequence| &sequence.column);
        for column in listed.chain(spec.images.iter().map(|image| &image.column)) {
            if !singles.contains(&column.as_str()) {
                singles.push(column);
            }
        }
        // The outputs of the columns named as images or sequences are made first, so that a
        // wrong one is reported as itself, not through another column that `columns: None`
        // loads; they take their places among the single columns below.
        let mut named: std::collections::BTreeMap<&str, Output> = std::collections::BTreeMap::new();
        for image in &spec.images {
            let index = find(&image.column)?;
            named.insert(
                &image.column,
                image_output(image, schema.field(index), index)?,
            );
        }
        let mut sequences = Vec::new();
        for sequence in &spec.sequences {
            let index = find(&sequence.column)?;
            let output =
                sequence_output(sequence, schema.field(index), batch.column(index), index)?;
            named.insert(&sequence.column, output);
        }
        let mut outputs = Vec::new();
        for name in singles {
            let index = find(name)?;
            match named.remove(name) {
                Some(output) => {
                    if let Some(sequence) = spec.sequence_of(name) {
                        sequences.push((index, sequence.clone()));
                    }
                    outputs.push(output);
                }
                None => outputs.push(single(spec, &schema, batch.column(index), name, index)?),
            }
        }
        for group in &spec.groups {
            let indices = group
                .columns
                .iter()
                .map(|column| find(column))
                .collect::<Result<Vec<_>>>()?;
            let probe: Vec<ArrayRef> = indices
                .iter()
                .map(|&i| batch.column(i).slice(0, 0))
                .collect();
            let null_to_nan = group_null_to_nan(spec, &group.name);
            let options = TableToTensorOptions {
                row_major: spec.row_major,
                null_to_nan,
                dtype: group.dtype,
            };
            let tensor = columns_to_tensor(&group.columns, &probe, options)
                .map_err(|error| Error::column(&group.name, error))?;
            outputs.push(Output::Group {
                name: group.name.clone(),
                indices,
                column_names: group.columns.clone(),
                dtype: tensor.dtype(),
                null_to_nan,
                flat: false,
                view_when_no_nulls: false,
            });
        }
        check_null_to_nan_names(spec, &outputs)?;
        let masks = spec
            .masks
            .iter()
            .map(|name| Ok((name.clone(), find(name)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Columns {
            outputs,
            masks,
            sequences,
            schema,
            origins: Origins::default(),
        })
    }

    /// Refuses a record batch whose columns differ (by name or type) from the first one's.
    pub(crate) fn check_schema(
        &self,
        batch: &RecordBatch,
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        let schema = batch.schema_ref();
        if Arc::ptr_eq(schema, &self.schema) {
            return Ok(());
        }
        check_same_columns(schema, &self.schema, what)
    }
}

/// Refuses `schema` when its columns differ (by name or type) from `expected`'s; `what` names
/// what has that schema, for the message.
pub(crate) fn check_same_columns(
    schema: &Schema,
    expected: &Schema,
    what: impl FnOnce() -> String,
) -> Result<()> {
    let same = schema.fields().len() == expected.fields().len()
        && schema.fields().iter().zip(expected.fields()).all(|(a, b)| {
            a.name() == b.name()
                && a.data_type() == b.data_type()
                && extension_of(a) == extension_of(b)
        });
    if same {
        Ok(())
    } else {
        Err(Error::SchemaMismatch {
            what: what(),
            found: schema.fields().clone(),
            expected: expected.fields().clone(),
        })
    }
}

/// The extension type of `field`: its name and serialized metadata, which for a fixed-shape
/// tensor hold the shape, permutation and dimension names that give the rows their meaning.
fn extension_of(field: &Field) -> (Option<&String>, Option<&String>) {
    let metadata = field.metadata();
    (
        metadata.get(EXTENSION_NAME_KEY),
        metadata.get(EXTENSION_METADATA_KEY),
    )
}

/// The output for one single column.
fn single(
    spec: &BatchSpec,
    schema: &Schema,
    array: &ArrayRef,
    name: &str,
    index: usize,
) -> Result<Output> {
    let field = schema.field(index);
    let data_type = field.data_type();
    if matches!(
        data_type,
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
    ) {
        return Err(Error::UnsupportedColumn {
            column: name.to_string(),
            data_type: data_type.clone(),
            metadata: field.metadata().clone(),
            as_sequence: false,
            expected: LIST_TYPES,
            every_column: spec.columns.is_none(),
        });
    }
    // A boolean column whose nulls become NaN is a float32 column of 0, 1 and NaN, as an integer
    // one is promoted.
    let boolean = data_type == &DataType::Boolean;
    if (data_type.is_numeric() || boolean) && column_null_to_nan(spec, field) {
        let probe = [array.slice(0, 0)];
        let options = TableToTensorOptions {
            row_major: true,
            null_to_nan: true,
            dtype: None,
        };
        let tensor = columns_to_tensor(&[name], &probe, options)
            .map_err(|error| Error::column(name, error))?;
        return Ok(Output::Group {
            name: name.to_string(),
            indices: vec![index],
            column_names: vec![name.to_string()],
            dtype: tensor.dtype(),
            null_to_nan: true,
            flat: true,
            view_when_no_nulls: data_type.is_floating(),
        });
    }
    if boolean {
        return Ok(Output::Bool {
            name: name.to_string(),
            index,
        });
    }
    let is_extension = field
        .metadata()
        .get(EXTENSION_NAME_KEY)
        .is_some_and(|extension| extension == EXTENSION_NAME);
    let extension = if is_extension {
        Some(
            FixedShapeTensorType::try_from_field(field)
                .map_err(|error| Error::column(name, error))?,
        )
    } else {
        None
    };
    let probe = view(&extension, &array.slice(0, 0), true).map_err(|error| match error {
        arrow_dlpack::Error::UnsupportedType { .. } => Error::UnsupportedColumn {
            column: name.to_string(),
            data_type: data_type.clone(),
            metadata: field.metadata().clone(),
            as_sequence: false,
            expected: SINGLE_TYPES,
            every_column: spec.columns.is_none(),
        },
        other => Error::column(name, other),
    })?;
    Ok(Output::Values {
        name: name.to_string(),
        index,
        extension,
        dtype: probe.dtype(),
        cell_shape: probe.shape()[1..].to_vec(),
        cell_strides: probe.strides()[1..].to_vec(),
        dim_names: probe.dim_names().map(<[String]>::to_vec),
    })
}

/// Whether the group `name` writes its nulls as NaN.
fn group_null_to_nan(spec: &BatchSpec, name: &str) -> bool {
    match &spec.null_to_nan {
        NullToNan::Off => false,
        NullToNan::Auto => true,
        NullToNan::Columns(names) => names.iter().any(|named| named == name),
    }
}

/// Whether the numeric or boolean single column `field` writes its nulls as NaN (a boolean one
/// then becomes float32): where named, or, with
/// [`NullToNan::Auto`] and nothing else known, a float column, or one whose field is nullable
/// (the planning of files turns `Auto` into the names of the columns their metadata says may
/// hold nulls first: [`resolve_null_to_nan`]).
fn column_null_to_nan(spec: &BatchSpec, field: &Field) -> bool {
    match &spec.null_to_nan {
        NullToNan::Off => false,
        NullToNan::Auto => field.data_type().is_floating() || field.is_nullable(),
        NullToNan::Columns(names) => names.iter().any(|named| named == field.name()),
    }
}

/// Refuses a name of [`NullToNan::Columns`] that is no group and no numeric single column of
/// `outputs`, naming those it may name.
fn check_null_to_nan_names(spec: &BatchSpec, outputs: &[Output]) -> Result<()> {
    let NullToNan::Columns(names) = &spec.null_to_nan else {
        return Ok(());
    };
    let candidates: Vec<&str> = outputs
        .iter()
        .filter_map(|output| match output {
            Output::Group { name, .. } => Some(name.as_str()),
            Output::Values {
                name,
                extension: None,
                cell_shape,
                ..
            } if cell_shape.is_empty() => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let loaded_with_nan = |name: &str| {
        outputs.iter().any(|output| {
            matches!(output, Output::Group { name: group, null_to_nan: true, .. } if group == name)
        })
    };
    match names.iter().find(|name| !loaded_with_nan(name)) {
        None => Ok(()),
        Some(name) => Err(Error::InvalidSpec {
            reason: format!(
                "null_to_nan names {name:?}, which is not a numeric single column or a group \
                 that is loaded; expected names among {candidates:?}"
            ),
        }),
    }
}

/// [`NullToNan::Auto`] of `spec` made explicit for a source of full schema `schema` whose
/// metadata gives `nulls` (the null count of each column where it is known): the names of
/// every group, of every float single column, and of each other numeric or boolean single column
/// that may hold nulls (a known count above 0, or, unknown, a nullable field). Any other value as
/// it is.
///
/// The loader thread then writes NaN in exactly these outputs, so that a column's dtype is
/// decided once, from the whole source, not from the record batches a batch happens to hold.
pub(crate) fn resolve_null_to_nan(
    spec: &BatchSpec,
    schema: &Schema,
    nulls: impl Fn(&str) -> Option<u64>,
) -> NullToNan {
    if spec.null_to_nan != NullToNan::Auto {
        return spec.null_to_nan.clone();
    }
    let source_names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let mut names: Vec<String> = spec.groups.iter().map(|group| group.name.clone()).collect();
    for column in spec.single_columns(&source_names) {
        if spec.sequence_of(column).is_some() {
            continue;
        }
        let Ok(field) = schema.field_with_name(column) else {
            continue;
        };
        let data_type = field.data_type();
        let may_hold_nulls = match nulls(column) {
            Some(count) => count > 0,
            None => field.is_nullable(),
        };
        let boolean = data_type == &DataType::Boolean;
        if (data_type.is_numeric() && (data_type.is_floating() || may_hold_nulls))
            || (boolean && may_hold_nulls)
        {
            names.push(column.to_string());
        }
    }
    NullToNan::Columns(names)
}

/// Whether the planning needs the null counts of the source's columns to resolve
/// [`NullToNan::Auto`]: a numeric single column that is not a float, or a boolean one, whose
/// field is nullable (a column the schema says holds no nulls needs no count).
pub(crate) fn needs_null_counts(spec: &BatchSpec, schema: &Schema) -> bool {
    if spec.null_to_nan != NullToNan::Auto {
        return false;
    }
    let source_names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    spec.single_columns(&source_names).iter().any(|column| {
        schema.field_with_name(column).is_ok_and(|field| {
            let data_type = field.data_type();
            let counted = (data_type.is_numeric() && !data_type.is_floating())
                || data_type == &DataType::Boolean;
            counted && field.is_nullable()
        })
    })
}

/// The output of sequence column `sequence`, once its zero rows become a ragged tensor.
fn sequence_output(
    sequence: &Sequence,
    field: &Field,
    array: &ArrayRef,
    index: usize,
) -> Result<Output> {
    let name = &sequence.column;
    if !matches!(
        array.data_type(),
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
    ) {
        return Err(Error::UnsupportedColumn {
            column: name.clone(),
            data_type: array.data_type().clone(),
            metadata: field.metadata().clone(),
            as_sequence: true,
            expected: "a list, large_list, list_view or large_list_view of numbers, booleans, \
                       fixed-size lists or fixed-shape tensors, for a sequence",
            every_column: false,
        });
    }
    let pad = (sequence.mode == crate::SequenceMode::Pad).then_some(sequence.pad_value);
    crate::sequences::tensors::probe(name, &array.slice(0, 0), pad)?;
    Ok(Output::Sequence {
        name: name.clone(),
        index,
        sequence: sequence.clone(),
    })
}

/// The output of image column `image`, whose field is `field`.
fn image_output(image: &ImageColumn, field: &Field, index: usize) -> Result<Output> {
    #[cfg(feature = "images")]
    if !arrow_dlpack::images::is_image_column_type(field.data_type()) {
        return Err(Error::UnsupportedColumn {
            column: image.column.clone(),
            data_type: field.data_type().clone(),
            metadata: field.metadata().clone(),
            as_sequence: false,
            expected: IMAGE_TYPES,
            every_column: false,
        });
    }
    #[cfg(not(feature = "images"))]
    let _ = field;
    Ok(Output::Image {
        name: image.column.clone(),
        index,
        image: image.clone(),
    })
}

/// The types an image column may have: what [`Error::UnsupportedColumn`] of an image column
/// expects.
#[cfg(feature = "images")]
pub const IMAGE_TYPES: &str = "binary, large_binary or binary_view encoded images, or a struct with \
                           a bytes field of one of these and an optional path field of text \
                           (Hugging Face's Image), for an image column";

/// A zero-copy view of `array` (a fixed-shape tensor column when `extension` is set).
pub(crate) fn view(
    extension: &Option<FixedShapeTensorType>,
    array: &ArrayRef,
    allow_nulls: bool,
) -> std::result::Result<Tensor, arrow_dlpack::Error> {
    match extension {
        None => array_to_tensor(
            array.as_ref(),
            ArrayToTensorOptions {
                allow_nulls,
                ..Default::default()
            },
        ),
        Some(extension) => {
            let Some(storage) = array.as_any().downcast_ref::<FixedSizeListArray>() else {
                return Err(arrow_dlpack::Error::InvalidExtension {
                    reason: format!(
                        "storage array has type {}; expected a fixed-size list array",
                        array.data_type()
                    ),
                });
            };
            FixedShapeTensorArray::try_new(extension.clone(), storage.clone())?.to_tensor(
                ArrayToTensorOptions {
                    allow_nulls,
                    ..Default::default()
                },
            )
        }
    }
}
