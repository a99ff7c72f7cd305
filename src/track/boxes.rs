//! An index over axis-aligned boxes for "every box that holds (x, y)" queries: each box is
//! listed in every cell of a uniform grid that it meets (a counting sort, cells row-major), so
//! a query reads the one cell its point lies in and tests the boxes listed there. The cells
//! widen until the entries are a few per box, so a few boxes hundreds of pixels wide (markers
//! at 4K) cost no more than many small ones.

/// A box [left, top, right, bottom], inclusive.
pub(super) type Box2 = [f64; 4];

#[derive(Default)]
pub(super) struct BoxIndex {
    inv_cell: f64,
    x0: f64,
    y0: f64,
    nx: usize,
    ny: usize,
    /// The boxes, in the order given (queries report these numbers).
    boxes: Vec<Box2>,
    /// `start[c]..start[c + 1]` are cell c's entries.
    start: Vec<u32>,
    /// Entries in cell order: box numbers.
    entries: Vec<u32>,
    /// Boxes with a side that is not finite: tested by every query.
    unbounded: Vec<u32>,
    /// Per box: its cells [cx0, cy0, cx1, cy1] while the index is built (`u32::MAX`: listed
    /// in none).
    cells_of: Vec<[u32; 4]>,
}

/// Is `b` listed in the cells it meets (finite, and holds some point)?
fn is_listed(b: &Box2) -> bool {
    b.iter().all(|v| v.is_finite()) && b[0] <= b[2] && b[1] <= b[3]
}

/// Does `b` hold (x, y)?
#[inline]
pub(super) fn holds(b: &Box2, x: f64, y: f64) -> bool {
    let [l, t, r, bottom] = *b;
    x >= l && x <= r && y >= t && y <= bottom
}

impl BoxIndex {
    /// Indexes `boxes` in cells of at least `min_cell` px. A box with a side that is not finite
    /// is tested by every query; one that holds no point (left > right, a NaN) is listed nowhere.
    pub(super) fn rebuild(&mut self, boxes: impl IntoIterator<Item = Box2>, min_cell: f64) {
        self.boxes.clear();
        self.boxes.extend(boxes);
        self.unbounded.clear();
        self.start.clear();
        self.entries.clear();
        self.cells_of.clear();
        let mut bounds = [f64::MAX, f64::MAX, f64::MIN, f64::MIN];
        let mut listed = 0usize;
        for (k, b) in self.boxes.iter().enumerate() {
            if is_listed(b) {
                listed += 1;
                let [l, t, r, bottom] = *b;
                let [x0, y0, x1, y1] = &mut bounds;
                (*x0, *y0, *x1, *y1) = (x0.min(l), y0.min(t), x1.max(r), y1.max(bottom));
            } else if b[0] <= b[2] && b[1] <= b[3] {
                self.unbounded.push(k as u32);
            }
        }
        if listed == 0 {
            (self.nx, self.ny) = (0, 0);
            return;
        }
        let [x0, y0, x1, y1] = bounds;
        (self.x0, self.y0) = (x0, y0);
        // At most ~4 cells and ~4 entries per box (a box of side s meets ⌊s / cell⌋ + 2 cells
        // a side at most); past a finite cell side, one cell.
        let most = 4.0 * listed as f64 + 64.0;
        let mut cell = if min_cell.is_finite() && min_cell > 0.0 {
            min_cell
        } else {
            1.0
        };
        (self.inv_cell, self.nx, self.ny) = loop {
            if !cell.is_finite() {
                break (0.0, 1, 1);
            }
            let inv = 1.0 / cell;
            // (Truncation is the floor of these non-negative spans, without a call.)
            let (nx, ny) = (
                ((x1 - x0) * inv) as u64 as f64 + 1.0,
                ((y1 - y0) * inv) as u64 as f64 + 1.0,
            );
            let side = |lo: f64, hi: f64| ((hi - lo) * inv) as u64 as f64 + 2.0;
            let entries: f64 = (self.boxes.iter().filter(|b| is_listed(b)))
                .map(|b| side(b[0], b[2]) * side(b[1], b[3]))
                .sum();
            if nx * ny <= most && entries <= most {
                break (inv, nx as usize, ny as usize);
            }
            cell *= 2.0;
        };
        // Each box's cells, and each cell's count.
        let (nx, cells) = (self.nx, self.nx * self.ny);
        self.start.resize(cells + 1, 0);
        for b in &self.boxes {
            let of = if is_listed(b) {
                let ((cx0, cy0), (cx1, cy1)) = (self.cell(b[0], b[1]), self.cell(b[2], b[3]));
                for cy in cy0..=cy1 {
                    for c in cy * nx + cx0..=cy * nx + cx1 {
                        self.start[c + 1] += 1;
                    }
                }
                [cx0, cy0, cx1, cy1].map(|v| v as u32)
            } else {
                [u32::MAX; 4]
            };
            self.cells_of.push(of);
        }
        for c in 0..cells {
            self.start[c + 1] += self.start[c];
        }
        // Each box into its cells, in box order; `start[c]` counts on as cell c fills, and
        // ends where cell c + 1 starts, so one shift puts it back.
        self.entries.resize(self.start[cells] as usize, 0);
        for (k, of) in self.cells_of.iter().enumerate() {
            if of[0] == u32::MAX {
                continue;
            }
            let [cx0, cy0, cx1, cy1] = of.map(|v| v as usize);
            for cy in cy0..=cy1 {
                for c in cy * nx + cx0..=cy * nx + cx1 {
                    self.entries[self.start[c] as usize] = k as u32;
                    self.start[c] += 1;
                }
            }
        }
        self.start.copy_within(..cells, 1);
        self.start[0] = 0;
    }

    /// The cell (column, row) of (x, y), clamped to the grid; (x, y) at or after the origin
    /// (or NaN: cell 0).
    /// (Both building and querying find cells by this one rounding, so a box holds a point
    /// only if the box is listed in the point's cell.)
    #[inline]
    fn cell(&self, x: f64, y: f64) -> (usize, usize) {
        let cx = (((x - self.x0) * self.inv_cell) as usize).min(self.nx - 1);
        let cy = (((y - self.y0) * self.inv_cell) as usize).min(self.ny - 1);
        (cx, cy)
    }

    /// Calls `f(k)` for every box k that holds (x, y), in no particular order.
    #[inline]
    pub(super) fn for_each_holding(&self, x: f64, y: f64, mut f: impl FnMut(usize)) {
        for &k in &self.unbounded {
            if holds(&self.boxes[k as usize], x, y) {
                f(k as usize);
            }
        }
        // Before the origin (or NaN) no listed box holds it.
        if self.nx == 0 || !(x >= self.x0 && y >= self.y0) {
            return;
        }
        let (cx, cy) = self.cell(x, y);
        let c = cy * self.nx + cx;
        for &k in &self.entries[self.start[c] as usize..self.start[c + 1] as usize] {
            if holds(&self.boxes[k as usize], x, y) {
                f(k as usize);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt64;

    fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Every query gives exactly the boxes that hold its point: small and huge boxes, boxes of
    /// one pixel, unbounded and empty ones, points on the edges and outside.
    #[test]
    fn queries_give_exactly_the_boxes_that_hold_the_point() {
        let mut rng = Mt64::new(3);
        let mut index = BoxIndex::default();
        for round in 0..40 {
            let n = (rng.next_u64() % 300) as usize;
            let mut boxes: Vec<Box2> = (0..n)
                .map(|_| {
                    let (x, y) = (
                        uniform(&mut rng, 0.0, 1000.0),
                        uniform(&mut rng, 0.0, 600.0),
                    );
                    let side = match rng.next_u64() % 4 {
                        0 => 0.0,
                        1 => uniform(&mut rng, 0.0, 8.0).floor(),
                        2 => uniform(&mut rng, 8.0, 60.0),
                        _ => uniform(&mut rng, 60.0, 700.0),
                    };
                    [x, y, x + side, y + side * uniform(&mut rng, 0.5, 1.5)]
                })
                .collect();
            if round % 3 == 0 {
                boxes.push([f64::NEG_INFINITY, 10.0, 20.0, f64::INFINITY]);
                boxes.push([50.0, 50.0, 40.0, 60.0]);
                boxes.push([f64::NAN, 0.0, 5.0, 5.0]);
            }
            let min_cell = uniform(&mut rng, 1.0, 40.0);
            index.rebuild(boxes.iter().copied(), min_cell);
            for q in 0..400 {
                let (x, y) = if q % 2 == 0 && !boxes.is_empty() {
                    // A corner or an edge of a box.
                    let b = boxes[(rng.next_u64() % boxes.len() as u64) as usize];
                    (b[(q / 2) % 2 * 2], b[1 + (q / 4) % 2 * 2])
                } else {
                    (
                        uniform(&mut rng, -50.0, 1800.0),
                        uniform(&mut rng, -50.0, 1400.0),
                    )
                };
                let mut got = Vec::new();
                index.for_each_holding(x, y, |k| got.push(k));
                got.sort_unstable();
                let expected: Vec<usize> = (0..boxes.len())
                    .filter(|&k| holds(&boxes[k], x, y))
                    .collect();
                assert_eq!(got, expected, "round {round}, query ({x}, {y})");
            }
        }
    }
}
