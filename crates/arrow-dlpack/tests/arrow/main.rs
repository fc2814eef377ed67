//! Integration tests of the Arrow layer: one binary, one module per concern.

mod chunked;
mod errors;
mod fixed_shape_tensor;
mod fixed_size_list;
#[cfg(feature = "images")]
mod images;
mod interop;
mod ownership;
mod primitive;
mod ragged;
mod record_batch;
mod shares_memory;
mod variable_shape_tensor;
