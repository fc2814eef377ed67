//! Stub.
use arrow_array::Array;
use arrow_dlpack_tensor::Tensor;
use crate::sequence::Sequence;
use crate::Result;
pub(crate) struct RaggedTensor;
pub(crate) fn probe(_name: &str, _empty: &dyn Array) -> Result<()> { Ok(()) }
pub(crate) fn run_of(_name: &str, _column: &dyn Array, _start: usize, _len: usize, _allow_nulls: bool) -> Result<RaggedTensor> { todo!() }
pub(crate) fn sequence_tensors(_sequence: &Sequence, _runs: &[RaggedTensor]) -> Result<Vec<(String, Tensor)>> { todo!() }
