//! The transposed plane: a 2-d block whose rows are adjacent in the source (row stride 1), so
//! that every output row is a source column.
//!
//! The plane is walked in vertical strips of one 64-byte output line's worth of columns: inside a
//! strip, a band of tile-wide columns is read from top to bottom, tile by tile, so that the source
//! is read as a few sequential streams (one per column of the band) and every output line is
//! finished while it is still in cache.
//! Blocks of 64 x 64 elements, as before, read 64 source columns at once and wrote 64 output rows
//! at once: more streams than the prefetchers follow and more pages than the L1 TLB holds, so that
//! the copy ran far below memcpy's speed (docs/benchmarks.md).
//! The tiles are register transposes ([`super::x86`]) for four- and eight-byte elements on
//! x86-64, and a local array that the compiler vectorises for the other sizes and architectures.

/// Output rows handled per pass over a strip: the strip's output lines of 2048 rows (128 KiB)
/// stay in L2 between the passes of its bands, so each line is fetched once.
const ROW_CHUNK: usize = 2048;

/// Bytes of output row that a strip covers: one cache line.
const STRIP_BYTES: usize = 64;

/// A square register tile: how many rows and columns it transposes at once, and how.
pub(super) trait Tile {
    /// The element moved, of the size the tile is written for.
    type Element: Copy;
    /// The tile's edge, in elements.
    const EDGE: usize;

    /// Transposes one `EDGE x EDGE` tile.
    ///
    /// # Safety
    ///
    /// For `c` in `0..EDGE`, the `EDGE` elements from `src + c * col_stride` are readable; for `r`
    /// in `0..EDGE`, the `EDGE` elements from `dst + r * cols` are writable; the two do not
    /// overlap. The CPU has the features the implementation needs.
    unsafe fn transpose(
        src: *const Self::Element,
        col_stride: isize,
        dst: *mut Self::Element,
        cols: usize,
    );
}

/// The portable tile: eight unit-stride runs of eight (one per output column) into a local array,
/// written out as eight runs of eight (one per output row); the compiler turns both into vector
/// moves where it can.
pub(super) struct ArrayTile<T>(std::marker::PhantomData<T>);

impl<T: Copy> Tile for ArrayTile<T> {
    type Element = T;
    const EDGE: usize = 8;

    #[inline(always)]
    unsafe fn transpose(src: *const T, col_stride: isize, dst: *mut T, cols: usize) {
        const EDGE: usize = 8;
        // SAFETY: the first element of the tile is readable (the caller's guarantee).
        let first = unsafe { src.read() };
        let mut tile = [[first; EDGE]; EDGE];
        for (col, column) in tile.iter_mut().enumerate() {
            // SAFETY: the eight elements of column `col` are adjacent and readable.
            let run =
                unsafe { std::slice::from_raw_parts(src.offset(col as isize * col_stride), EDGE) };
            column.copy_from_slice(run);
        }
        let lines: [[T; EDGE]; EDGE] =
            std::array::from_fn(|row| std::array::from_fn(|col| tile[col][row]));
        for (row, line) in lines.into_iter().enumerate() {
            // SAFETY: output row `row` of the tile is eight writable elements.
            unsafe {
                dst.add(row * cols)
                    .cast::<[T; EDGE]>()
                    .write_unaligned(line)
            };
        }
    }
}

/// Copies the plane `[rows, cols]` with strides `[1, col_stride]` into `dst` in row-major order,
/// with the tile `K` for the whole tiles and element moves for the edges that do not fill one.
///
/// Inlined into each caller, so that a caller compiled for AVX2 inlines an AVX2 tile.
///
/// # Safety
///
/// As for [`super::copy_strided`], for the plane; the CPU has the features `K` needs.
#[inline(always)]
pub(super) unsafe fn transpose_plane<K: Tile>(
    src: *const K::Element,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut K::Element,
) {
    let edge = K::EDGE;
    let strip = (STRIP_BYTES / size_of::<K::Element>()).max(edge);
    let full_rows = rows - rows % edge;
    let at = |row: usize, col: usize| row as isize + col as isize * col_stride;
    for strip_start in (0..cols).step_by(strip) {
        let strip_end = (strip_start + strip).min(cols);
        let full_end = strip_start + (strip_end - strip_start) / edge * edge;
        for chunk in (0..full_rows).step_by(ROW_CHUNK) {
            let chunk_end = (chunk + ROW_CHUNK).min(full_rows);
            let mut band = strip_start;
            while band < full_end {
                let mut row = chunk;
                while row < chunk_end {
                    // SAFETY: the tile at `(row, band)` lies inside the plane (`row + edge <=
                    // full_rows <= rows`, `band + edge <= full_end <= cols`), so its source
                    // columns are readable and its output rows writable, in disjoint buffers;
                    // the caller vouches for the CPU features.
                    unsafe {
                        K::transpose(
                            src.offset(at(row, band)),
                            col_stride,
                            dst.add(row * cols + band),
                            cols,
                        )
                    };
                    row += edge;
                }
                band += edge;
            }
        }
        // The bottom rows under the strip's tiles and the columns right of them, each column read
        // from top to bottom.
        for col in strip_start..strip_end {
            let first_row = if col < full_end { full_rows } else { 0 };
            for row in first_row..rows {
                // SAFETY: `(row, col)` is an index of the plane: the source offset is inside the
                // view and the destination index below `rows * cols`.
                unsafe {
                    dst.add(row * cols + col)
                        .write(src.offset(at(row, col)).read())
                };
            }
        }
    }
}
