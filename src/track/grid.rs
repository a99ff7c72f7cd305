//! A uniform-grid index over 2-D points for "every point within r of (x, y)" queries: the
//! points sorted by cell, one binary search per cell row. No allocation proportional to the
//! area covered, so far-apart points cost nothing extra.

pub(crate) struct GridIndex {
    cell: f64,
    /// (cell row, cell column, point index), sorted.
    entries: Vec<(i64, i64, u32)>,
}

impl GridIndex {
    /// `cell` should be about the largest query radius (each query then visits ≤ 3×3 cells).
    pub(crate) fn new(cell: f64) -> Self {
        Self {
            cell: if cell.is_finite() && cell > 0.0 {
                cell
            } else {
                1.0
            },
            entries: Vec::new(),
        }
    }

    fn cell_of(&self, v: f64) -> i64 {
        // Saturating float → int conversion keeps non-finite or huge values harmless.
        (v / self.cell).floor() as i64
    }

    /// Indexes `points` (their positions in the slice are the indices queries report).
    pub(crate) fn rebuild(&mut self, points: impl Iterator<Item = (f64, f64)>) {
        self.entries.clear();
        for (i, (x, y)) in points.enumerate() {
            let e = (self.cell_of(y), self.cell_of(x), i as u32);
            self.entries.push(e);
        }
        self.entries.sort_unstable();
    }

    /// Calls `f(index)` for every point whose cell meets the square of half-side `r` around
    /// (x, y); the caller checks the exact distance.
    pub(crate) fn for_each_near(&self, x: f64, y: f64, r: f64, mut f: impl FnMut(u32)) {
        if !(x.is_finite() && y.is_finite() && r.is_finite()) {
            return;
        }
        let (cx0, cx1) = (self.cell_of(x - r), self.cell_of(x + r));
        for cy in self.cell_of(y - r)..=self.cell_of(y + r) {
            let lo = self.entries.partition_point(|e| (e.0, e.1) < (cy, cx0));
            let hi = self.entries.partition_point(|e| (e.0, e.1) <= (cy, cx1));
            for e in &self.entries[lo..hi.max(lo)] {
                f(e.2);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_points_a_brute_force_search_finds() {
        let pts: Vec<(f64, f64)> = (0..500)
            .map(|i| {
                let i = i as f64;
                ((i * 37.3) % 211.0 - 5.0, (i * 91.7) % 157.0 - 3.0)
            })
            .collect();
        let mut grid = GridIndex::new(12.0);
        grid.rebuild(pts.iter().copied());
        for (qx, qy, r) in [(0.0, 0.0, 12.0), (100.5, 77.2, 9.0), (-20.0, 160.0, 12.0)] {
            let mut found = Vec::new();
            grid.for_each_near(qx, qy, r, |i| {
                let (x, y) = pts[i as usize];
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
}
