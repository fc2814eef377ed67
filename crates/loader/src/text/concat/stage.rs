//! The `"concat"` mode of a sequence in the loader: the loader reads the column as a jagged
//! sequence (its documents, in the loader's order, shuffled and sharded as any rows), and this
//! stage packs them with a [`ConcatPacker`] into batches of `batch_size` rows of `max_length`
//! tokens, on the consumer's side of the channel.
//!
//! Where it stands is the underlying reading's position after the last batch of documents it
//! packed whole, the documents of the next one it packed, and the packer's carry: the saved
//! state's [`ConcatPosition`]. Resumed, the reading starts after that batch, the documents
//! already packed are passed over, and the packer goes on from its carry.

use arrow_dlpack::RaggedTensor;
use arrow_dlpack_tensor::{DType, Tensor};

use super::{ConcatPackOptions, ConcatPacker};
use crate::rebatch::Mark;
use crate::sequences::{Sequence, SequenceMode};
use crate::state::{ConcatPosition, Settings};
use crate::{BatchSpec, Error, Result, TensorBatch};

/// A batch of documents from the underlying reading, and where the reading stands after it.
type Received = Option<Result<(TensorBatch, Mark)>>;

/// The packing of a `"concat"` sequence (see the module docs).
pub(crate) struct ConcatStage {
    column: String,
    options: ConcatPackOptions,
    packer: Option<ConcatPacker>,
    /// The batch of documents being packed and the reading's mark after it, with the documents
    /// of it packed so far.
    current: Option<(RaggedTensor, Mark)>,
    packed: usize,
    /// The reading's mark after the last batch of documents packed whole; `None` before the
    /// first (the loader's starting position then stands).
    done: Option<Mark>,
    /// From a saved state: the documents of the first batch already packed, and the carry.
    resumed: Option<ConcatPosition>,
    ended: bool,
}

impl ConcatStage {
    /// For a spec with a `"concat"` sequence: the spec that reads its documents (the sequence
    /// jagged, without the packing's options; the state's settings in that form), and the
    /// stage that packs them. `None` for any other spec.
    pub(crate) fn split(spec: &BatchSpec) -> Result<Option<(BatchSpec, ConcatStage)>> {
        let Some(concat) = spec.concat_sequence() else {
            return Ok(None);
        };
        let max_length = concat.max_length.unwrap_or(0);
        let mut options = ConcatPackOptions::new(max_length, spec.batch_size);
        options.bos_token_id = concat.bos_token_id;
        options.eos_token_id = concat.eos_token_id;
        options.split_documents = concat.split_documents;
        options.pad_value = pad_value(concat)?;
        options.drop_last = spec.drop_last;
        // The options are checked now (lengths, special tokens in range of int64), with the
        // tokens' type checked again when it is known.
        ConcatPacker::new(options.clone(), DType::Int64)?;
        let documents = Sequence {
            tokenizer: concat.tokenizer.clone(),
            ..Sequence::jagged(concat.column.clone())
        };
        let mut inner = spec.clone();
        inner.sequences = vec![documents.clone()];
        inner.columns = Some(Vec::new());
        inner.drop_last = false;
        let mut resumed = None;
        if let Some(mut state) = inner.state.take() {
            let saved = state.settings.sequences.get(&concat.column).cloned();
            let given = crate::source::sequence_settings(concat);
            if let Some(saved) = saved.filter(|saved| *saved != given) {
                // The difference is named as for any setting: the saved one against this one.
                let mut wanted = state.settings.clone();
                wanted.sequences.insert(concat.column.clone(), given);
                let mut found = state.settings.clone();
                found.sequences.insert(concat.column.clone(), saved);
                if let Some(difference) = found.difference(&wanted) {
                    return Err(Error::InvalidState {
                        reason: difference.to_string(),
                    });
                }
            }
            state.settings.sequences.insert(
                concat.column.clone(),
                crate::source::sequence_settings(&documents),
            );
            resumed = state.concat.take();
            inner.state = Some(state);
        }
        let stage = ConcatStage {
            column: concat.column.clone(),
            options,
            packer: None,
            current: None,
            packed: 0,
            done: None,
            resumed,
            ended: false,
        };
        Ok(Some((inner, stage)))
    }

    /// `settings` (of the reading's spec) as the concat sequence's: what a saved state records.
    pub(crate) fn outer_settings(&self, spec: &BatchSpec, settings: &mut Settings) {
        if let Some(concat) = spec.concat_sequence() {
            settings.sequences.insert(
                self.column.clone(),
                crate::source::sequence_settings(concat),
            );
        }
    }

    /// The reading's mark after the last batch of documents packed whole, and where the packing
    /// stands.
    pub(crate) fn position(&self) -> (Option<&Mark>, ConcatPosition) {
        let position = match (&self.packer, &self.resumed) {
            (Some(packer), _) => ConcatPosition {
                documents: self.packed as u64,
                token_type: Some(packer.dtype().name().to_string()),
                carry: packer.carry(),
            },
            (None, Some(resumed)) => resumed.clone(),
            (None, None) => ConcatPosition::default(),
        };
        (self.done.as_ref(), position)
    }

    /// The next batch of packed rows, pulling batches of documents with `receive`; `None` at
    /// the end.
    pub(crate) fn next(
        &mut self,
        mut receive: impl FnMut() -> Received,
    ) -> Option<Result<TensorBatch>> {
        loop {
            if let Some(packer) = self.packer.as_mut() {
                match packer.next_batch() {
                    Ok(Some(batch)) => return Some(self.tensors(batch)),
                    Ok(None) => {}
                    Err(error) => return Some(Err(error)),
                }
            }
            if let Some((documents, _)) = &self.current {
                let packer = self.packer.as_mut()?;
                let pushed = match packer.push(documents, self.packed) {
                    Ok(pushed) => pushed,
                    Err(error) => return Some(Err(error)),
                };
                self.packed += pushed;
                if self.packed < documents.len() {
                    continue;
                }
                self.done = self.current.take().map(|(_, mark)| mark);
                self.packed = 0;
                continue;
            }
            if self.ended {
                return None;
            }
            match receive() {
                None => {
                    self.ended = true;
                    if let Err(error) = self.finish() {
                        return Some(Err(error));
                    }
                }
                Some(Err(error)) => {
                    self.ended = true;
                    return Some(Err(error));
                }
                Some(Ok((batch, mark))) => {
                    if let Err(error) = self.take(&batch, mark) {
                        self.ended = true;
                        return Some(Err(error));
                    }
                }
            }
        }
    }

    /// Takes a batch of documents: the packer is made with its tokens' type (from the saved
    /// carry when resuming), and a resumed run passes over the documents already packed.
    fn take(&mut self, batch: &TensorBatch, mark: Mark) -> Result<()> {
        let values = batch.tensor(&self.column)?.clone();
        let offsets = batch.tensor(&format!("{}_offsets", self.column))?.clone();
        let documents = RaggedTensor::new(values, offsets)
            .map_err(|error| Error::column(&self.column, error))?;
        let mut skip = 0;
        if self.packer.is_none() {
            let resumed = self.resumed.take().unwrap_or_default();
            if let Some(saved) = &resumed.token_type
                && saved != documents.dtype().name()
            {
                return Err(Error::InvalidState {
                    reason: format!(
                        "sequences[{:?}]: the state carries tokens of type {saved}; the column \
                         gives {}",
                        self.column,
                        documents.dtype()
                    ),
                });
            }
            let count = usize::try_from(resumed.documents).unwrap_or(usize::MAX);
            if count > documents.len() {
                return Err(Error::InvalidState {
                    reason: format!(
                        "sequences[{:?}]: the state has packed {count} documents of a batch of \
                         {}; expected at most that many",
                        self.column,
                        documents.len()
                    ),
                });
            }
            skip = count;
            self.packer = Some(ConcatPacker::resume(
                self.options.clone(),
                documents.dtype(),
                resumed.carry,
            )?);
        }
        self.packed = skip;
        self.current = Some((documents, mark));
        Ok(())
    }

    /// The end of the documents: the packer closes its rows. A resumed run that read no
    /// documents packs its carry with the saved type of its tokens.
    fn finish(&mut self) -> Result<()> {
        if self.packer.is_none() {
            let Some(resumed) = self.resumed.take() else {
                return Ok(());
            };
            if resumed.documents > 0 {
                return Err(Error::InvalidState {
                    reason: format!(
                        "sequences[{:?}]: the state has packed {} documents of a batch that the \
                         source does not give",
                        self.column, resumed.documents
                    ),
                });
            }
            let Some(name) = resumed.token_type.as_deref() else {
                return Ok(());
            };
            let dtype = DType::ALL
                .into_iter()
                .find(|dtype| dtype.name() == name)
                .ok_or_else(|| Error::InvalidState {
                    reason: format!(
                        "sequences[{:?}]: the state carries tokens of type {name:?}; expected \
                         an integer type such as \"int32\"",
                        self.column
                    ),
                })?;
            self.packer = Some(ConcatPacker::resume(
                self.options.clone(),
                dtype,
                resumed.carry,
            )?);
        }
        if let Some(packer) = self.packer.as_mut() {
            packer.finish();
        }
        Ok(())
    }

    /// The tensors of a packed batch, named after the column.
    fn tensors(&self, batch: super::ConcatBatch) -> Result<TensorBatch> {
        let name = &self.column;
        let rows = batch.num_rows();
        let max_seqlen = i64::try_from(batch.max_seqlen).unwrap_or(i64::MAX);
        let max_seqlen = Tensor::from_vec(vec![max_seqlen], vec![])?.with_read_only(false);
        let tensors = vec![
            (name.clone(), batch.ids),
            (format!("{name}_position_ids"), batch.position_ids),
            (format!("{name}_cu_seqlens"), batch.cu_seqlens),
            (format!("{name}_max_seqlen"), max_seqlen),
        ];
        Ok(TensorBatch::new(rows, tensors, Vec::new()))
    }
}

/// The pad value of a concat sequence as an integer token.
fn pad_value(sequence: &Sequence) -> Result<i64> {
    debug_assert_eq!(sequence.mode, SequenceMode::Concat);
    match sequence.pad_value {
        arrow_dlpack::PadValue::Int(value) => Ok(value),
        arrow_dlpack::PadValue::Bool(value) => Ok(i64::from(value)),
        arrow_dlpack::PadValue::UInt(value) if i64::try_from(value).is_ok() => Ok(value as i64),
        other => Err(Error::InvalidSpec {
            reason: format!(
                "sequence {:?} is in mode \"concat\" with pad_value {other:?}; expected an \
                 integer token",
                sequence.column
            ),
        }),
    }
}
