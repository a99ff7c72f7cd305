//! Step 5: the shape sums of the components from the runs of the last labeling and their
//! final labels (`Lsl::shape_sums`), no label image.

use super::{per_strip, Lsl, Strip};
use crate::ccl::descriptors::{add_run, add_sums, run_pairs, RankedRow, ShapeSums};
use crate::ccl::stats::ComponentStats;
use crate::ccl::{Connectivity, Keep};
#[cfg(target_arch = "x86_64")]
use crate::frame::cpu::has_v3;
use crate::frame::image::PackedBinary;
use rayon::prelude::*;
use std::collections::HashMap;

impl Lsl {
    /// The shape sums (`descriptors::ShapeSums`) of the `stats` rows `keep` accepts, one row per
    /// accepted row, from the strips of the labeling that returned `stats`. Each strip, in
    /// parallel, takes its runs row by row: the moments in closed form, the pixel pairs with the
    /// row above as bits (`descriptors::run_pairs`, the model the GPU's
    /// fused pass follows); an unsure diagonal contact (4-connectivity) compares the final labels
    /// of the two runs. A strip sums the components it numbered in place, and the few that
    /// started in a strip above apart; those are added at the end. `labeled`: the labeling made
    /// the label image, so the final labels (`fins`) are there already. `packed`: the mask the
    /// labeling unpacked, whose rows are read as they are instead of rebuilt from the runs.
    pub(super) fn shape_sums(
        &mut self,
        width: u32,
        connectivity: Connectivity,
        stats: &[ComponentStats],
        keep: Keep<'_>,
        labeled: bool,
        packed: Option<&PackedBinary>,
    ) -> Vec<ShapeSums> {
        let (offsets, count) = self.final_labels_of_strips(width, labeled);
        let (strips, fins, offsets) = (&self.strips[..], &self.fins[..], &offsets[..]);
        let mut sums: Vec<ShapeSums> = (1..=count)
            .into_par_iter()
            .map(|label| ShapeSums {
                label,
                ..ShapeSums::default()
            })
            .collect();
        let chunks = per_strip(&mut sums, strips.iter().map(|s| s.roots as usize));
        let pass = ShapePass {
            strips,
            fins,
            offsets,
            width,
            eight: connectivity == Connectivity::Eight,
            packed,
        };
        let from_above: Vec<Vec<ShapeSums>> = chunks
            .into_par_iter()
            .enumerate()
            .map(|(k, own)| strips[k].shape_sums(k, pass, own))
            .collect();
        for part in from_above.iter().flatten() {
            add_sums(&mut sums[part.label as usize - 1], part);
        }
        // In place: no second table; with every row kept nothing moves.
        let mut rows = stats.iter();
        sums.retain(|_| rows.next().is_some_and(keep));
        sums
    }
}

/// What a strip's shape pass reads besides its own runs: every strip with its final labels and
/// its first component's number less one, the width, the connectivity and the packed mask if
/// there is one.
#[derive(Clone, Copy)]
struct ShapePass<'a> {
    strips: &'a [Strip],
    fins: &'a [Vec<u32>],
    offsets: &'a [u32],
    width: u32,
    eight: bool,
    packed: Option<&'a PackedBinary>,
}

impl Strip {
    /// The runs of row y (of this strip): their index range.
    pub(super) fn row_runs(&self, y: usize) -> std::ops::Range<usize> {
        let r = y - self.y0;
        self.row_off[r] as usize..self.row_off[r + 1] as usize
    }

    /// Row y (of this strip) as mask bits into `bits` (its words per row, any content).
    fn row_bits(&self, y: usize, bits: &mut [u32]) {
        bits.fill(0);
        for i in self.row_runs(y) {
            let (a, b) = (self.edges[2 * i] as usize, self.edges[2 * i + 1] as usize);
            let (wa, wb) = (a / 32, (b - 1) / 32);
            for (w, word) in bits.iter_mut().enumerate().take(wb + 1).skip(wa) {
                let lo = a.max(32 * w) - 32 * w;
                let hi = b.min(32 * w + 32) - 32 * w;
                let below_hi = if hi == 32 { u32::MAX } else { (1u32 << hi) - 1 };
                *word |= below_hi & !((1u32 << lo) - 1);
            }
        }
    }

    /// The final label of foreground pixel (x, y) of this strip (`fin`: its final labels).
    fn label_at(&self, fin: &[u32], x: u32, y: usize) -> u32 {
        // The last run starting at or before x (binary search over the row's runs).
        let (mut lo, mut hi) = (self.row_runs(y).start, self.row_runs(y).end);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.edges[2 * mid] <= x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        fin[(self.run_label[lo - 1] - self.base) as usize]
    }

    /// `Lsl::shape_sums` for strip k: its own components (`own`, one row each, from final label
    /// `offsets[k] + 1`) summed in place; the returned rows are the components that started in a
    /// strip above. Dispatched like `label`.
    fn shape_sums(&self, k: usize, pass: ShapePass<'_>, own: &mut [ShapeSums]) -> Vec<ShapeSums> {
        #[cfg(target_arch = "x86_64")]
        if has_v3() {
            // SAFETY: the CPU supports every feature `shape_sums_v3` is compiled for.
            return unsafe { shape_sums_v3(self, k, pass, own) };
        }
        self.shape_sums_impl(k, pass, own)
    }

    #[inline(always)]
    fn shape_sums_impl(
        &self,
        k: usize,
        pass: ShapePass<'_>,
        own: &mut [ShapeSums],
    ) -> Vec<ShapeSums> {
        let ShapePass {
            strips,
            fins,
            offsets,
            width,
            eight,
            packed,
        } = pass;
        let first_label = offsets[k];
        let mut from_above: Vec<ShapeSums> = Vec::new();
        let mut row_of: HashMap<u32, usize> = HashMap::new();
        // The last component from above and its row: runs of a large one come one after another.
        let mut last = (0u32, 0usize);
        // The row above rebuilt from the runs, when there is no packed mask to read it from.
        let words = (width as usize).div_ceil(32);
        let mut bits = if packed.is_some() {
            Vec::new()
        } else {
            vec![0u32; words]
        };
        let mut ranks = Vec::with_capacity(words);
        let fin = &fins[k];
        for y in self.y0..self.y1 {
            // The row above: in this strip, or the last row of the strip above.
            let above = match (y > self.y0, k > 0) {
                (true, _) => Some((self, fin, y - 1)),
                (false, true) => Some((&strips[k - 1], &fins[k - 1], y - 1)),
                (false, false) => None,
            };
            let row_above: &[u32] = match (above, packed) {
                (None, _) => &[],
                (Some((_, _, ya)), Some(p)) => {
                    &p.words[ya * p.words_per_row..ya * p.words_per_row + words]
                }
                (Some((strip, _, ya)), None) => {
                    strip.row_bits(ya, &mut bits);
                    &bits
                }
            };
            let up = above.map(|_| RankedRow::new(row_above, &mut ranks));
            for i in self.row_runs(y) {
                let (a0, a1) = (self.edges[2 * i], self.edges[2 * i + 1]);
                let l = fin[(self.run_label[i] - self.base) as usize];
                let pairs = run_pairs(up, width, a0, a1, |x| {
                    eight || above.is_some_and(|(s, f, ya)| s.label_at(f, x, ya) == l)
                });
                let e = if l > first_label {
                    &mut own[(l - first_label - 1) as usize]
                } else {
                    if last.0 != l {
                        let row = *row_of.entry(l).or_insert_with(|| {
                            from_above.push(ShapeSums {
                                label: l,
                                ..ShapeSums::default()
                            });
                            from_above.len() - 1
                        });
                        last = (l, row);
                    }
                    &mut from_above[last.1]
                };
                add_run(e, a0, a1, y as u32, pairs);
            }
        }
        from_above
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn shape_sums_v3(
    s: &Strip,
    k: usize,
    pass: ShapePass<'_>,
    own: &mut [ShapeSums],
) -> Vec<ShapeSums> {
    s.shape_sums_impl(k, pass, own)
}
