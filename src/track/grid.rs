//! A uniform-grid index over 2-D points for "every point near (x, y)" queries: points bucketed
//! by cell with a counting sort (cells row-major, so a row of cells is one contiguous slice).
//! The cell count is capped at a few per point, so far-apart points cost no extra memory.

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
    /// Entries in cell order: point index and position.
    index: Vec<u32>,
    xs: Vec<f64>,
    ys: Vec<f64>,
    /// Per point: its cell while the index is built, then its slot (`u32::MAX`: left out).
    slot_of_point: Vec<u32>,
}

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
            slot_of_point: Vec::new(),
        }
    }

    /// Sets the smallest cell side for the next `rebuild` (ignored unless finite and > 0).
    pub(crate) fn set_min_cell(&mut self, min_cell: f64) {
        if min_cell.is_finite() && min_cell > 0.0 {
            self.min_cell = min_cell;
        }
    }

    /// Indexes points 0..n, at `point(i)` (the indices queries report). Points with a
    /// non-finite coordinate are left out. With `parallel`, the passes over the points that
    /// need no order run on the rayon pool.
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
        let (mut x0, mut y0, mut x1, mut y1) = if parallel {
            (0..n)
                .into_par_iter()
                .with_min_len(4096)
                .map(bounds_of)
                .reduce(|| EMPTY, union)
        } else {
            (0..n).map(bounds_of).fold(EMPTY, union)
        };
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
        let inv = self.inv_cell;
        (self.x0, self.y0) = (x0, y0);
        self.nx = (w * inv) as usize + 1;
        self.ny = (h * inv) as usize + 1;
        let cells = self.nx * self.ny;

        // Each point's cell (`u32::MAX`: left out), then the points per cell.
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
        self.slot_of_point.clear();
        if parallel {
            self.slot_of_point
                .par_extend((0..n).into_par_iter().with_min_len(4096).map(cell_of));
        } else {
            self.slot_of_point.extend((0..n).map(cell_of));
        }
        self.start.clear();
        self.start.resize(cells + 1, 0);
        for &c in &self.slot_of_point {
            if c != u32::MAX {
                self.start[c as usize + 1] += 1;
            }
        }
        for c in 0..cells {
            self.start[c + 1] += self.start[c];
        }
        let total = self.start[cells] as usize;
        self.index.resize(total, 0);
        self.xs.resize(total, 0.0);
        self.ys.resize(total, 0.0);
        // Fill using start[c] as the cursor, then shift back.
        for i in 0..n {
            let c = self.slot_of_point[i];
            if c != u32::MAX {
                let (x, y) = point(i);
                let slot = self.start[c as usize] as usize;
                self.start[c as usize] += 1;
                self.index[slot] = i as u32;
                self.xs[slot] = x;
                self.ys[slot] = y;
                self.slot_of_point[i] = slot as u32;
            }
        }
        for c in (1..=cells).rev() {
            self.start[c] = self.start[c - 1];
        }
        self.start[0] = 0;
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
        self.index.len()
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
        if self.nx == 0 || !(x.is_finite() && y.is_finite() && r.is_finite()) {
            return;
        }
        let Some((cx0, cx1)) = self.cells(x - r - self.x0, x + r - self.x0, self.nx) else {
            return;
        };
        let Some((cy0, cy1)) = self.cells(y - r - self.y0, y + r - self.y0, self.ny) else {
            return;
        };
        for cy in cy0..=cy1 {
            self.run(cy, cx0, cx1, &mut f);
        }
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

    /// The x of every slot.
    pub(crate) fn xs(&self) -> &[f64] {
        &self.xs
    }

    /// The y of every slot.
    pub(crate) fn ys(&self) -> &[f64] {
        &self.ys
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
}
