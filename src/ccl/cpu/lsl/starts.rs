//! Where each component of the last labeling starts in raster order, from the strips' runs and
//! their final labels (`Lsl::component_starts`), no label image: the pixel an outline trace
//! starts from.

use super::{root_offsets, Lsl, Strip};
use crate::ccl::stats::ComponentStats;
use rayon::prelude::*;

/// The components' first pixels of the last labeling, asked for one component at a time.
pub struct ComponentStarts<'a> {
    strips: &'a [Strip],
    fins: &'a [Vec<u32>],
    strip_rows: usize,
}

impl Lsl {
    /// The first pixels of the components of the last labeling of a `width`-pixel-wide mask:
    /// the final label of every provisional one, in parallel (no label image is written).
    pub fn component_starts(&mut self, width: u32) -> ComponentStarts<'_> {
        let strip_rows = self.strips.first().map_or(1, |s| s.y1 - s.y0);
        let stride = (strip_rows as u64 * width.div_ceil(2) as u64) as u32;
        let (offsets, _) = root_offsets(&self.strips);
        let strips = &self.strips[..];
        self.fins
            .par_iter_mut()
            .enumerate()
            .for_each(|(k, fin)| strips[k].final_labels(k, strips, &offsets, stride, fin));
        ComponentStarts {
            strips,
            fins: &self.fins,
            strip_rows,
        }
    }
}

impl ComponentStarts<'_> {
    /// The column of `s`'s first pixel on its top row: the component's first pixel in raster
    /// order. None for a row that is not a component of the labeling.
    pub fn first_column(&self, s: &ComponentStats) -> Option<u32> {
        let y = s.top as usize;
        let k = y / self.strip_rows;
        let (strip, fin) = (self.strips.get(k)?, self.fins.get(k)?);
        if !(strip.y0..strip.y1).contains(&y) {
            return None;
        }
        // The row's runs in order of x; those that end at or before the component's left
        // column are not its own.
        let runs = strip.row_runs(y);
        let (mut from, mut to) = (runs.start, runs.end);
        while from < to {
            let mid = (from + to) / 2;
            if strip.edges[2 * mid + 1] <= s.left {
                from = mid + 1;
            } else {
                to = mid;
            }
        }
        (from..runs.end)
            .find(|&i| fin.get((strip.run_label[i] - strip.base) as usize) == Some(&s.label))
            .map(|i| strip.edges[2 * i])
    }
}
