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

mod centroids;
mod merge;
mod output;
mod runs;
mod shapes;
mod starts;
pub use starts::ComponentStarts;
#[cfg(test)]
mod tests;

use crate::ccl::descriptors::ShapeSums;
use crate::ccl::stats::{ComponentStats, Moments};
use crate::ccl::subpixel::{check_weights_cover, GreyWeights, SubpixelCentroid};
use crate::ccl::{
    CentroidRows, Connectivity, Keep, LabelRequest, Labeler, Labeling, Mask, ShapeLabeling,
    ShapeRows, StepTime, Want,
};
use crate::error::Result;
use crate::frame::image::{check_size, LabelImage};
use rayon::prelude::*;
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
    /// The sub-pixel centroids' sums of every component (`weighted_sums`), kept between
    /// calls.
    centroid_sums: Vec<centroids::Sums>,
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
    /// Roots demoted by the border merge across the border above this strip.
    demoted: Vec<u32>,
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
            centroid_sums: Vec::new(),
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

    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        let image = request.input.bytes();
        let (width, height) = (image.width, image.height);
        let (connectivity, want) = (request.connectivity, request.want);
        self.label_bytes(&image.data, width, height, connectivity, want, None)
    }

    /// The centroids' sums come from the runs the labeling keeps (`Lsl::weighted_sums`): no
    /// label image unless asked for, each foreground pixel read once.
    fn label_weighted(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: CentroidRows<'_>,
    ) -> Result<(Labeling, Vec<SubpixelCentroid>)> {
        let (labeling, centroids, _) =
            self.label_from_runs(request, rows.keep, Some(rows.weights), false)?;
        Ok((labeling, centroids.unwrap_or_default()))
    }

    /// The shape sums (and the centroids' sums, with sub-pixel weights) come from the runs the
    /// labeling keeps (`Lsl::shape_sums`, `Lsl::weighted_sums`): no label image, no second pass
    /// over the pixels.
    fn label_shapes(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        rows: ShapeRows<'_>,
    ) -> Result<ShapeLabeling> {
        let (labeling, centroids, sums) =
            self.label_from_runs(request, rows.keep, rows.weights, true)?;
        Ok((labeling, centroids, sums.unwrap_or_default()))
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
        labels_out: Option<&mut [MaybeUninit<u32>]>,
    ) -> Result<Labeling> {
        // All four steps run inside the thread pool: from a thread outside it (the caller's),
        // each parallel step would otherwise be handed over and waited for on its own (tens of
        // µs a frame on a loaded machine).
        rayon::scope(|_| {
            check_buffers(data, width, height, labels_out.as_deref())?;
            let (w, h) = (width as usize, height as usize);
            let stats_wanted = want.stats();
            let mut timings = Vec::with_capacity(4);

            let t = Instant::now();
            let stride = self.label_strips(data, w, h, connectivity, stats_wanted);
            timings.push(StepTime::new("runs+strip labeling", ms(t)));

            let t = Instant::now();
            let d = match connectivity {
                Connectivity::Four => 0,
                Connectivity::Eight => 1,
            };
            self.merge_borders(stride, d, stats_wanted);
            timings.push(StepTime::new("border merge", ms(t)));

            let t = Instant::now();
            self.strips.par_iter_mut().for_each(|s| s.number_roots());
            let (offsets, count) = root_offsets(&self.strips);
            timings.push(StepTime::new("numbering", ms(t)));

            let t = Instant::now();
            let (labels, stats) =
                self.write_outputs(w, h, want, (&offsets, count), stride, labels_out);
            let step = match want {
                Want::Labels => "label image",
                Want::Stats => "stats",
                Want::Both => "label image+stats",
            };
            timings.push(StepTime::new(step, ms(t)));

            Ok(Labeling {
                count,
                labels: labels.map(|data| LabelImage {
                    width,
                    height,
                    data,
                }),
                stats,
                timings,
                filtered: None,
                device_detections: None,
            })
        })
    }

    /// Step 1: the image cut into strips, each labeled on its own (in parallel). Returns the
    /// stride of the strips' label ids.
    fn label_strips(
        &mut self,
        data: &[u8],
        w: usize,
        h: usize,
        connectivity: Connectivity,
        stats: bool,
    ) -> u32 {
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
        self.strips
            .par_iter_mut()
            .for_each(|s| s.label(data, w, connectivity, stats));
        stride
    }

    /// Step 4: the label image (into `labels_out` when given; else a new buffer, returned) and
    /// the statistics table, as `want` asks, each strip writing its own rows in parallel.
    fn write_outputs(
        &mut self,
        w: usize,
        h: usize,
        want: Want,
        (offsets, count): (&[u32], u32),
        stride: u32,
        labels_out: Option<&mut [MaybeUninit<u32>]>,
    ) -> (Option<Vec<u32>>, Option<Vec<ComponentStats>>) {
        let mut labels: Vec<u32> = Vec::new();
        let mut stats_out: Vec<ComponentStats> = Vec::new();
        let own_labels = want.labels() && labels_out.is_none();
        {
            let mut label_chunks: Vec<&mut [MaybeUninit<u32>]> = Vec::new();
            if want.labels() {
                let all = match labels_out {
                    Some(out) => out,
                    None => {
                        labels.reserve_exact(w * h);
                        advise_huge_pages(labels.spare_capacity_mut());
                        &mut labels.spare_capacity_mut()[..w * h]
                    }
                };
                label_chunks = per_strip(all, self.strips.iter().map(|s| (s.y1 - s.y0) * w));
            }
            let mut stat_chunks: Vec<&mut [MaybeUninit<ComponentStats>]> = Vec::new();
            if want.stats() {
                stats_out.reserve_exact(count as usize);
                advise_huge_pages(stats_out.spare_capacity_mut());
                let all = &mut stats_out.spare_capacity_mut()[..count as usize];
                stat_chunks = per_strip(all, self.strips.iter().map(|s| s.roots as usize));
            }
            let strips = &self.strips[..];
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
        if own_labels {
            // SAFETY: every strip wrote every pixel of its rows, and the strips cover all rows.
            unsafe { labels.set_len(w * h) };
        }
        if want.stats() {
            // SAFETY: every strip wrote one row per root and the chunks cover all `count` rows.
            unsafe { stats_out.set_len(count as usize) };
        }
        (
            own_labels.then_some(labels),
            want.stats().then_some(stats_out),
        )
    }
}

/// The mask holds `width × height` bytes, and `labels_out`, when given, as many values.
fn check_buffers(
    data: &[u8],
    width: u32,
    height: u32,
    labels_out: Option<&[MaybeUninit<u32>]>,
) -> Result<()> {
    check_size(width, height)?;
    let pixels = width as usize * height as usize;
    let wrong = |why: String| crate::Error::InvalidSize { width, height, why };
    if data.len() != pixels {
        return Err(wrong(format!(
            "buffer holds {} pixels, expected {pixels}",
            data.len()
        )));
    }
    match labels_out {
        Some(out) if out.len() != pixels => Err(wrong(format!(
            "the label buffer holds {} values, expected {pixels}",
            out.len()
        ))),
        _ => Ok(()),
    }
}

/// What `Lsl::label_from_runs` returns: the labeling, the sub-pixel centroids and the shape
/// sums (each when asked).
type FromRuns = (
    Labeling,
    Option<Vec<SubpixelCentroid>>,
    Option<Vec<ShapeSums>>,
);

impl Lsl {
    /// Labels the mask (every statistics row; the label image only when `request` wants it)
    /// and, from its runs, the sub-pixel centroids of the rows `keep` accepts when `weights`
    /// are given and their shape sums when `shapes` (`label_weighted`, `label_shapes`).
    fn label_from_runs(
        &mut self,
        request: LabelRequest<Mask<'_>>,
        keep: Keep<'_>,
        weights: Option<&GreyWeights<'_>>,
        shapes: bool,
    ) -> Result<FromRuns> {
        let (connectivity, want) = (request.connectivity, request.want);
        let image = request.input.bytes();
        let (width, height) = (image.width, image.height);
        if let Some(w) = weights {
            check_weights_cover(w.grey, w.levels, "mask", (width, height))?;
        }
        let packed = match request.input {
            Mask::Bytes(_) => None,
            Mask::Packed(packed) => Some(packed),
        };
        let with = if want.labels() {
            Want::Both
        } else {
            Want::Stats
        };
        let mut labeling =
            self.label_bytes(&image.data, width, height, connectivity, with, None)?;
        // The label image's writing made the final labels; else the first pass here makes them.
        let mut labeled = want.labels();
        let mut steps = Vec::new();
        let stats = labeling.stats.as_deref().unwrap_or_default();
        let centroids = match weights {
            Some(w) => {
                let t = Instant::now();
                let centroids = rayon::scope(|_| self.weighted_sums(w, stats, keep, labeled))?;
                steps.push(StepTime::new("sub-pixel centroids", ms(t)));
                labeled = true;
                Some(centroids)
            }
            None => None,
        };
        let sums = shapes.then(|| {
            let t = Instant::now();
            let sums = rayon::scope(|_| {
                self.shape_sums(width, connectivity, stats, keep, labeled, packed)
            });
            steps.push(StepTime::new("shape descriptors", ms(t)));
            sums
        });
        labeling.timings.extend(steps);
        Ok((labeling, centroids, sums))
    }

    /// The final label of every provisional label of the last labeling (`fins`), unless it
    /// made the label image (`labeled`), which wrote them; returns each strip's first
    /// component number less one and the number of components. For the passes over the runs
    /// after the labeling (`shape_sums`, `weighted_sums`).
    fn final_labels_of_strips(&mut self, width: u32, labeled: bool) -> (Vec<u32>, u32) {
        let (offsets, count) = root_offsets(&self.strips);
        let Some(first) = self.strips.first() else {
            return (offsets, count);
        };
        if !labeled {
            let stride = ((first.y1 - first.y0) as u64 * width.div_ceil(2) as u64) as u32;
            let (strips, offsets) = (&self.strips[..], &offsets[..]);
            self.fins
                .par_iter_mut()
                .enumerate()
                .for_each(|(k, fin)| strips[k].final_labels(k, strips, offsets, stride, fin));
        }
        (offsets, count)
    }
}

/// Each strip's first component number less one (its roots numbered after those of the
/// strips above), and the number of components.
fn root_offsets(strips: &[Strip]) -> (Vec<u32>, u32) {
    let mut offsets = Vec::with_capacity(strips.len());
    let mut count = 0u32;
    for s in strips {
        offsets.push(count);
        count += s.roots;
    }
    (offsets, count)
}

/// `all` cut into consecutive parts of the given lengths, one per strip.
fn per_strip<T>(all: &mut [T], lens: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut parts = Vec::new();
    let mut rest = all;
    for len in lens {
        let (part, tail) = rest.split_at_mut(len);
        parts.push(part);
        rest = tail;
    }
    parts
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
