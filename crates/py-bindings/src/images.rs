//! `decode_images(column, size, **spec)`: an in-memory column of encoded images (any Arrow
//! producer) decoded into one `Tensor` on Rust threads with the GIL released, through
//! `arrow_dlpack::images`; and [`image_spec`], the one conversion of a Python dict of spec keys
//! into an [`ImageSpec`], whose keys are the Rust field names ([`IMAGE_SPEC_FIELDS`]).

use std::num::NonZeroUsize;
use std::path::PathBuf;

use arrow_array::Array;
use arrow_dlpack::images::{
    DecodeOptions, IMAGE_SPEC_FIELDS, ImageSize, ImageSpec, decode_images as decode,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use crate::array::PyArray;
use crate::arrow_ffi;
use crate::errors::{self, Operation};
use crate::py_tensor::PyTensor;
use crate::type_names::type_name;

/// The `DecodedImages` named tuple class, made once per interpreter.
static DECODED_IMAGES: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn decoded_images_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    DECODED_IMAGES
        .get_or_try_init(py, || {
            let namedtuple = py.import("collections")?.getattr("namedtuple")?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("module", "arrow_dlpack")?;
            let class = namedtuple
                .call(
                    ("DecodedImages", ("images", "sizes", "rows")),
                    Some(&kwargs),
                )?
                .cast_into::<PyType>()?;
            class.setattr(
                "__doc__",
                "The images of decode_images: images (B, C, H, W) or (B, H, W, C), sizes (B, 2) \
                 int32 (height and width as decoded, after EXIF), rows (B,) int64 (the rows kept).",
            )?;
            Ok::<_, PyErr>(class.unbind())
        })
        .map(|class| class.bind(py))
}

/// Adds `DecodedImages` and `_IMAGE_SPEC_DEFAULTS` (every spec key but `size`, with its
/// default) to the native module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("DecodedImages", decoded_images_class(py)?)?;
    let defaults = spec_to_dict(py, &ImageSpec::new(ImageSize::square(1)))?;
    defaults.del_item("size")?;
    module.add("_IMAGE_SPEC_DEFAULTS", defaults)?;
    Ok(())
}

/// Decodes a column of encoded images into one tensor (see the stub for the options).
#[pyfunction]
#[pyo3(signature = (column, size, *, seed = None, threads = None, image_root = None, name = None, **spec))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_images<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    size: &Bound<'py, PyAny>,
    seed: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'py, PyAny>>,
    image_root: Option<PathBuf>,
    name: Option<String>,
    spec: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let keys = PyDict::new(py);
    keys.set_item("size", size)?;
    if let Some(spec) = spec {
        for (key, value) in spec.iter() {
            let key: String = key.extract()?;
            if key == "size" || !IMAGE_SPEC_FIELDS.contains(&key.as_str()) {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "decode_images() got an unexpected keyword argument {key:?}; expected \
                     {}, seed, threads, image_root or name",
                    IMAGE_SPEC_FIELDS.join(", ")
                )));
            }
            keys.set_item(key, value)?;
        }
    }
    let spec = image_spec(&keys)?;
    let seed = seed.map(seed_value).transpose()?.unwrap_or(0);
    let mut options = DecodeOptions::default().seed(seed);
    if let Some(threads) = threads {
        options = options.threads(positive_int("threads", threads)?);
    }
    if let Some(root) = image_root {
        options = options.image_root(root);
    }
    let (field_name, chunks) = match column.cast::<PyArray>() {
        Ok(ours) => {
            let column = ours.get().column();
            (column.field.name().clone(), column.chunks.clone())
        }
        Err(_) => {
            let imported = arrow_ffi::import_cpu_with(&arrow_ffi::Methods::of(column))?;
            (imported.field.name().clone(), imported.chunks)
        }
    };
    let name = name.unwrap_or(field_name);
    let decoded = py
        .detach(|| {
            let chunks: Vec<&dyn Array> = chunks.iter().map(|chunk| chunk.as_ref()).collect();
            decode(&name, &chunks, &spec, &options)
        })
        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
    let tensors = [decoded.images, decoded.sizes, decoded.rows]
        .map(|tensor| Py::new(py, PyTensor::new(tensor)));
    let [images, sizes, rows] = tensors;
    decoded_images_class(py)?.call1((images?, sizes?, rows?))
}

/// The spec of a dict whose keys are [`ImageSpec`]'s field names (`size` required, any other
/// key refused); each value's type is checked here (`TypeError`), what it means by
/// [`ImageSpec::validate`] (`ValueError`). The loader's `images=` option reads its dicts here.
pub(crate) fn image_spec(keys: &Bound<'_, PyDict>) -> PyResult<ImageSpec> {
    for key in keys.keys() {
        let key: String = key.extract()?;
        if !IMAGE_SPEC_FIELDS.contains(&key.as_str()) {
            return Err(errors::type_error(format!(
                "unknown image spec key {key:?}; expected {}",
                IMAGE_SPEC_FIELDS.join(", ")
            )));
        }
    }
    let size = keys
        .get_item("size")?
        .ok_or_else(|| errors::type_error("the image spec has no size; expected size=..."))?;
    let mut spec = ImageSpec::new(image_size(&size)?);
    let text = |value: &Bound<'_, PyAny>, field: &str| -> PyResult<String> {
        value
            .cast::<PyString>()
            .map(|text| text.to_string())
            .map_err(|_| {
                errors::type_error(format!("{field} is {}; expected str", type_name(value)))
            })
    };
    let parse = |error: arrow_dlpack::Error| errors::arrow_error(error, Operation::Import);
    for (key, value) in keys.iter() {
        let key: String = key.extract()?;
        let field = key.as_str();
        let none = value.is_none();
        match field {
            "size" => {}
            "resize" => spec.resize = (!none).then(|| u32_value(field, &value)).transpose()?,
            "crop" => spec.crop = text(&value, field)?.parse().map_err(parse)?,
            "scale" => spec.scale = float_pair(field, &value)?,
            "ratio" => spec.ratio = float_pair(field, &value)?,
            "pad_value" => {
                spec.pad_value = u8::try_from(u32_value(field, &value)?).map_err(|_| {
                    errors::value_error(format!("pad_value is {value}; expected 0 to 255"))
                })?
            }
            "hflip" => spec.hflip = float_value(field, &value)?,
            "mode" => spec.mode = text(&value, field)?.parse().map_err(parse)?,
            "layout" => spec.layout = text(&value, field)?.parse().map_err(parse)?,
            "dtype" => spec.dtype = text(&value, field)?.parse().map_err(parse)?,
            "mean" => spec.mean = (!none).then(|| floats(field, &value)).transpose()?,
            "std" => spec.std = (!none).then(|| floats(field, &value)).transpose()?,
            "interpolation" => spec.interpolation = text(&value, field)?.parse().map_err(parse)?,
            "exif_transpose" => {
                spec.exif_transpose = value.extract().map_err(|_| {
                    errors::type_error(format!(
                        "exif_transpose is {}; expected bool",
                        type_name(&value)
                    ))
                })?
            }
            "on_error" => spec.on_error = text(&value, field)?.parse().map_err(parse)?,
            "max_pixels" => {
                spec.max_pixels = if none {
                    u64::MAX
                } else {
                    positive_int(field, &value)?.get() as u64
                }
            }
            // `IMAGE_SPEC_FIELDS` and this match are checked against each other by the Python
            // tests (every key of `_IMAGE_SPEC_DEFAULTS` round-trips).
            _ => unreachable!("key {field} was checked against IMAGE_SPEC_FIELDS"),
        }
    }
    spec.validate().map_err(parse)?;
    Ok(spec)
}

/// The spec as a dict of its keys, with Python values (tuples for pairs, names for choices).
pub(crate) fn spec_to_dict<'py>(py: Python<'py>, spec: &ImageSpec) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let size = (spec.size.height, spec.size.width);
    dict.set_item("size", size)?;
    dict.set_item("resize", spec.resize)?;
    dict.set_item("crop", spec.crop.as_str())?;
    dict.set_item("scale", spec.scale)?;
    dict.set_item("ratio", spec.ratio)?;
    dict.set_item("pad_value", spec.pad_value)?;
    dict.set_item("hflip", spec.hflip)?;
    dict.set_item("mode", spec.mode.as_str())?;
    dict.set_item("layout", spec.layout.as_str())?;
    dict.set_item("dtype", spec.dtype.as_str())?;
    dict.set_item("mean", spec.mean.clone())?;
    dict.set_item("std", spec.std.clone())?;
    dict.set_item("interpolation", spec.interpolation.as_str())?;
    dict.set_item("exif_transpose", spec.exif_transpose)?;
    dict.set_item("on_error", spec.on_error.as_str())?;
    dict.set_item("max_pixels", spec.max_pixels)?;
    Ok(dict)
}

/// `size`: an int (a square) or a `(height, width)` pair.
fn image_size(value: &Bound<'_, PyAny>) -> PyResult<ImageSize> {
    if value.is_instance_of::<PyInt>() {
        return Ok(ImageSize::square(u32_value("size", value)?));
    }
    let pair = sequence("size", value).map_err(|_| {
        errors::type_error(format!(
            "size is {}; expected an int or a (height, width) pair",
            type_name(value)
        ))
    })?;
    match pair.as_slice() {
        [height, width] => Ok(ImageSize::new(
            u32_value("size", height)?,
            u32_value("size", width)?,
        )),
        _ => Err(errors::type_error(format!(
            "size has {} items; expected an int or a (height, width) pair",
            pair.len()
        ))),
    }
}

/// The items of a tuple or list (not of a string).
fn sequence<'py>(field: &str, value: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return Ok(tuple.iter().collect());
    }
    if let Ok(list) = value.cast::<PyList>() {
        return Ok(list.iter().collect());
    }
    Err(errors::type_error(format!(
        "{field} is {}; expected a tuple or list",
        type_name(value)
    )))
}

/// A non-negative int that fits `u32` (0 is left to the spec's checks).
fn u32_value(field: &str, value: &Bound<'_, PyAny>) -> PyResult<u32> {
    let int = value.cast::<PyInt>().map_err(|_| {
        errors::type_error(format!("{field} is {}; expected int", type_name(value)))
    })?;
    int.extract::<u32>().map_err(|_| {
        errors::value_error(format!(
            "{field} is {int}; expected an int from 0 to {}",
            u32::MAX
        ))
    })
}

/// A positive int (threads, max_pixels).
fn positive_int(field: &str, value: &Bound<'_, PyAny>) -> PyResult<NonZeroUsize> {
    let int = value.cast::<PyInt>().map_err(|_| {
        errors::type_error(format!("{field} is {}; expected int", type_name(value)))
    })?;
    int.extract::<usize>()
        .ok()
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| errors::value_error(format!("{field} is {int}; expected a positive int")))
}

/// A float (an int is taken too, as Python takes one where a float is asked).
fn float_value(field: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    if value.is_instance_of::<PyFloat>() || value.is_instance_of::<PyInt>() {
        return value.extract();
    }
    Err(errors::type_error(format!(
        "{field} is {}; expected float",
        type_name(value)
    )))
}

fn float_pair(field: &str, value: &Bound<'_, PyAny>) -> PyResult<(f64, f64)> {
    match sequence(field, value)?.as_slice() {
        [low, high] => Ok((float_value(field, low)?, float_value(field, high)?)),
        items => Err(errors::type_error(format!(
            "{field} has {} items; expected a (low, high) pair",
            items.len()
        ))),
    }
}

fn floats(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    sequence(field, value)?
        .iter()
        .map(|item| float_value(field, item).map(|value| value as f32))
        .collect()
}

/// The seed: any Python int, modulo 2^64 (as the loader takes it).
fn seed_value(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    value
        .cast::<PyInt>()
        .map_err(|_| errors::type_error(format!("seed is {}; expected int", type_name(value))))?
        .bitand(u64::MAX)?
        .extract()
}
