//! The row ranges of work items (`[start, end)` of a unit's rows), as resuming and merging use
//! them: the rows of an item, an item without its first rows or without some rows, ranges
//! joined, an item's `n`-th row in its unit.

use super::Item;

/// The number of rows of `item` when its ranges say (an open range, ending at `2**64 - 1`,
/// does not; nor does a whole unit).
pub(crate) fn item_len(item: &Item) -> Option<u64> {
    let ranges = item.rows.as_ref()?;
    if ranges.last().is_some_and(|r| r[1] == u64::MAX) {
        return None;
    }
    Some(ranges.iter().map(|[a, b]| b - a).sum())
}

/// `ranges` without their first `rows` rows.
pub(super) fn drop_rows(ranges: &[[u64; 2]], rows: u64) -> Vec<[u64; 2]> {
    let mut left = rows;
    let mut out = Vec::new();
    for &[start, end] in ranges {
        let len = end - start;
        if left >= len {
            left -= len;
            continue;
        }
        out.push([start + left, end]);
        left = 0;
    }
    out
}

/// `ranges` (ascending, cut to a unit of `unit_rows` rows) without the rows `given` (sorted).
pub(super) fn remove_rows(ranges: &[[u64; 2]], unit_rows: u64, given: &[u64]) -> Vec<[u64; 2]> {
    let mut out = Vec::new();
    let mut given = given.iter().copied().peekable();
    for &[start, end] in ranges {
        let end = end.min(unit_rows);
        let mut from = start;
        while let Some(row) = given.next_if(|&row| row < end) {
            if row >= from {
                if row > from {
                    out.push([from, row]);
                }
                from = row + 1;
            }
        }
        if from < end {
            out.push([from, end]);
        }
    }
    out
}

/// Ranges sorted and joined where they touch or overlap.
pub(super) fn join_ranges(mut ranges: Vec<[u64; 2]>) -> Vec<[u64; 2]> {
    ranges.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::new();
    for [start, end] in ranges {
        match out.last_mut() {
            Some(last) if start <= last[1] => last[1] = last[1].max(end),
            _ => out.push([start, end]),
        }
    }
    out
}

/// The unit row of the `row`-th row of `item`.
pub(super) fn unit_row(item: &Item, row: u64) -> Option<u64> {
    let Some(ranges) = &item.rows else {
        return Some(row);
    };
    let mut left = row;
    for &[start, end] in ranges {
        let len = end - start;
        if left < len {
            return Some(start + left);
        }
        left -= len;
    }
    None
}

/// The unit rows of the item rows `rows` (ascending) of `item`, as ranges: one pass over both.
/// A row past the item's rows is left out and counted: `(ranges, rows left out)`.
pub(super) fn unit_ranges(item: &Item, rows: &[u64]) -> (Vec<[u64; 2]>, usize) {
    let whole = [[0, u64::MAX]];
    let ranges = item.rows.as_deref().unwrap_or(&whole);
    let mut out: Vec<[u64; 2]> = Vec::new();
    let mut range = 0;
    // The item rows before range `range`.
    let mut before = 0u64;
    let mut outside = 0;
    for &row in rows {
        while range < ranges.len() && row >= before + (ranges[range][1] - ranges[range][0]) {
            before += ranges[range][1] - ranges[range][0];
            range += 1;
        }
        let Some(&[start, _]) = ranges.get(range) else {
            outside += 1;
            continue;
        };
        let at = start + (row - before);
        match out.last_mut() {
            Some(last) if last[1] == at => last[1] = at + 1,
            _ => out.push([at, at + 1]),
        }
    }
    (out, outside)
}
