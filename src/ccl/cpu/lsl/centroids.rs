//! Step 6: the sub-pixel centroids' sums (`subpixel`) from the runs of the last labeling and
//! their final labels (`Lsl::weighted_sums`), no label image: each foreground pixel is read
//! once, from its run, where summing over the components' boxes wrote a label image first
//! and read it again with the grey frame.

use super::{per_strip, Lsl, Strip};
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::{no_weight, run_sums, GreyWeights, SubpixelCentroid};
use crate::ccl::Keep;
use crate::error::Result;
#[cfg(target_arch = "x86_64")]
use crate::frame::cpu::has_v3;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Σ w, Σ w·x, Σ w·y of one component.
pub(super) type Sums = [u64; 3];

/// Rows of the statistics turned into centroids per rayon job.
const ROWS_PER_JOB: usize = 4096;

impl Lsl {
    /// The sub-pixel centroids of the `stats` rows `keep` accepts, one row per accepted row,
    /// from the strips of the labeling that returned `stats` (every row of it) and the grey
    /// frame that was thresholded into its mask. Each strip, in parallel, sums its runs row by
    /// row: the components it numbered in place, the few that started in a strip above apart,
    /// added at the end. The sums are exact integers, the same as over the label image
    /// (`GreyWeights::centroids`). `labeled`: the labeling made the label image, so the final
    /// labels are there already.
    pub(super) fn weighted_sums(
        &mut self,
        weights: &GreyWeights<'_>,
        stats: &[ComponentStats],
        keep: Keep<'_>,
        labeled: bool,
    ) -> Result<Vec<SubpixelCentroid>> {
        let (offsets, count) = self.final_labels_of_strips(weights.grey.width, labeled);
        let (strips, fins, sums) = (&self.strips[..], &self.fins[..], &mut self.centroid_sums);
        // Reused: a fresh table faulted its pages in on every frame (99,000 components: 2.4 MB).
        // Each strip clears its own part: on one thread that took a dense frame 0.1-0.2 ms.
        sums.resize(count as usize, [0; 3]);
        let parts = per_strip(sums, strips.iter().map(|s| s.roots as usize));
        let from_above: Vec<Vec<(u32, Sums)>> = parts
            .into_par_iter()
            .enumerate()
            .map(|(k, own)| {
                own.fill([0; 3]);
                strips[k].weighted_sums(offsets[k], &fins[k], weights, own)
            })
            .collect();
        for (label, part) in from_above.iter().flatten() {
            let e = &mut sums[*label as usize - 1];
            for (e, p) in e.iter_mut().zip(part) {
                *e += p;
            }
        }
        // Every row converted, the rows `keep` refuses dropped after (in place, and only when
        // there are some), as `GreyWeights::centroids` keeps them. A kept row without weight
        // is noted on the way: a pass of its own over a dense frame's 99,000 centroids took
        // 0.1-0.4 ms on one thread.
        let (some_refused, some_missing) = (AtomicBool::new(false), AtomicBool::new(false));
        let mut out = Vec::new();
        stats
            .par_iter()
            .zip(&sums[..])
            .with_min_len(ROWS_PER_JOB)
            .map(|(s, &[w, wx, wy])| {
                if !keep(s) {
                    some_refused.store(true, Ordering::Relaxed);
                } else if w == 0 {
                    some_missing.store(true, Ordering::Relaxed);
                }
                SubpixelCentroid::from_sums(s.label, w, wx, wy)
            })
            .collect_into_vec(&mut out);
        if some_refused.into_inner() {
            let mut rows = stats.iter();
            out.retain(|_| rows.next().is_some_and(keep));
        }
        let missing = (some_missing.into_inner())
            .then(|| out.iter().find(|c| c.weight == 0))
            .flatten();
        match missing {
            Some(c) => Err(no_weight(c.label)),
            None => Ok(out),
        }
    }
}

impl Strip {
    /// `Lsl::weighted_sums` for one strip: its own components (`own`, one row each, from
    /// final label `first_label + 1`) summed in place; the returned sums are those of the
    /// components that started in a strip above. `fin`: its final labels. Dispatched like
    /// `label`.
    fn weighted_sums(
        &self,
        first_label: u32,
        fin: &[u32],
        weights: &GreyWeights<'_>,
        own: &mut [Sums],
    ) -> Vec<(u32, Sums)> {
        #[cfg(target_arch = "x86_64")]
        if has_v3() {
            // SAFETY: the CPU supports every feature `weighted_sums_v3` is compiled for.
            return unsafe { weighted_sums_v3(self, first_label, fin, weights, own) };
        }
        self.weighted_sums_impl(first_label, fin, weights, own)
    }

    #[inline(always)]
    fn weighted_sums_impl(
        &self,
        first_label: u32,
        fin: &[u32],
        weights: &GreyWeights<'_>,
        own: &mut [Sums],
    ) -> Vec<(u32, Sums)> {
        let w = weights.grey.width as usize;
        let mut from_above: Vec<(u32, Sums)> = Vec::new();
        let mut row_of: HashMap<u32, usize> = HashMap::new();
        // The last component from above and its row: runs of a large one come one after another.
        let mut last = (0u32, 0usize);
        for y in self.y0..self.y1 {
            let row = y * w;
            for i in self.row_runs(y) {
                let (a0, a1) = (self.edges[2 * i] as usize, self.edges[2 * i + 1] as usize);
                let l = fin[(self.run_label[i] - self.base) as usize];
                let g = &weights.grey.data[row + a0..row + a1];
                let (sw, swx) = run_sums(g, a0, row + a0, weights.levels, weights.invert);
                let e = if l > first_label {
                    &mut own[(l - first_label - 1) as usize]
                } else {
                    if last.0 != l {
                        let at = *row_of.entry(l).or_insert_with(|| {
                            from_above.push((l, [0; 3]));
                            from_above.len() - 1
                        });
                        last = (l, at);
                    }
                    &mut from_above[last.1].1
                };
                e[0] += sw;
                e[1] += swx;
                e[2] += sw * y as u64;
            }
        }
        from_above
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn weighted_sums_v3(
    s: &Strip,
    first_label: u32,
    fin: &[u32],
    weights: &GreyWeights<'_>,
    own: &mut [Sums],
) -> Vec<(u32, Sums)> {
    s.weighted_sums_impl(first_label, fin, weights, own)
}
