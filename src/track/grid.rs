//! A uniform-grid index over 2-D points for "every point near (x, y)" queries: points bucketed
//! by cell with a counting sort (cells row-major, so a row of cells is one contiguous slice).
//! The cell count is capped at a few per point, so far-apart points cost no extra memory.
//!
//! The sort is stable (within a cell, points keep their order) and, with many points, runs on
//! the rayon pool: the points are cut into blocks, each block counts its points per cell, a
//! prefix over (cell, block) gives each block its own range of every cell, and the blocks
//! scatter their points at once. The result is the same as one pass in point order.

use rayon::prelude::*;

pub(crate) struct GridIndex {
    /// The smallest cell side (about the largest query radius: a query visits ≤ 3×3 cells).
    min_cell: f64,
    cell: f64,
    /// 1 / cell: cells are found by multiplying (in building and querying alike, so both
    /// round the same way), which costs a fraction of a division.
    inv_cell: f64,
    x0: f64,
    y0: f64,
    nx: usize,
    ny: usize,
    /// `start[c]..start[c + 1]` are cell c's entries.
    start: Vec<u32>,
    /// Entries in cell order: point index and position; the first `len` of them (the vectors
    /// keep the length of the most so far: a dense frame after sparse ones does not fill them
    /// anew before the sort writes them).
    index: Vec<u32>,
    xs: Vec<f64>,
    ys: Vec<f64>,
    len: usize,
    /// Per point: its cell while the index is built, then its slot (`u32::MAX`: left out).
    slot_of_point: Vec<u32>,
    /// Per block of points and cell (block-major): the block's count of points in the cell,
    /// then the next slot the block writes in it.
    block_cells: Vec<u32>,
}

/// Points per block of the parallel counting sort, at least: a block also costs a pass over
/// every cell (its counts, and its part of the prefix), which a few thousand points outweigh.
const MIN_BLOCK: usize = 4096;
/// Cells per task of the passes over every block's counts.
const CELL_RANGE: usize = 2048;

impl GridIndex {
    pub(crate) fn new(min_cell: f64) -> Self {
        Self {
            min_cell: if min_cell.is_finite() && min_cell > 0.0 {
                min_cell
            } else {
                1.0
            },
            cell: 1.0,
            inv_cell: 1.0,
            x0: 0.0,
            y0: 0.0,
            nx: 0,
            ny: 0,
            start: Vec::new(),
            index: Vec::new(),
            xs: Vec::new(),
            ys: Vec::new(),
            len: 0,
            slot_of_point: Vec::new(),
            block_cells: Vec::new(),
        }
    }

    /// Sets the smallest cell side for the next `rebuild` (ignored unless finite and > 0).
    pub(crate) fn set_min_cell(&mut self, min_cell: f64) {
        if min_cell.is_finite() && min_cell > 0.0 {
            self.min_cell = min_cell;
        }
    }

    /// Indexes points 0..n, at `point(i)` (the indices queries report). Points with a
    /// non-finite coordinate are left out. With `parallel`, the passes over the points
    /// run on the rayon pool.
    pub(crate) fn rebuild(
        &mut self,
        n: usize,
        point: impl Fn(usize) -> (f64, f64) + Sync,
        parallel: bool,
    ) {
        type Bounds = (f64, f64, f64, f64);
        const EMPTY: Bounds = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
        let bounds_of = |i: usize| -> Bounds {
            match point(i) {
                (x, y) if x.is_finite() && y.is_finite() => (x, y, x, y),
                _ => EMPTY,
            }
        };
        let union = |a: Bounds, b: Bounds| (a.0.min(b.0), a.1.min(b.1), a.2.max(b.2), a.3.max(b.3));
        let (x0, y0, x1, y1) = if parallel {
            (0..n)
                .into_par_iter()
                .with_min_len(4096)
                .map(bounds_of)
                .reduce(|| EMPTY, union)
        } else {
            (0..n).map(bounds_of).fold(EMPTY, union)
        };
        self.rebuild_within([x0, y0, x1, y1], n, point, |_, _| {}, parallel);
    }

    /// Lays out the cells for `n` points whose finite ones lie in `bounds` [x0, y0, x1, y1] (x0 >
    /// x1 when there are none), as `rebuild_within` does before it sorts them; returns the
    /// number of cells. (The GPU tracker sorts the points into them on the device.)
    pub(crate) fn lay_cells(&mut self, bounds: [f64; 4], n: usize) -> usize {
        let [mut x0, mut y0, mut x1, mut y1] = bounds;
        if x0 > x1 {
            (x0, y0, x1, y1) = (0.0, 0.0, 0.0, 0.0);
        }
        // At most ~4 cells per point: widen the cells for sparse, far-spread points. Cell
        // boundaries lie on multiples of the cell size, so they stay put from frame to frame and
        // the cell order of slowly moving points barely changes.
        let max_cells = 4.0 * n as f64 + 64.0;
        let mut cell = self.min_cell;
        let (x0, y0, w, h) = loop {
            let (ax, ay) = ((x0 / cell).floor() * cell, (y0 / cell).floor() * cell);
            let (w, h) = (x1 - ax, y1 - ay);
            if (w / cell + 1.0) * (h / cell + 1.0) <= max_cells {
                break (ax, ay, w, h);
            }
            cell *= 2.0;
        };
        self.cell = cell;
        self.inv_cell = 1.0 / cell;
        (self.x0, self.y0) = (x0, y0);
        self.nx = (w * self.inv_cell) as usize + 1;
        self.ny = (h * self.inv_cell) as usize + 1;
        self.nx * self.ny
    }

    /// `rebuild`, given the bounding box [x0, y0, x1, y1] of the points with finite
    /// coordinates (x0 > x1 when there are none). `placed(i, slot)` is called as point i
    /// takes its slot (once per indexed point, from the pass that reads the points in order,
    /// on the rayon pool with `parallel`), for state a caller keeps per slot.
    pub(crate) fn rebuild_within(
        &mut self,
        bounds: [f64; 4],
        n: usize,
        point: impl Fn(usize) -> (f64, f64) + Sync,
        placed: impl Fn(usize, usize) + Sync,
        parallel: bool,
    ) {
        let cells = self.lay_cells(bounds, n);
        let (x0, y0, inv) = (self.x0, self.y0, self.inv_cell);

        // Each point's cell (`u32::MAX`: left out).
        let (nx, ny) = (self.nx, self.ny);
        let cell_of = |i: usize| -> u32 {
            match point(i) {
                (x, y) if x.is_finite() && y.is_finite() => {
                    let cx = (((x - x0) * inv) as usize).min(nx - 1);
                    let cy = (((y - y0) * inv) as usize).min(ny - 1);
                    (cy * nx + cx) as u32
                }
                _ => u32::MAX,
            }
        };
        let blocks = if parallel {
            rayon::current_num_threads().min(n / MIN_BLOCK).max(1)
        } else {
            1
        };
        self.sort_by_cell(n, blocks, cells, &cell_of, &point, &placed);
    }

    /// The counting sort of points 0..n by `cell_of` (`u32::MAX`: left out), in `blocks`
    /// blocks of points (on the rayon pool when more than one): fills `start`, `index`, `xs`,
    /// `ys` and `slot_of_point`.
    fn sort_by_cell(
        &mut self,
        n: usize,
        blocks: usize,
        cells: usize,
        cell_of: &(impl Fn(usize) -> u32 + Sync),
        point: &(impl Fn(usize) -> (f64, f64) + Sync),
        placed: &(impl Fn(usize, usize) + Sync),
    ) {
        let block_len = n.div_ceil(blocks).max(1);
        let parallel = blocks > 1;
        // Each point's cell, and each block's count per cell.
        self.slot_of_point.resize(n, 0);
        // Each block zeroes its own counts (on its thread), so only growth fills here.
        if self.block_cells.len() < blocks * cells {
            self.block_cells.resize(blocks * cells, 0);
        }
        let count = |(b, (counts, of_block)): (usize, (&mut [u32], &mut [u32]))| {
            counts.fill(0);
            for (k, c) in of_block.iter_mut().enumerate() {
                *c = cell_of(b * block_len + k);
                if *c != u32::MAX {
                    counts[*c as usize] += 1;
                }
            }
        };
        let per_block = &mut self.block_cells[..blocks * cells];
        // Blocks without points (none at all, or fewer parts of `block_len` than blocks).
        per_block[n.div_ceil(block_len) * cells..].fill(0);
        let of_points = &mut self.slot_of_point[..];
        for_each_block(per_block, cells, of_points, block_len, parallel, count);
        // Each cell's total, then where each cell starts. A range of cells at a time, block
        // after block: each block's counts are read in order (the blocks' rows lie a whole
        // grid apart, and a cell's counts read across them would each miss the cache).
        self.start.resize(cells + 1, 0);
        let block_cells = &self.block_cells[..blocks * cells];
        let totals = |(r, totals): (usize, &mut [u32])| {
            let c0 = r * CELL_RANGE;
            totals.copy_from_slice(&block_cells[c0..c0 + totals.len()]);
            for b in 1..blocks {
                let row = &block_cells[b * cells + c0..b * cells + c0 + totals.len()];
                for (t, &k) in totals.iter_mut().zip(row) {
                    *t += k;
                }
            }
        };
        if parallel {
            self.start[1..]
                .par_chunks_mut(CELL_RANGE)
                .enumerate()
                .for_each(totals);
        } else {
            self.start[1..]
                .chunks_mut(CELL_RANGE)
                .enumerate()
                .for_each(totals);
        }
        self.start[0] = 0;
        for c in 0..cells {
            self.start[c + 1] += self.start[c];
        }
        // Each block's first slot in each cell: after the cell's points of the blocks before
        // (a range of cells at a time, block after block, as above).
        if blocks > 1 {
            let start = &self.start;
            let cursor = SharedSlice::new(&mut self.block_cells[..blocks * cells]);
            let place = |r: usize| {
                let c0 = r * CELL_RANGE;
                // The range's cursors, on the stack (no allocation a frame).
                let mut cursors = [0u32; CELL_RANGE];
                let next = &mut cursors[..CELL_RANGE.min(cells - c0)];
                next.copy_from_slice(&start[c0..c0 + next.len()]);
                for b in 0..blocks {
                    for (k, next) in next.iter_mut().enumerate() {
                        // SAFETY: each range of cells (its entries in every block) is
                        // visited by this call only.
                        unsafe {
                            let count = cursor.read(b * cells + c0 + k);
                            cursor.write(b * cells + c0 + k, *next);
                            *next += count;
                        }
                    }
                }
            };
            (0..cells.div_ceil(CELL_RANGE))
                .into_par_iter()
                .for_each(place);
        } else {
            self.block_cells[..cells].copy_from_slice(&self.start[..cells]);
        }
        let total = self.start[cells] as usize;
        if self.index.len() < total {
            self.index.resize(total, 0);
            self.xs.resize(total, 0.0);
            self.ys.resize(total, 0.0);
        }
        self.len = total;
        // Each block scatters its points, in order, from its cursors.
        let (index, xs, ys) = (
            SharedSlice::new(&mut self.index[..total]),
            SharedSlice::new(&mut self.xs[..total]),
            SharedSlice::new(&mut self.ys[..total]),
        );
        let scatter = |(b, (cursors, of_block)): (usize, (&mut [u32], &mut [u32]))| {
            for (k, c) in of_block.iter_mut().enumerate() {
                if *c != u32::MAX {
                    let i = b * block_len + k;
                    let slot = cursors[*c as usize];
                    cursors[*c as usize] += 1;
                    let (x, y) = point(i);
                    // SAFETY: the blocks' ranges of every cell are disjoint and each is as long
                    // as the points the block has in the cell, so every slot is written once.
                    unsafe {
                        index.write(slot as usize, i as u32);
                        xs.write(slot as usize, x);
                        ys.write(slot as usize, y);
                    }
                    placed(i, slot as usize);
                    *c = slot;
                }
            }
        };
        let per_block = &mut self.block_cells[..blocks * cells];
        let of_points = &mut self.slot_of_point[..];
        for_each_block(per_block, cells, of_points, block_len, parallel, scatter);
    }

    /// Calls `f(index, x, y)` for every point whose cell meets the square of half-side `r`
    /// around (x, y); the caller checks the exact distance.
    #[inline]
    pub(crate) fn for_each_near(&self, x: f64, y: f64, r: f64, mut f: impl FnMut(u32, f64, f64)) {
        self.for_each_slot_near(x, y, r, |slot| {
            f(self.index[slot], self.xs[slot], self.ys[slot])
        });
    }

    /// Number of indexed points (slots are 0..len, in cell order: near slots are near points).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The slot of point `i` (None: it was left out, or there is no such point).
    #[inline]
    pub(crate) fn slot_of(&self, i: usize) -> Option<usize> {
        self.slot_of_point
            .get(i)
            .filter(|&&slot| slot != u32::MAX)
            .map(|&slot| slot as usize)
    }

    /// The point in `slot`: (index, x, y).
    #[inline]
    pub(crate) fn slot(&self, slot: usize) -> (u32, f64, f64) {
        (self.index[slot], self.xs[slot], self.ys[slot])
    }

    /// Like `for_each_near`, but gives the slot (see `slot`).
    #[inline]
    pub(crate) fn for_each_slot_near(&self, x: f64, y: f64, r: f64, mut f: impl FnMut(usize)) {
        self.for_each_run_near(x, y, r, |run| run.for_each(&mut f));
    }

    /// Like `for_each_slot_near`, but gives the slots a run at a time: the slots of one row of
    /// cells are contiguous, so a caller can go through `xs()[run]` and `ys()[run]` as slices.
    #[inline]
    pub(crate) fn for_each_run_near(
        &self,
        x: f64,
        y: f64,
        r: f64,
        mut f: impl FnMut(std::ops::Range<usize>),
    ) {
        if let Some(window) = self.window(x, y, r) {
            for cy in window.cy0..=window.cy1 {
                self.run(cy, window.cx0, window.cx1, &mut f);
            }
        }
    }

    /// The cells a query of half-side `r` around (x, y) visits (None: none).
    #[inline]
    pub(crate) fn window(&self, x: f64, y: f64, r: f64) -> Option<CellWindow> {
        if self.nx == 0 || !(x.is_finite() && y.is_finite() && r.is_finite()) {
            return None;
        }
        let (cx0, cx1) = self.cells(x - r - self.x0, x + r - self.x0, self.nx)?;
        let (cy0, cy1) = self.cells(y - r - self.y0, y + r - self.y0, self.ny)?;
        Some(CellWindow { cx0, cx1, cy0, cy1 })
    }

    /// The cell (column, row) of the point in `slot`, as the index placed it.
    #[inline]
    pub(crate) fn cell_of_slot(&self, slot: usize) -> (usize, usize) {
        let cx = (((self.xs[slot] - self.x0) * self.inv_cell) as usize).min(self.nx - 1);
        let cy = (((self.ys[slot] - self.y0) * self.inv_cell) as usize).min(self.ny - 1);
        (cx, cy)
    }

    /// The side of the cells.
    pub(crate) fn cell(&self) -> f64 {
        self.cell
    }

    /// The cells [⌊lo/cell⌋, ⌊hi/cell⌋] within 0..n, if any. (A cast truncates, which is the
    /// floor of the non-negative values it is given: no call to `floor`, which the baseline
    /// x86-64 target cannot inline.)
    #[inline]
    fn cells(&self, lo: f64, hi: f64, n: usize) -> Option<(usize, usize)> {
        let (a, b) = (lo * self.inv_cell, hi * self.inv_cell);
        if b < 0.0 || a >= n as f64 {
            return None;
        }
        Some((a.max(0.0) as usize, (b as usize).min(n - 1)))
    }

    /// The slots of cells cx0..=cx1 of row cy, if there are any.
    #[inline]
    fn run(&self, cy: usize, cx0: usize, cx1: usize, f: &mut impl FnMut(std::ops::Range<usize>)) {
        let row = cy * self.nx;
        let (a, b) = (
            self.start[row + cx0] as usize,
            self.start[row + cx1 + 1] as usize,
        );
        if a < b {
            f(a..b);
        }
    }

    /// The grid as a device copy needs it: the origin (x, y), 1 / the cell side, the columns
    /// and the rows of cells.
    #[cfg(feature = "cuda")]
    pub(crate) fn geometry(&self) -> (f64, f64, f64, usize, usize) {
        (self.x0, self.y0, self.inv_cell, self.nx, self.ny)
    }

    /// The x of every slot.
    pub(crate) fn xs(&self) -> &[f64] {
        &self.xs[..self.len]
    }

    /// The y of every slot.
    pub(crate) fn ys(&self) -> &[f64] {
        &self.ys[..self.len]
    }
}

/// The cells, columns cx0..=cx1 of rows cy0..=cy1, that a query visits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CellWindow {
    cx0: usize,
    cx1: usize,
    cy0: usize,
    cy1: usize,
}

impl CellWindow {
    #[inline]
    pub(crate) fn holds(&self, (cx, cy): (usize, usize)) -> bool {
        (self.cx0..=self.cx1).contains(&cx) && (self.cy0..=self.cy1).contains(&cy)
    }
}

/// Runs `f((block, its entries per cell, its points' entries))` over the blocks of points, on
/// the rayon pool when `parallel`.
fn for_each_block(
    per_block: &mut [u32],
    cells: usize,
    of_points: &mut [u32],
    block_len: usize,
    parallel: bool,
    f: impl Fn((usize, (&mut [u32], &mut [u32]))) + Sync + Send,
) {
    if parallel {
        per_block
            .par_chunks_mut(cells)
            .zip(of_points.par_chunks_mut(block_len))
            .enumerate()
            .for_each(f);
    } else {
        per_block
            .chunks_mut(cells)
            .zip(of_points.chunks_mut(block_len))
            .enumerate()
            .for_each(f);
    }
}

/// A slice that several threads write at once, each at places no other thread touches.
struct SharedSlice<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: the callers of `read` and `write` guarantee that no two threads touch one element.
unsafe impl<T: Send> Sync for SharedSlice<T> {}

impl<T: Copy> SharedSlice<T> {
    fn new(v: &mut [T]) -> Self {
        Self {
            ptr: v.as_mut_ptr(),
            len: v.len(),
        }
    }

    /// SAFETY: no other thread touches element `i` meanwhile.
    #[inline]
    unsafe fn read(&self, i: usize) -> T {
        assert!(i < self.len);
        *self.ptr.add(i)
    }

    /// SAFETY: no other thread touches element `i` meanwhile.
    #[inline]
    unsafe fn write(&self, i: usize, v: T) {
        assert!(i < self.len);
        *self.ptr.add(i) = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pts: &[(f64, f64)], cell: f64, queries: &[(f64, f64, f64)]) {
        let mut grid = GridIndex::new(cell);
        grid.rebuild(pts.len(), |i| pts[i], false);
        for &(qx, qy, r) in queries {
            let mut found = Vec::new();
            grid.for_each_near(qx, qy, r, |i, x, y| {
                assert_eq!(pts[i as usize], (x, y));
                if (x - qx).hypot(y - qy) <= r {
                    found.push(i);
                }
            });
            found.sort();
            let expected: Vec<u32> = (0..pts.len() as u32)
                .filter(|&i| {
                    let (x, y) = pts[i as usize];
                    (x - qx).hypot(y - qy) <= r
                })
                .collect();
            assert_eq!(found, expected, "query ({qx}, {qy}, {r})");
        }
    }

    #[test]
    fn finds_exactly_the_points_a_brute_force_search_finds() {
        let pts: Vec<(f64, f64)> = (0..500)
            .map(|i| {
                let i = i as f64;
                ((i * 37.3) % 211.0 - 5.0, (i * 91.7) % 157.0 - 3.0)
            })
            .collect();
        let queries = [
            (0.0, 0.0, 12.0),
            (100.5, 77.2, 9.0),
            (-20.0, 160.0, 12.0),
            (205.9, 153.9, 12.0),
            (-500.0, 0.0, 12.0),
        ];
        check(&pts, 12.0, &queries);
    }

    #[test]
    fn runs_hold_the_slots_near_a_point_and_map_back_to_points() {
        let pts: Vec<(f64, f64)> = (0..3000)
            .map(|i| {
                let i = i as f64;
                ((i * 37.3) % 401.0 - 5.0, (i * 91.7) % 257.0 - 3.0)
            })
            .collect();
        let mut grid = GridIndex::new(7.5);
        grid.rebuild(pts.len(), |i| pts[i], false);
        let (qx, qy, r) = (100.5, 77.2, 9.0);
        let (mut by_run, mut by_slot) = (Vec::new(), Vec::new());
        grid.for_each_run_near(qx, qy, r, |run| {
            for slot in run {
                let (i, x, y) = grid.slot(slot);
                assert_eq!((grid.xs()[slot], grid.ys()[slot]), (x, y));
                assert_eq!(grid.slot_of(i as usize), Some(slot));
                by_run.push(slot);
            }
        });
        grid.for_each_slot_near(qx, qy, r, |slot| by_slot.push(slot));
        assert_eq!(by_run, by_slot);
        assert!(by_run.len() > 5);
    }

    #[test]
    fn far_spread_and_non_finite_points() {
        // Two clusters 10⁶ px apart: the cells widen instead of filling 10¹⁰ cells.
        let mut pts = vec![(0.0, 0.0), (3.0, 1.0), (1e6, 1e6), (1e6 + 2.0, 1e6)];
        pts.push((f64::NAN, 5.0));
        let mut grid = GridIndex::new(5.0);
        grid.rebuild(pts.len(), |i| pts[i], false);
        assert_eq!(grid.slot_of(4), None, "left out");
        assert_eq!(grid.slot_of(5), None, "no such point");
        assert!(grid.nx * grid.ny <= 4 * pts.len() + 64);
        check(
            &pts,
            5.0,
            &[(1.0, 0.0, 5.0), (1e6, 1e6, 5.0), (5e5, 5e5, 5.0)],
        );
        // No points at all.
        check(&[], 5.0, &[(0.0, 0.0, 5.0)]);
    }

    /// Points in random order, clustered so that cells hold many, some non-finite.
    fn scattered(n: usize, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = rand_mt::Mt64::new(seed);
        let mut unit = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (0..n)
            .map(|i| match i % 97 {
                0 => (f64::NAN, 3.0),
                1 => (5.0, f64::INFINITY),
                _ => ((unit() * 300.0).powi(2) / 300.0, unit() * 200.0),
            })
            .collect()
    }

    /// On several threads the points are sorted in blocks: the index is the same as the one
    /// pass in point order gives.
    #[test]
    fn parallel_sort_equals_the_sequential_one() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(5)
            .build()
            .unwrap();
        for n in [MIN_BLOCK * 2 + 1, MIN_BLOCK * 5 + 123, MIN_BLOCK * 11] {
            let pts = scattered(n, n as u64);
            let mut one = GridIndex::new(3.0);
            one.rebuild(n, |i| pts[i], false);
            let mut blocks = GridIndex::new(3.0);
            pool.install(|| blocks.rebuild(n, |i| pts[i], true));
            assert!(n / MIN_BLOCK > 1, "{n} points must make several blocks");
            assert_eq!(
                blocks.block_cells.len(),
                (n / MIN_BLOCK).min(5) * one.start.len().saturating_sub(1)
            );
            assert_eq!(blocks.start, one.start, "{n} points: cell starts");
            assert_eq!(blocks.index, one.index, "{n} points: slot order");
            assert_eq!(blocks.xs, one.xs);
            assert_eq!(blocks.ys, one.ys);
            assert_eq!(blocks.slot_of_point, one.slot_of_point);
        }
    }

    /// The sort is stable: within a cell, points keep their order; every finite point has a
    /// slot that holds it.
    #[test]
    fn points_of_a_cell_keep_their_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let n = MIN_BLOCK * 7;
        let pts = scattered(n, 8);
        for parallel in [false, true] {
            let mut grid = GridIndex::new(3.0);
            pool.install(|| grid.rebuild(n, |i| pts[i], parallel));
            let mut crowded = 0;
            for c in 0..grid.nx * grid.ny {
                let of_cell = &grid.index[grid.start[c] as usize..grid.start[c + 1] as usize];
                assert!(
                    of_cell.windows(2).all(|w| w[0] < w[1]),
                    "cell {c}: {of_cell:?}"
                );
                crowded += (of_cell.len() > 3) as usize;
            }
            assert!(crowded > 100, "cells should hold several points: {crowded}");
            for (i, &(x, y)) in pts.iter().enumerate() {
                match grid.slot_of(i) {
                    Some(slot) => assert_eq!(grid.slot(slot), (i as u32, x, y)),
                    None => assert!(!(x.is_finite() && y.is_finite()), "point {i} left out"),
                }
            }
        }
    }
}
