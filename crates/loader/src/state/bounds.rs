//! The bounds of a merge, which has no source to count rows against: what it replays and what
//! the merged state lists, checked before anything is allocated.

/// The most rows of a shuffle window that a merge replays (a state saved inside a window, after
/// some of its batches): the replay holds one 4-byte index per row. The loader's windows hold
/// `max(buffer_size, batch_size)` rows plus those of the item that filled them.
pub const MAX_REPLAY_ROWS: u64 = 1 << 24;

/// The most items and row ranges a merged state lists beyond those its states list: the units
/// that some shards had passed and others had not, and the rows left of units read in part.
pub const MAX_MERGED_ENTRIES: u64 = 1 << 20;

/// The most rows of an epoch whose plan a merge works out again: the rows given are listed,
/// about 24 bytes each (1.5 GiB at this bound), reserved before the replay starts.
pub const MAX_PLANNED_ROWS: u64 = 1 << 26;

/// The most batches of an epoch whose plan a merge works out again (the plan holds a few dozen
/// bytes per batch).
pub const MAX_PLANNED_BATCHES: u64 = 1 << 22;
