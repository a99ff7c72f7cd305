//! Where each component of the last labeling starts in raster order, from the strips' runs and
//! their final labels (`Lsl::first_columns`), no label image: the pixel an outline trace
//! starts from.

use super::{root_offsets, Lsl};
use crate::ccl::stats::ComponentStats;
use rayon::prelude::*;

impl Lsl {
    /// For each of `stats` (rows of the last labeling of a `width`-pixel-wide mask, any of
    /// them), the column of its first pixel on its top row: the component's first pixel in
    /// raster order. None for a row that is not a component of that labeling.
    pub fn first_columns(&mut self, width: u32, stats: &[ComponentStats]) -> Vec<Option<u32>> {
        let Some(first) = self.strips.first() else {
            return vec![None; stats.len()];
        };
        let strip_rows = first.y1 - first.y0;
        let stride = (strip_rows as u64 * width.div_ceil(2) as u64) as u32;
        let (offsets, _) = root_offsets(&self.strips);
        let strips = &self.strips[..];
        self.fins
            .par_iter_mut()
            .enumerate()
            .for_each(|(k, fin)| strips[k].final_labels(k, strips, &offsets, stride, fin));
        let fins = &self.fins[..];
        stats
            .par_iter()
            .map(|s| {
                let y = s.top as usize;
                let k = y / strip_rows;
                let (strip, fin) = (strips.get(k)?, fins.get(k)?);
                if !(strip.y0..strip.y1).contains(&y) {
                    return None;
                }
                // The row's runs in order of x: the first of the component's is its start.
                strip
                    .row_runs(y)
                    .find(|&i| {
                        fin.get((strip.run_label[i] - strip.base) as usize) == Some(&s.label)
                    })
                    .map(|i| strip.edges[2 * i])
            })
            .collect()
    }
}
