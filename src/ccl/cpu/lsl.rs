//! `lsl`: run-based connected-component labeling and analysis on the CPU (Light Speed Labeling
//! family, with FLSL's "compress-store" segment detection), multithreaded over horizontal strips.
//!
//! Steps (one image; each is one entry of `Labeling::timings`):
//! 1. **Runs + strip labeling** (parallel, one task per strip). Each row is turned into 64-bit
//!    foreground masks (SIMD compare + movemask); the edges of each mask (pixel ≠ left
//!    neighbour) are compress-stored with `trailing_zeros`, so the edge list of a row *is* its
//!    run list (`[edge 2i, edge 2i+1)`). The runs of the row above that a run touches
//!    (4-connectivity: x overlap; 8-connectivity: also a diagonal touch) are found without a
//!    sweep, from prefix popcounts of the row above's edge masks (LSL's "edge rank"). A run gets
//!    the root of the first run it touches, or a new provisional label; further touched roots
//!    are united with min-linking (the smaller label, i.e. the one created first in raster
//!    order, stays root). Features are accumulated per run, never per pixel, into the current
//!    root (area, Σx in closed form, Σy, bounding box); when two roots are united the features
//!    of the higher one are merged into the lower one (the on-the-fly merge of the FLSL+OTF
//!    paper, without atomics: a strip belongs to one thread). At the end every label points at
//!    its strip root.
//! 2. **Border merge** (sequential, one row sweep per border): the last row of each strip is
//!    swept against the first row of the next; roots are united with min-linking over global
//!    label ids (path halving) and features are merged into the surviving root.
//! 3. **Numbering** (parallel): roots are counted per strip; a prefix sum over strips gives each
//!    root its final number. Labels are created in raster order of the run that creates them and
//!    min-linking keeps the first-created label of a component as its root, so numbering roots in
//!    label order numbers components 1..N in raster order of their first pixel, like OpenCV's
//!    `connectedComponentsWithStats` and the BFS oracle.
//! 4. **Label image / stats** (parallel): the final label of every provisional label, then each
//!    row is written segment by segment (`Want::Labels`/`Both`); the statistics table is written
//!    from the roots' features (`Want::Stats`/`Both`). `Want::Labels` also skips the features
//!    in step 1.
//! 5. **Shape descriptors** (`label_shapes`, parallel): from the runs and the final labels, no
//!    label image (`Lsl::shape_sums`).
//!
//! Label ids are global: strip `k` owns ids `k · strip_rows · ceil(w/2) + (0..its label count)`
//! (a row holds at most ceil(w/2) runs), so a strip knows its ids before the others finish and
//! the owner strip of an id is one division away.
//!
//! Buffers live in the struct and are reused between calls (they keep the size of the largest
//! image seen); only the returned label image and statistics table are allocated per call.

use crate::ccl::descriptors::{add_run, add_sums, run_pairs, RankedRow, ShapeSums};
use crate::ccl::stats::{ComponentStats, Moments};
use crate::ccl::subpixel::GreyWeights;
use crate::ccl::{
    label_shapes_on_host, Connectivity, Keep, Labeler, Labeling, Mask, ShapeLabeling, StepTime,
    Want,
};
use crate::error::Result;
use crate::frame::image::{check_size, BinaryImage, LabelImage, PackedBinary};
use rayon::prelude::*;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::time::Instant;

/// The run-based CPU labeler.
pub struct Lsl {
    /// Rows per strip; `None` picks from the thread count and the image height.
    strip_rows: Option<usize>,
    strips: Vec<Strip>,
    /// Final label of each provisional label, per strip (apart from `strips` so that a strip can
    /// write its own while reading the others).
    fins: Vec<Vec<u32>>,
    /// Roots demoted by the border merge.
    demoted: Vec<u32>,
}

/// One horizontal strip: its runs, provisional labels, union-find and features.
#[derive(Default)]
struct Strip {
    y0: usize,
    y1: usize,
    /// Global id of this strip's first label.
    base: u32,
    /// Edges of every row, concatenated: run `i` is `[edges[2i], edges[2i + 1])`.
    edges: Vec<u32>,
    /// Run index of the first run of each row; `rows + 1` entries.
    row_off: Vec<u32>,
    /// Provisional label (global id) of each run: the root when the run was labeled.
    run_label: Vec<u32>,
    /// Union-find parent of each label (global ids), indexed by `id - base`.
    parent: Vec<u32>,
    /// Features of each label; complete for roots only.
    moments: Vec<Moments>,
    /// Number of each root among the strip's roots (0-based), valid for roots only.
    num: Vec<u32>,
    /// How many of this strip's labels are roots after the border merge.
    roots: u32,
    /// Edge masks of the row above and of the current row (one bit per pixel: pixel differs
    /// from its left neighbour), and the number of edges of the row before each 64-bit word.
    em: [Vec<u64>; 2],
    pc: [Vec<u32>; 2],
}

impl Default for Lsl {
    fn default() -> Self {
        Self::new()
    }
}

impl Lsl {
    pub fn new() -> Self {
        Self {
            strip_rows: None,
            strips: Vec::new(),
            fins: Vec::new(),
            demoted: Vec::new(),
        }
    }

    /// Fixed strip height (at least 1 row). Small values force many strip borders; tests use
    /// this to exercise the border merge on small images.
    pub fn with_strip_rows(rows: usize) -> Self {
        Self {
            strip_rows: Some(rows.max(1)),
            ..Self::new()
        }
    }

    fn pick_strip_rows(&self, height: usize) -> usize {
        if let Some(r) = self.strip_rows {
            return r.clamp(1, height);
        }
        let threads = rayon::current_num_threads().max(1);
        // A few strips per thread balances uneven strips; each border costs one extra row sweep.
        let strips = if height < 64 { 1 } else { threads * 4 };
        height.div_ceil(strips).max(16).min(height)
    }
}

impl Labeler for Lsl {
    fn name(&self) -> &'static str {
        "lsl"
    }

    fn label(
        &mut self,
        image: &BinaryImage,
        connectivity: Connectivity,
        want: Want,
    ) -> Result<Labeling> {
        self.label_bytes(
            &image.data,
            image.width,
            image.height,
            connectivity,
            want,
            None,
        )
    }

    /// The shape sums come from the runs the labeling keeps (`Lsl::shape_sums`: no label image,
    /// no second pass over the pixels); with sub-pixel weights, the default path.
    fn label_shapes(
        &mut self,
        mask: Mask<'_>,
        connectivity: Connectivity,
        want: Want,
        weights: Option<&GreyWeights<'_>>,
        keep: Keep<'_>,
    ) -> Result<ShapeLabeling> {
        if weights.is_some() {
            return label_shapes_on_host(self, mask, connectivity, want, weights, keep);
        }
        let unpacked;
        let (image, packed) = match mask {
            Mask::Bytes(image) => (image, None),
            Mask::Packed(packed) => {
                unpacked = packed.unpack();
                (&unpacked, Some(packed))
            }
        };
        let with = if want.labels() {
            Want::Both
        } else {
            Want::Stats
        };
        let mut labeling = self.label_bytes(
            &image.data,
            image.width,
            image.height,
            connectivity,
            with,
            None,
        )?;
        let t = Instant::now();
        let stats = labeling.stats.as_deref().unwrap_or_default();
        let sums = rayon::scope(|_| {
            self.shape_sums(
                image.width,
                connectivity,
                stats,
                keep,
                want.labels(),
                packed,
            )
        });
        labeling
            .timings
            .push(StepTime::new("shape descriptors", ms(t)));
        Ok((labeling, None, sums))
    }
}

impl Lsl {
    /// `Labeler::label` on a mask borrowed from elsewhere (a numpy array's memory): `height`
    /// rows of `width` bytes back to back, any non-zero byte foreground. With `Want::Labels` or
    /// `Want::Both` and `labels_out` given (`width × height` values), the label image is
    /// written there, every value of it, and the result holds none; without `labels_out` it
    /// is a new buffer, as with `label`.
    pub fn label_bytes(
        &mut self,
        data: &[u8],
        width: u32,
        height: u32,
        connectivity: Connectivity,
        want: Want,
        mut labels_out: Option<&mut [MaybeUninit<u32>]>,
    ) -> Result<Labeling> {
        // All four steps run inside the thread pool: from a thread outside it (the caller's),
        // each parallel step would otherwise be handed over and waited for on its own (tens of
        // µs a frame on a loaded machine).
        rayon::scope(|_| {
            check_size(width, height)?;
            let (w, h) = (width as usize, height as usize);
            if data.len() != w * h {
                return Err(crate::Error::InvalidSize {
                    width,
                    height,
                    why: format!("buffer holds {} pixels, expected {}", data.len(), w * h),
                });
            }
            if let Some(out) = labels_out.as_deref() {
                if out.len() != w * h {
                    return Err(crate::Error::InvalidSize {
                        width,
                        height,
                        why: format!(
                            "the label buffer holds {} values, expected {}",
                            out.len(),
                            w * h
                        ),
                    });
                }
            }
            let mut timings = Vec::with_capacity(4);

            // --- 1. runs + strip labeling --------------------------------------------------------
            let t = Instant::now();
            let strip_rows = self.pick_strip_rows(h);
            let nstrips = h.div_ceil(strip_rows);
            let half_w = w.div_ceil(2) as u64;
            // Ids of strip k start at k * stride; ids stay below h * ceil(w/2) <= w * h < u32::MAX.
            let stride = (strip_rows as u64 * half_w) as u32;
            self.strips.resize_with(nstrips, Strip::default);
            self.fins.resize_with(nstrips, Vec::new);
            for (k, s) in self.strips.iter_mut().enumerate() {
                s.y0 = k * strip_rows;
                s.y1 = ((k + 1) * strip_rows).min(h);
                s.base = (k as u64 * stride as u64) as u32;
            }
            let stats_wanted = want.stats();
            self.strips
                .par_iter_mut()
                .for_each(|s| s.label(data, w, connectivity, stats_wanted));
            timings.push(StepTime::new("runs+strip labeling", ms(t)));

            // --- 2. border merge -----------------------------------------------------------------
            let t = Instant::now();
            let d = match connectivity {
                Connectivity::Four => 0,
                Connectivity::Eight => 1,
            };
            self.merge_borders(stride, d, stats_wanted);
            timings.push(StepTime::new("border merge", ms(t)));

            // --- 3. numbering --------------------------------------------------------------------
            let t = Instant::now();
            self.strips.par_iter_mut().for_each(|s| s.number_roots());
            let mut offsets = Vec::with_capacity(nstrips);
            let mut count = 0u32;
            for s in &self.strips {
                offsets.push(count);
                count += s.roots;
            }
            timings.push(StepTime::new("numbering", ms(t)));

            // --- 4. label image / stats ----------------------------------------------------------
            let t = Instant::now();
            let mut labels: Vec<u32> = Vec::new();
            let mut stats_out: Vec<ComponentStats> = Vec::new();
            {
                let mut label_chunks: Vec<&mut [MaybeUninit<u32>]> = Vec::new();
                if want.labels() {
                    let mut rest = match labels_out.as_deref_mut() {
                        Some(out) => out,
                        None => {
                            labels.reserve_exact(w * h);
                            advise_huge_pages(labels.spare_capacity_mut());
                            &mut labels.spare_capacity_mut()[..w * h]
                        }
                    };
                    for s in &self.strips {
                        let (a, b) = rest.split_at_mut((s.y1 - s.y0) * w);
                        label_chunks.push(a);
                        rest = b;
                    }
                }
                let mut stat_chunks: Vec<&mut [MaybeUninit<ComponentStats>]> = Vec::new();
                if stats_wanted {
                    stats_out.reserve_exact(count as usize);
                    advise_huge_pages(stats_out.spare_capacity_mut());
                    let mut rest = &mut stats_out.spare_capacity_mut()[..count as usize];
                    for s in &self.strips {
                        let (a, b) = rest.split_at_mut(s.roots as usize);
                        stat_chunks.push(a);
                        rest = b;
                    }
                }
                let strips = &self.strips[..];
                let offsets = &offsets[..];
                let mut label_iter = label_chunks.into_iter();
                let mut stat_iter = stat_chunks.into_iter();
                let jobs: Vec<_> = self
                    .fins
                    .iter_mut()
                    .enumerate()
                    .map(|(k, fin)| (k, fin, label_iter.next(), stat_iter.next()))
                    .collect();
                jobs.into_par_iter().for_each(|(k, fin, lab, st)| {
                    let s = &strips[k];
                    if let Some(st) = st {
                        s.write_stats(offsets[k], st);
                    }
                    if let Some(lab) = lab {
                        s.final_labels(k, strips, offsets, stride, fin);
                        s.write_labels(w, fin, lab);
                    }
                });
            }
            let own_labels = want.labels() && labels_out.is_none();
            if own_labels {
                // SAFETY: every strip wrote every pixel of its rows, and the strips cover all rows.
                unsafe { labels.set_len(w * h) };
            }
            if stats_wanted {
                // SAFETY: every strip wrote one row per root and the chunks cover all `count` rows.
                unsafe { stats_out.set_len(count as usize) };
            }
            timings.push(StepTime::new(
                match want {
                    Want::Labels => "label image",
                    Want::Stats => "stats",
                    Want::Both => "label image+stats",
                },
                ms(t),
            ));

            Ok(Labeling {
                count,
                labels: own_labels.then_some(LabelImage {
                    width,
                    height,
                    data: labels,
                }),
                stats: stats_wanted.then_some(stats_out),
                timings,
                filtered: None,
            })
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Shape sums from the runs of the last labeling.

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
    fn shape_sums(
        &mut self,
        width: u32,
        connectivity: Connectivity,
        stats: &[ComponentStats],
        keep: Keep<'_>,
        labeled: bool,
        packed: Option<&PackedBinary>,
    ) -> Vec<ShapeSums> {
        let Some(first_strip) = self.strips.first() else {
            return Vec::new();
        };
        let stride = ((first_strip.y1 - first_strip.y0) as u64 * width.div_ceil(2) as u64) as u32;
        let mut offsets = Vec::with_capacity(self.strips.len());
        let mut count = 0u32;
        for s in &self.strips {
            offsets.push(count);
            count += s.roots;
        }
        let strips = &self.strips[..];
        let offsets = &offsets[..];
        if !labeled {
            self.fins
                .par_iter_mut()
                .enumerate()
                .for_each(|(k, fin)| strips[k].final_labels(k, strips, offsets, stride, fin));
        }
        let fins = &self.fins[..];
        let mut sums: Vec<ShapeSums> = (1..=count)
            .into_par_iter()
            .map(|label| ShapeSums {
                label,
                ..ShapeSums::default()
            })
            .collect();
        let mut chunks = Vec::with_capacity(strips.len());
        let mut rest = &mut sums[..];
        for s in strips {
            let (a, b) = rest.split_at_mut(s.roots as usize);
            chunks.push(a);
            rest = b;
        }
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
    fn row_runs(&self, y: usize) -> std::ops::Range<usize> {
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

/// Asks Linux for transparent huge pages on a large fresh output buffer (a 256 MB label image is
/// 65536 page faults with 4 KiB pages, 128 with 2 MiB ones); numpy does the same for its arrays.
/// Only a hint: failures are ignored, and other systems do nothing.
fn advise_huge_pages<T>(buf: &mut [MaybeUninit<T>]) {
    #[cfg(target_os = "linux")]
    {
        const MIN: usize = 8 << 20;
        const PAGE: usize = 4096;
        let bytes = std::mem::size_of_val(buf);
        if bytes >= MIN {
            let start = (buf.as_mut_ptr() as usize).next_multiple_of(PAGE);
            let end = (buf.as_mut_ptr() as usize + bytes) / PAGE * PAGE;
            // SAFETY: [start, end) lies inside `buf`, which we own; MADV_HUGEPAGE changes no
            // contents, only how the kernel backs the pages.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl Lsl {
    /// Unites the components touching across each strip border (sequential; one row sweep per
    /// border), then points every demoted root straight at its final root.
    fn merge_borders(&mut self, stride: u32, d: u32, stats: bool) {
        self.demoted.clear();
        let strips = &mut self.strips[..];
        for k in 1..strips.len() {
            let (top, bot) = (&strips[k - 1], &strips[k]);
            let rows_top = top.y1 - top.y0;
            let (p_lo, p_hi) = (
                top.row_off[rows_top - 1] as usize,
                top.row_off[rows_top] as usize,
            );
            let (c_lo, c_hi) = (0usize, bot.row_off[1] as usize);
            if p_lo == p_hi || c_lo == c_hi {
                continue;
            }
            let mut j = p_lo;
            for i in c_lo..c_hi {
                let (s, e) = {
                    let b = &strips[k];
                    (b.edges[2 * i], b.edges[2 * i + 1])
                };
                let top = &strips[k - 1];
                while j < p_hi && top.edges[2 * j + 1] + d <= s {
                    j += 1;
                }
                let mut q = j;
                let mut cur = global_find(strips, stride, strips[k].run_label[i]);
                while q < p_hi && strips[k - 1].edges[2 * q] < e + d {
                    let r = global_find(strips, stride, strips[k - 1].run_label[q]);
                    if r != cur {
                        let (lo, hi) = if r < cur { (r, cur) } else { (cur, r) };
                        let hk = (hi / stride) as usize;
                        let lk = (lo / stride) as usize;
                        let hs = &mut strips[hk];
                        let hidx = (hi - hs.base) as usize;
                        hs.parent[hidx] = lo;
                        if stats {
                            let m = hs.moments[hidx];
                            let ls = &mut strips[lk];
                            let lidx = (lo - ls.base) as usize;
                            ls.moments[lidx].merge(&m);
                        }
                        self.demoted.push(hi);
                        cur = lo;
                    }
                    q += 1;
                }
                if q > j {
                    j = q - 1;
                }
            }
        }
        for &dm in &self.demoted {
            let root = global_find(strips, stride, dm);
            let k = (dm / stride) as usize;
            let s = &mut strips[k];
            s.parent[(dm - s.base) as usize] = root;
        }
    }
}

/// Root of a global label id, following parents across strips (with path halving, so that
/// chains built by many border unions stay short).
fn global_find(strips: &mut [Strip], stride: u32, mut x: u32) -> u32 {
    loop {
        let s = &strips[(x / stride) as usize];
        let p = s.parent[(x - s.base) as usize];
        if p == x {
            return x;
        }
        let ps = &strips[(p / stride) as usize];
        let gp = ps.parent[(p - ps.base) as usize];
        let s = &mut strips[(x / stride) as usize];
        let i = (x - s.base) as usize;
        s.parent[i] = gp;
        x = gp;
    }
}

impl Strip {
    /// Step 1 for one strip, dispatched to a build for the CPU's instruction set (popcnt, BMI,
    /// AVX2 when the CPU has them; the x86-64 baseline otherwise).
    fn label(&mut self, data: &[u8], w: usize, conn: Connectivity, stats: bool) {
        #[cfg(target_arch = "x86_64")]
        if has_v3() {
            // SAFETY: the CPU supports every feature `label_v3` is compiled for (checked above).
            unsafe {
                match (conn, stats) {
                    (Connectivity::Four, true) => label_v3::<0, true>(self, data, w),
                    (Connectivity::Four, false) => label_v3::<0, false>(self, data, w),
                    (Connectivity::Eight, true) => label_v3::<1, true>(self, data, w),
                    (Connectivity::Eight, false) => label_v3::<1, false>(self, data, w),
                }
            }
            return;
        }
        match (conn, stats) {
            (Connectivity::Four, true) => self.label_impl::<0, true>(data, w),
            (Connectivity::Four, false) => self.label_impl::<0, false>(data, w),
            (Connectivity::Eight, true) => self.label_impl::<1, true>(data, w),
            (Connectivity::Eight, false) => self.label_impl::<1, false>(data, w),
        }
    }

    /// Step 1: runs, provisional labels, union-find and features of one strip. `D` is 0 for
    /// 4-connectivity and 1 for 8-connectivity: a run [s, e) touches the runs of the row above
    /// that have a pixel in [s - D, e - 1 + D].
    ///
    /// Those runs are found without a sweep: with `er(x)` the number of edges of the row above at
    /// positions ≤ x (its "edge rank", a prefix popcount over the row's 64-bit edge masks), the
    /// touched runs are `er(s - D) / 2 .. (er(e - 1 + D) + 1) / 2`.
    #[inline(always)]
    fn label_impl<const D: u32, const STATS: bool>(&mut self, data: &[u8], w: usize) {
        self.edges.clear();
        self.row_off.clear();
        self.run_label.clear();
        self.parent.clear();
        self.moments.clear();
        self.row_off.push(0);
        let nw = w.div_ceil(64);
        // Edge masks and edge counts before each word, of the row above and of this row. The row
        // above the strip's first row is empty.
        let [em_prev, em_cur] = &mut self.em;
        let [pc_prev, pc_cur] = &mut self.pc;
        em_prev.clear();
        em_prev.resize(nw, 0);
        pc_prev.clear();
        pc_prev.resize(nw, 0);
        em_cur.clear();
        em_cur.resize(nw, 0);
        pc_cur.clear();
        pc_cur.resize(nw, 0);
        let base = self.base;
        let last = w as u32 - 1;
        let mut prev_lo = 0usize;
        for y in self.y0..self.y1 {
            let row = &data[y * w..(y + 1) * w];
            let cur_lo = self.edges.len() / 2;
            extract_runs(row, &mut self.edges, em_cur, pc_cur);
            let cur_hi = self.edges.len() / 2;
            let n_cur = cur_hi - cur_lo;
            self.run_label.reserve(n_cur);
            self.parent.reserve(n_cur);
            if STATS {
                self.moments.reserve(n_cur);
            }
            // SAFETY: see `label_row`; the three vectors have room for `n_cur` more entries,
            // `run_label` holds one label per run before this row, and the edge masks and counts
            // describe the row above (`prev_lo..cur_lo`).
            unsafe {
                let nlab = label_row::<D, STATS>(
                    RowCtx {
                        edges: self.edges.as_ptr(),
                        run_label: self.run_label.as_mut_ptr(),
                        parent: self.parent.as_mut_ptr(),
                        moments: self.moments.as_mut_ptr(),
                        em: em_prev.as_ptr(),
                        pc: pc_prev.as_ptr(),
                        base,
                        y: y as u32,
                        last,
                    },
                    prev_lo,
                    cur_lo,
                    cur_hi,
                    self.parent.len(),
                );
                self.run_label.set_len(cur_hi);
                self.parent.set_len(nlab);
                if STATS {
                    self.moments.set_len(nlab);
                }
            }
            self.row_off.push(cur_hi as u32);
            prev_lo = cur_lo;
            std::mem::swap(em_prev, em_cur);
            std::mem::swap(pc_prev, pc_cur);
        }
        // Point every label at its strip root (parents are smaller, hence already flattened).
        for l in 0..self.parent.len() {
            let p = self.parent[l];
            if p != base + l as u32 {
                self.parent[l] = self.parent[(p - base) as usize];
            }
        }
    }

    /// Step 3: numbers the roots (labels that are still their own parent) in label order.
    fn number_roots(&mut self) {
        let base = self.base;
        self.num.clear();
        self.num.reserve(self.parent.len());
        let mut n = 0u32;
        for (l, &p) in self.parent.iter().enumerate() {
            self.num.push(n);
            n += (p == base + l as u32) as u32;
        }
        self.roots = n;
    }

    /// Step 4: the statistics rows of this strip's roots (`out` has exactly `roots` entries).
    fn write_stats(&self, offset: u32, out: &mut [MaybeUninit<ComponentStats>]) {
        let base = self.base;
        let mut n = 0usize;
        for (l, &p) in self.parent.iter().enumerate() {
            if p == base + l as u32 {
                out[n].write(self.moments[l].to_stats(offset + n as u32 + 1));
                n += 1;
            }
        }
    }

    /// Step 4: final label of each of this strip's provisional labels.
    fn final_labels(
        &self,
        k: usize,
        strips: &[Strip],
        offsets: &[u32],
        stride: u32,
        fin: &mut Vec<u32>,
    ) {
        let base = self.base;
        let off = offsets[k] + 1;
        fin.clear();
        fin.reserve(self.parent.len());
        for (l, &p) in self.parent.iter().enumerate() {
            let f = if p == base + l as u32 {
                off + self.num[l]
            } else if p >= base {
                // A smaller label of this strip: already done.
                fin[(p - base) as usize]
            } else {
                // Linked by the border merge to a label of an earlier strip (rare): follow the
                // chain to the root.
                let mut r = p;
                loop {
                    let o = &strips[(r / stride) as usize];
                    let q = o.parent[(r - o.base) as usize];
                    if q == r {
                        break;
                    }
                    r = q;
                }
                let ok = (r / stride) as usize;
                let o = &strips[ok];
                offsets[ok] + 1 + o.num[(r - o.base) as usize]
            };
            fin.push(f);
        }
    }

    /// Step 4: writes this strip's rows of the label image (every pixel), dispatched like `label`.
    fn write_labels(&self, w: usize, fin: &[u32], out: &mut [MaybeUninit<u32>]) {
        #[cfg(target_arch = "x86_64")]
        if has_v3() {
            // SAFETY: the CPU supports every feature `write_labels_v3` is compiled for.
            unsafe { write_labels_v3(self, w, fin, out) };
            return;
        }
        self.write_labels_impl(w, fin, out)
    }

    /// Each row is a sequence of segments (gap, run, gap, run, …, gap) that start at the row's
    /// edges. Segments are written left to right in blocks of 8 that may run past the segment's
    /// end: the next segment starts exactly there and overwrites the excess. Blocks never cross
    /// the row's end (the last segment and segments ending within 7 pixels of it are exact), so
    /// strips never write into each other's rows.
    #[inline(always)]
    fn write_labels_impl(&self, w: usize, fin: &[u32], out: &mut [MaybeUninit<u32>]) {
        let base = self.base;
        // An opaque zero: with a literal 0, LLVM turns the short gap writes into memset calls.
        let zero = std::hint::black_box(0u32);
        for (r, row) in out.chunks_exact_mut(w).enumerate() {
            let (lo, hi) = (self.row_off[r] as usize, self.row_off[r + 1] as usize);
            let mut x = 0usize;
            for i in lo..hi {
                let s = self.edges[2 * i] as usize;
                let e = self.edges[2 * i + 1] as usize;
                let f = fin[(self.run_label[i] - base) as usize];
                put_segment(row, x, s, zero);
                put_segment(row, s, e, f);
                x = e;
            }
            fill(&mut row[x..], 0);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn label_v3<const D: u32, const STATS: bool>(s: &mut Strip, data: &[u8], w: usize) {
    s.label_impl::<D, STATS>(data, w)
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn write_labels_v3(s: &Strip, w: usize, fin: &[u32], out: &mut [MaybeUninit<u32>]) {
    s.write_labels_impl(w, fin, out)
}

/// Whether the CPU has the x86-64-v3 features the fast builds use (detected once).
#[cfg(target_arch = "x86_64")]
fn has_v3() -> bool {
    use std::sync::OnceLock;
    static V3: OnceLock<bool> = OnceLock::new();
    *V3.get_or_init(|| {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("bmi1")
            && is_x86_feature_detected!("bmi2")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("lzcnt")
    })
}

/// Writes `v` over `row[a..b]`, possibly also over up to 7 pixels after `b` (see
/// `write_labels_impl`); exact when `b` is within 7 pixels of the row's end.
#[inline(always)]
fn put_segment(row: &mut [MaybeUninit<u32>], a: usize, b: usize, v: u32) {
    if b + 7 <= row.len() {
        let mut q = a;
        while q < b {
            // In bounds: q < b and b + 7 <= len, so q + 8 <= len.
            let block: &mut [MaybeUninit<u32>; 8] = (&mut row[q..q + 8]).try_into().expect("8");
            *block = [MaybeUninit::new(v); 8];
            q += 8;
        }
    } else {
        fill(&mut row[a..b], v);
    }
}

#[inline(always)]
fn fill(s: &mut [MaybeUninit<u32>], v: u32) {
    for p in s {
        p.write(v);
    }
}

#[inline(always)]
fn run_moments(y: u32, s: u32, e: u32) -> Moments {
    let n = (e - s) as u64;
    Moments {
        area: n,
        sum_x: (n * (s as u64 + e as u64 - 1)) >> 1,
        sum_y: n * y as u64,
        min_x: s,
        min_y: y,
        max_x: e - 1,
        max_y: y,
    }
}

/// Raw views of a strip's buffers for `label_row` (no bounds checks, no reloads through `self`).
struct RowCtx {
    edges: *const u32,
    run_label: *mut u32,
    parent: *mut u32,
    moments: *mut Moments,
    em: *const u64,
    pc: *const u32,
    base: u32,
    y: u32,
    last: u32,
}

/// Labels the runs `cur_lo..cur_hi` of one row against the runs `prev_lo..cur_lo` of the row
/// above (see `Strip::label_impl`); `nlab` labels exist before the row; returns the new count.
///
/// # Safety
/// `edges` holds the edges of runs `..cur_hi`; `run_label` holds the labels of runs `..cur_lo`
/// and has room up to `cur_hi`; `parent` (and `moments` when `STATS`) hold `nlab` labels and
/// have room for `cur_hi - cur_lo` more; `em`/`pc` are the edge masks and prefix counts of the
/// row above (the row runs `prev_lo..cur_lo`), covering pixels `0..=last`. Then every index
/// below is in bounds: an edge rank of the row above is at most its edge count, so the touched
/// runs `a..b` lie in `prev_lo..cur_lo`; every stored label is `base + (0..nlab)`.
#[inline(always)]
unsafe fn label_row<const D: u32, const STATS: bool>(
    c: RowCtx,
    prev_lo: usize,
    cur_lo: usize,
    cur_hi: usize,
    mut nlab: usize,
) -> usize {
    let RowCtx {
        edges,
        run_label,
        parent,
        moments,
        em,
        pc,
        base,
        y,
        last,
    } = c;
    // Edges of the row above at positions <= x.
    let er = |x: u32| -> u32 {
        let wi = (x >> 6) as usize;
        *pc.add(wi) + (*em.add(wi) & (!0u64 >> (63 - (x & 63)))).count_ones()
    };
    let find = |mut x: u32| -> u32 {
        loop {
            let p = *parent.add((x - base) as usize);
            if p == x {
                return x;
            }
            let gp = *parent.add((p - base) as usize);
            *parent.add((x - base) as usize) = gp;
            x = gp;
        }
    };
    for i in cur_lo..cur_hi {
        let s = *edges.add(2 * i);
        let e = *edges.add(2 * i + 1);
        let xa = if D == 1 { s.saturating_sub(1) } else { s };
        let xb = if D == 1 { e.min(last) } else { e - 1 };
        let a = prev_lo + (er(xa) >> 1) as usize;
        let b = prev_lo + ((er(xb) + 1) >> 1) as usize;
        debug_assert!(a <= b && b <= cur_lo);
        let lab = if a < b {
            let mut lab = find(*run_label.add(a));
            for k in a + 1..b {
                let r = find(*run_label.add(k));
                if r != lab {
                    let (lo, hi) = if r < lab { (r, lab) } else { (lab, r) };
                    *parent.add((hi - base) as usize) = lo;
                    if STATS {
                        let m = *moments.add((hi - base) as usize);
                        (*moments.add((lo - base) as usize)).merge(&m);
                    }
                    lab = lo;
                }
            }
            if STATS {
                let m = &mut *moments.add((lab - base) as usize);
                let n = (e - s) as u64;
                m.area += n;
                m.sum_x += (n * (s as u64 + e as u64 - 1)) >> 1;
                m.sum_y += n * y as u64;
                m.min_x = m.min_x.min(s);
                m.max_x = m.max_x.max(e - 1);
                // Rows are labeled top to bottom: this run's row is the lowest so far.
                m.max_y = y;
            }
            lab
        } else {
            let lab = base + nlab as u32;
            *parent.add(nlab) = lab;
            if STATS {
                moments.add(nlab).write(run_moments(y, s, e));
            }
            nlab += 1;
            lab
        };
        *run_label.add(i) = lab;
    }
    nlab
}

/// Appends the edges of one row (positions where a pixel differs from its left neighbour, the
/// pixel left of the row being background) to `out`; an odd count is closed with `row.len()`.
/// The appended list is the row's run list: run i = [edge 2i, edge 2i + 1). Also stores the
/// row's edge mask of each 64-pixel word in `em` and the number of edges before it in `pc`.
#[inline(always)]
fn extract_runs(row: &[u8], out: &mut Vec<u32>, em: &mut [u64], pc: &mut [u32]) {
    let w = row.len();
    // At most w + 1 edges per row.
    out.reserve(w + 1);
    let start = out.len();
    let spare = &mut out.spare_capacity_mut()[..w + 1];
    let mut n = 0usize;
    let mut carry = 0u64;
    let mut x0 = 0u32;
    let mut chunks = row.chunks_exact(64);
    let mut wi = 0usize;
    for c in &mut chunks {
        let m = mask64(c.try_into().expect("64 bytes"));
        let mut e = m ^ ((m << 1) | carry);
        carry = m >> 63;
        em[wi] = e;
        pc[wi] = n as u32;
        wi += 1;
        while e != 0 {
            // n < w + 1: every edge is a distinct position in 0..=w.
            spare[n].write(x0 + e.trailing_zeros());
            n += 1;
            e &= e - 1;
        }
        x0 += 64;
    }
    let rem = chunks.remainder();
    if !rem.is_empty() {
        let mut m = 0u64;
        for (i, &b) in rem.iter().enumerate() {
            m |= ((b != 0) as u64) << i;
        }
        // Bits past the row are 0, so a run reaching the end gets its closing edge here.
        let mut e = m ^ ((m << 1) | carry);
        em[wi] = e;
        pc[wi] = n as u32;
        while e != 0 {
            spare[n].write(x0 + e.trailing_zeros());
            n += 1;
            e &= e - 1;
        }
    } else if n & 1 == 1 {
        spare[n].write(w as u32);
        n += 1;
    }
    debug_assert!(n % 2 == 0);
    // SAFETY: the first n spare slots were written above.
    unsafe { out.set_len(start + n) };
}

/// Bit i set when byte i is non-zero.
#[inline(always)]
fn mask64(c: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the loads read 4 × 16 bytes of `c`.
        unsafe {
            let z = _mm_setzero_si128();
            let p = c.as_ptr() as *const __m128i;
            let a = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p), z)) as u32 as u64;
            let b = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(1)), z)) as u32 as u64;
            let cc = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(2)), z)) as u32 as u64;
            let d = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(3)), z)) as u32 as u64;
            !(a | (b << 16) | (cc << 32) | (d << 48))
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u64;
        for (i, &b) in c.iter().enumerate() {
            m |= ((b != 0) as u64) << i;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs_of(row: &[u8]) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        let nw = row.len().div_ceil(64);
        extract_runs(row, &mut v, &mut vec![0; nw], &mut vec![0; nw]);
        v.chunks(2).map(|p| (p[0], p[1])).collect()
    }

    fn runs_naive(row: &[u8]) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        let mut x = 0;
        while x < row.len() {
            if row[x] != 0 {
                let s = x;
                while x < row.len() && row[x] != 0 {
                    x += 1;
                }
                v.push((s as u32, x as u32));
            } else {
                x += 1;
            }
        }
        v
    }

    #[test]
    fn run_extraction_matches_naive() {
        for w in [1usize, 2, 31, 63, 64, 65, 127, 128, 129, 200] {
            for seed in 0..20u32 {
                let row: Vec<u8> = (0..w)
                    .map(|i| {
                        let h = (i as u32 ^ seed.wrapping_mul(2654435761)).wrapping_mul(2246822519);
                        (((h >> 13) % 3) == 0 || seed % 5 == 0) as u8
                            * if seed % 2 == 0 { 1 } else { 255 }
                    })
                    .collect();
                assert_eq!(runs_of(&row), runs_naive(&row), "w={w} seed={seed}");
            }
            assert_eq!(runs_of(&vec![1u8; w]), vec![(0, w as u32)]);
            assert_eq!(runs_of(&vec![0u8; w]), vec![]);
        }
    }

    #[test]
    fn label_bytes_writes_every_label_into_the_caller_buffer() {
        let (w, h) = (67u32, 45u32);
        // Foreground bytes of any non-zero value, as a numpy mask may hold.
        let data: Vec<u8> = (0..w * h)
            .map(|i| {
                let v = i.wrapping_mul(2654435761) >> 7;
                if v % 3 == 0 {
                    (v % 255 + 1) as u8
                } else {
                    0
                }
            })
            .collect();
        let image = BinaryImage::new(w, h, data.clone()).unwrap();
        for connectivity in [Connectivity::Four, Connectivity::Eight] {
            let expected = Lsl::with_strip_rows(7)
                .label(&image, connectivity, Want::Both)
                .unwrap();
            let mut out = vec![MaybeUninit::new(u32::MAX); (w * h) as usize];
            let got = Lsl::with_strip_rows(7)
                .label_bytes(&data, w, h, connectivity, Want::Both, Some(&mut out))
                .unwrap();
            assert!(got.labels.is_none(), "written into the caller's buffer");
            assert_eq!(got.count, expected.count);
            assert_eq!(got.stats, expected.stats);
            // SAFETY: every value was initialised (to u32::MAX) before the call.
            let out: Vec<u32> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert_eq!(out, expected.labels.unwrap().data);
        }
        let mut short = vec![MaybeUninit::new(0u32); 10];
        let err = Lsl::new()
            .label_bytes(
                &data,
                w,
                h,
                Connectivity::Eight,
                Want::Both,
                Some(&mut short),
            )
            .unwrap_err();
        assert!(err.to_string().contains("label buffer holds 10"), "{err}");
        let err = Lsl::new()
            .label_bytes(&data[1..], w, h, Connectivity::Eight, Want::Stats, None)
            .unwrap_err();
        assert!(err.to_string().contains("expected 3015"), "{err}");
    }

    /// The shape sums from the runs are the pixel scan's over the oracle's labels: strips of a
    /// few rows (components started in a strip above), both connectivities (unsure diagonal
    /// contacts at strip borders too), a filter, the packed mask, and the label image when asked.
    #[test]
    fn shape_sums_from_the_runs_match_the_pixel_scan() {
        use crate::ccl::cpu::oracle::flood_fill;
        use crate::ccl::descriptors::shape_sums_by_scan;
        use crate::frame::random_image::{generate, RandomImageSpec};
        let mut images = Vec::new();
        for (width, height) in [(97, 61), (33, 40), (64, 17), (1, 50), (50, 1)] {
            for (density, granularity) in [(0.2, 1), (0.5, 1), (0.6, 2), (0.5, 4), (0.9, 1)] {
                let spec = RandomImageSpec {
                    width,
                    height,
                    density,
                    granularity,
                    seed: 5,
                };
                images.push(generate(&spec).unwrap());
            }
        }
        for s in crate::ccl::shapes::hard_shapes(67, 33) {
            images.push(s.image);
        }
        let big = |s: &ComponentStats| s.area >= 3;
        for image in &images {
            for c in [Connectivity::Four, Connectivity::Eight] {
                let (labels, moments) = flood_fill(image, c);
                let want = shape_sums_by_scan(&labels, moments.len() as u32);
                for rows in [1, 3, 64] {
                    let mut lsl = Lsl::with_strip_rows(rows);
                    let (got, _, sums) = lsl
                        .label_shapes(
                            Mask::Bytes(image),
                            c,
                            Want::Stats,
                            None,
                            &crate::ccl::keep_all,
                        )
                        .unwrap();
                    assert_eq!(sums, want, "{c}, strips of {rows} rows");
                    assert!(got.labels.is_none());
                    let steps: Vec<&str> = got.timings.iter().map(|t| t.step.as_ref()).collect();
                    assert!(steps.contains(&"shape descriptors"), "{steps:?}");
                    assert!(steps.contains(&"stats"), "no label image made: {steps:?}");
                    let stats = got.stats.unwrap();
                    let kept: Vec<ShapeSums> = stats
                        .iter()
                        .zip(&want)
                        .filter(|(s, _)| big(s))
                        .map(|(_, w)| *w)
                        .collect();
                    let packed = image.pack();
                    let (got, _, sums) = lsl
                        .label_shapes(Mask::Packed(&packed), c, Want::Both, None, &big)
                        .unwrap();
                    assert_eq!(sums, kept, "{c}, strips of {rows} rows, filtered");
                    assert_eq!(got.labels.unwrap().data, labels.data);
                }
            }
        }
    }
}
