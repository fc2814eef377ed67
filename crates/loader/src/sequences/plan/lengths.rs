//! The lengths of a source's rows that a plan is cut by ([`SourceLengths`]): per sequence
//! column, 4 bytes a row, or only the rows of each unit for a plan cut by rows alone.

use crate::Result;
use crate::memory::reserve;

/// The lengths of the rows of a source's units before truncation, per sequence column (in the
/// order of [`BatchSpec::sequences`](crate::BatchSpec)), 0 for a null row; lengths beyond
/// `u32::MAX` are kept as `u32::MAX`, more than any budget (`max_tokens` is below it).
#[derive(Debug, Default)]
pub(crate) struct SourceLengths {
    /// The first row of each unit among all the rows, then the number of rows.
    starts: Vec<u64>,
    /// `columns[c][row]`: the length of each row of the source, units one after another.
    columns: Vec<Vec<u32>>,
}

impl SourceLengths {
    /// No units yet, of `columns` sequence columns.
    pub(crate) fn new(columns: usize) -> Self {
        SourceLengths {
            starts: vec![0],
            columns: vec![Vec::new(); columns],
        }
    }

    /// The units of `unit_rows` rows each, with no column: a plan cut by rows alone.
    pub(crate) fn of_rows(unit_rows: impl Iterator<Item = u64>) -> Result<Self> {
        let mut lengths = SourceLengths::new(0);
        for rows in unit_rows {
            let end = lengths
                .starts
                .last()
                .copied()
                .unwrap_or(0)
                .saturating_add(rows);
            reserve(&mut lengths.starts, 1)?;
            lengths.starts.push(end);
        }
        Ok(lengths)
    }

    /// Appends the next unit, whose rows have the lengths `lengths[c]` in column `c` (as many in
    /// every column).
    pub(crate) fn push_unit(&mut self, lengths: &[Vec<usize>]) -> Result<()> {
        let rows = lengths.first().map_or(0, Vec::len);
        for (column, unit) in self.columns.iter_mut().zip(lengths) {
            reserve(column, unit.len())?;
            column.extend(
                unit.iter()
                    .map(|&length| u32::try_from(length).unwrap_or(u32::MAX)),
            );
        }
        let end = self.starts.last().copied().unwrap_or(0) + rows as u64;
        reserve(&mut self.starts, 1)?;
        self.starts.push(end);
        Ok(())
    }

    /// The number of units.
    pub(crate) fn units(&self) -> usize {
        self.starts.len() - 1
    }

    /// The rows of unit `unit`.
    pub(crate) fn unit_rows(&self, unit: usize) -> u64 {
        self.starts[unit + 1] - self.starts[unit]
    }

    /// The length of row `row` of unit `unit` in column `column`.
    pub(super) fn get(&self, unit: usize, row: u32, column: usize) -> usize {
        self.columns[column][(self.starts[unit] + u64::from(row)) as usize] as usize
    }
}
