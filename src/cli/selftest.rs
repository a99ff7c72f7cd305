//! `markerscope selftest`: every available algorithm against the oracle over the shapes and random
//! images of DESIGN.md. This is what proves GPU kernels on the GPU machine (CI has no GPU).

use crate::ccl::cpu::oracle::flood_fill;
use crate::ccl::partition::same_partition;
use crate::ccl::row_filter::aspect;
use crate::ccl::shapes::{hard_shapes, random_images, Shape};
use crate::ccl::stats::{compare, ComponentStats};
use crate::ccl::subpixel::GreyWeights;
use crate::ccl::{
    keep_all, AlgorithmInfo, Backends, Connectivity, Keep, Labeler, Labeling, Mask, RowFilter,
    ShapeSumsOn, Submission, Want, CUDA_GRAPH_STEP,
};
use crate::frame::image::{BinaryImage, GrayImage, LabelImage};
use crate::frame::mask::PixelMask;
use crate::frame::page_lock::PageLocker;
use crate::threshold::levels::global_level;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use crate::threshold::GreyInput;

pub struct SelftestOptions {
    /// Small matrix (seconds), for sanitizers and CI.
    pub quick: bool,
    /// Only these algorithms (all available ones when empty).
    pub algorithms: Vec<String>,
    /// Print every case with its time (to find a slow or stuck case).
    pub verbose: bool,
}

#[derive(Default, Debug)]
pub struct SelftestReport {
    pub checks: usize,
    pub failures: Vec<String>,
    pub algorithms: Vec<String>,
}

/// The image matrix: hard shapes at awkward sizes, and random images.
pub fn cases(quick: bool) -> Vec<Shape> {
    let mut v = Vec::new();
    let sizes: &[(u32, u32)] = if quick {
        &[
            (1, 1),
            (1, 17),
            (17, 1),
            (31, 7),
            (33, 9),
            (64, 64),
            (65, 13),
        ]
    } else {
        &[
            (1, 1),
            (1, 300),
            (300, 1),
            (2, 2),
            (31, 31),
            (32, 32),
            (33, 33),
            (63, 17),
            (64, 64),
            (65, 65),
            (127, 9),
            (1000, 5),
            (257, 257),
        ]
    };
    for &(w, h) in sizes {
        v.extend(hard_shapes(w, h));
    }
    if quick {
        v.extend(random_images(97, 61, &[1, 4, 16], 0.25, 11));
        // Wide enough that the GPU border merges split each border row between warps; a width
        // that is a multiple of 16, so FLSL packs the bytes in its strip kernel.
        v.extend(random_images(2112, 40, &[1, 16], 0.25, 13));
        // Taller than one chunk of the analysis stage's row-count scan (8192 rows), and 519
        // blocks of the one-pass numbering's look-back.
        v.extend(random_images(64, 8300, &[4], 0.5, 17));
    } else {
        v.extend(hard_shapes(4097, 3001));
        v.extend(random_images(257, 255, &[1, 4, 16], 0.1, 7));
        v.extend(random_images(2048, 2048, &[1, 4, 16], 0.2, 23));
        v.extend(random_images(4097, 3001, &[1, 4, 16], 0.1, 5));
    }
    v
}

/// Checks one algorithm on one image against the oracle result; returns the failures.
pub fn check_one(
    labeler: &mut dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_labels: &crate::frame::image::LabelImage,
    oracle_stats: &[ComponentStats],
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: &str, why: String| failures.push(format!("{what}: {why}"));
    // Stats first: it follows the previous image's run, so state left over from it (a stale
    // count or table) shows up as a mismatch instead of happening to match.
    for want in [Want::Stats, Want::Both, Want::Labels] {
        let what = format!("{want:?}");
        match labeler.label(image, connectivity, want) {
            Err(e) => fail(&what, format!("error: {e}")),
            Ok(out) => {
                if out.count as usize != oracle_stats.len() {
                    fail(
                        &what,
                        format!("count {} vs oracle {}", out.count, oracle_stats.len()),
                    );
                }
                if want.labels() {
                    match &out.labels {
                        None => fail(&what, "no label image returned".into()),
                        Some(l) => {
                            if let Err(e) = same_partition(oracle_labels, l) {
                                fail(&what, format!("labels: {e}"));
                            }
                            // With stats, labels must use the same raster-order numbering.
                            if want == Want::Both && l.data != oracle_labels.data {
                                fail(
                                    &what,
                                    "labels are not numbered in raster order of first pixel".into(),
                                );
                            }
                        }
                    }
                }
                if want.stats() {
                    match &out.stats {
                        None => fail(&what, "no statistics returned".into()),
                        Some(s) => {
                            if let Err(e) = compare(oracle_stats, s) {
                                fail(&what, format!("stats: {e}"));
                            }
                        }
                    }
                }
            }
        }
    }
    failures
}

/// A grey frame, threshold levels and polarity that give exactly `image` as the mask, with
/// varied weights. `flavour` picks one threshold level for the frame, the same inverted, or
/// per-pixel levels (adaptive threshold), so the matrix covers each path of the weights.
pub fn weighted_input(image: &BinaryImage, flavour: usize) -> (GrayImage, ThresholdLevels, bool) {
    // A fixed hash of the pixel index: repeatable, and different from pixel to pixel.
    let hash = |i: usize| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57) as u8; // 0..127
    let fg = |i: usize| image.data[i] != 0;
    let n = image.data.len();
    let (w, h) = (image.width, image.height);
    let grey = |data: Vec<u8>| GrayImage {
        width: w,
        height: h,
        lock: Default::default(),
        data,
    };
    match flavour % 3 {
        // grey > 127 ⟺ foreground.
        0 => {
            let data = (0..n)
                .map(|i| if fg(i) { 128 + hash(i) } else { hash(i) })
                .collect();
            (grey(data), ThresholdLevels::Global(127), false)
        }
        // Inverted: foreground = grey ≤ 127.
        1 => {
            let data = (0..n)
                .map(|i| if fg(i) { 127 - hash(i) } else { 128 + hash(i) })
                .collect();
            (grey(data), ThresholdLevels::Global(127), true)
        }
        // Per-pixel levels up to 1000 away from the grey value, on either side of 0..=255.
        _ => {
            let data: Vec<u8> = (0..n).map(|i| hash(i) * 2).collect();
            let levels = (0..n)
                .map(|i| {
                    let g = data[i] as i32;
                    let d = (hash(i.wrapping_mul(7) + 3) as i32) * 8; // 0..=1016
                    if fg(i) {
                        g - 1 - d.min(1000)
                    } else {
                        g + d
                    }
                })
                .collect();
            let levels = ThresholdLevels::Local {
                width: w,
                height: h,
                levels,
            };
            (grey(data), levels, false)
        }
    }
}

/// A `Want::Stats` result: no label image, and the oracle's statistics.
fn check_stats_only(what: &str, out: &Labeling, oracle_stats: &[ComponentStats]) -> Vec<String> {
    let mut failures = Vec::new();
    if out.labels.is_some() {
        failures.push(format!("{what}: a label image came back for Want::Stats"));
    }
    match &out.stats {
        Some(s) => {
            if let Err(e) = compare(oracle_stats, s) {
                failures.push(format!("{what}: stats: {e}"));
            }
        }
        None => failures.push(format!("{what}: no statistics returned")),
    }
    failures
}

/// A `Want::Stats` result with the oracle's count and statistics.
fn check_count_and_stats(
    what: &str,
    out: &Labeling,
    oracle_stats: &[ComponentStats],
) -> Vec<String> {
    let mut failures = Vec::new();
    if out.count as usize != oracle_stats.len() {
        failures.push(format!(
            "{what}: count {} vs oracle {}",
            out.count,
            oracle_stats.len()
        ));
    }
    failures.extend(check_stats_only(what, out, oracle_stats));
    failures
}

/// The frame-graph path against the plain launches (`Labeler::set_cuda_graphs`): the statistics
/// of the byte mask and of the bit-packed mask with graphs off, then on twice (a capture, then
/// a replay, or two replays when an earlier frame of this size captured it), each exact
/// against the oracle. A graph run must report the graph's one step (a quiet fall back to the
/// plain launches would prove nothing). Labelers without graphs pass; the switch is left as it
/// was.
pub fn check_graphs(
    labeler: &mut dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_stats: &[ComponentStats],
    locker: Option<&dyn PageLocker>,
) -> Vec<String> {
    let Some(was) = labeler.set_cuda_graphs(false) else {
        return Vec::new();
    };
    let packed = image.pack();
    // The packed mask in page-locked memory too, as the capture thread packs it: its upload
    // reads it in place, before the graph rather than inside it.
    let locked = locker.map(|locker| {
        let mut p = image.pack();
        p.lock(locker);
        p
    });
    let mut forms = vec![("bytes", None), ("packed", Some(&packed))];
    if let Some(p) = locked.as_ref().filter(|p| p.page_locked()) {
        forms.push(("packed page-locked", Some(p)));
    }
    let mut failures = Vec::new();
    for (form, mask) in forms {
        for (graphs, pass) in [(false, "plain"), (true, "graph"), (true, "graph again")] {
            labeler.set_cuda_graphs(graphs);
            let what = format!("Stats, {form}, {pass}");
            let out = if let Some(packed) = mask {
                labeler.label_packed(packed, connectivity, Want::Stats)
            } else {
                labeler.label(image, connectivity, Want::Stats)
            };
            let out = match out {
                Ok(out) => out,
                Err(e) => {
                    failures.push(format!("{what}: error: {e}"));
                    continue;
                }
            };
            let graph_step = out.timings.iter().any(|t| t.step == CUDA_GRAPH_STEP);
            if graph_step != graphs {
                let why = if graphs {
                    "ran without its CUDA graph"
                } else {
                    "reported a CUDA graph with graphs off"
                };
                failures.push(format!("{what}: {why}"));
            }
            failures.extend(check_count_and_stats(&what, &out, oracle_stats));
        }
    }
    labeler.set_cuda_graphs(was);
    failures
}

/// The filters `check_row_filter` tries on an image: one with an area range and an aspect
/// limit exactly at the aspect of one of its components (the edge value), and by `flavour`
/// one that keeps single pixels or one that keeps nothing.
pub fn row_filters(oracle_stats: &[ComponentStats], flavour: usize) -> Vec<RowFilter> {
    let mut areas: Vec<u64> = oracle_stats.iter().map(|s| s.area).collect();
    areas.sort_unstable();
    let median = areas.get(areas.len() / 2).copied().unwrap_or(1);
    let edge = oracle_stats
        .get(oracle_stats.len() / 3)
        .map_or(2.0, |s| aspect(s.width, s.height));
    let second = if flavour % 2 == 0 {
        RowFilter {
            max_area: Some(1),
            ..RowFilter::default()
        }
    } else {
        RowFilter {
            min_area: Some(u64::MAX),
            ..RowFilter::default()
        }
    };
    vec![
        RowFilter {
            min_area: Some(median),
            max_area: areas.last().copied(),
            max_aspect: Some(edge),
        },
        second,
    ]
}

/// The rows a labeler drops itself (`Labeler::set_row_filter`) against the oracle's rows
/// filtered on the host: statistics-only runs of the byte and the bit-packed mask (graphs off
/// and on where the labeler has them) and sub-pixel runs must bring the kept rows exactly, each
/// with its own label, and the full count; a run with a label image brings every row. A
/// labeler that says it filters must do so on every statistics-only run. The filter is cleared
/// afterwards.
pub fn check_row_filter(
    labeler: &mut dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_labels: &LabelImage,
    oracle_stats: &[ComponentStats],
    flavour: usize,
) -> Vec<String> {
    let mut failures = Vec::new();
    let packed = image.pack();
    let graphs_were = labeler.set_cuda_graphs(false);
    let graph_modes: &[bool] = if graphs_were.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    let (grey, levels, invert) = weighted_input(image, flavour);
    let weights = GreyWeights {
        grey: &grey,
        levels: &levels,
        invert,
    };
    for filter in row_filters(oracle_stats, flavour) {
        let claims = labeler.set_row_filter(filter);
        let kept: Vec<ComponentStats> = oracle_stats
            .iter()
            .filter(|s| filter.accepts(s))
            .copied()
            .collect();
        let check = |what: &str, out: &Labeling, stats_only: bool| -> Option<String> {
            if out.count as usize != oracle_stats.len() {
                return Some(format!(
                    "{what}: count {} vs oracle {}",
                    out.count,
                    oracle_stats.len()
                ));
            }
            let expected = match out.filtered {
                Some(f) if f != filter => {
                    return Some(format!("{what}: filtered with {f:?}, not {filter:?}"))
                }
                Some(_) if !stats_only => {
                    return Some(format!("{what}: filtered a run with a label image"))
                }
                Some(_) => &kept[..],
                None if claims && stats_only => {
                    return Some(format!("{what}: the labeler did not filter the rows"))
                }
                None => oracle_stats,
            };
            match &out.stats {
                Some(s) => compare(expected, s)
                    .err()
                    .map(|e| format!("{what}: stats: {e}")),
                None => Some(format!("{what}: no statistics returned")),
            }
        };
        for &graphs in graph_modes {
            labeler.set_cuda_graphs(graphs);
            for (form, is_packed) in [("bytes", false), ("packed", true)] {
                let what = format!("row filter {filter:?}, Stats, {form}, graphs {graphs}");
                let out = if is_packed {
                    labeler.label_packed(&packed, connectivity, Want::Stats)
                } else {
                    labeler.label(image, connectivity, Want::Stats)
                };
                match out {
                    Ok(out) => failures.extend(check(&what, &out, true)),
                    Err(e) => failures.push(format!("{what}: error: {e}")),
                }
            }
        }
        labeler.set_cuda_graphs(false);
        let what = format!("row filter {filter:?}, Both");
        match labeler.label(image, connectivity, Want::Both) {
            Ok(out) => failures.extend(check(&what, &out, false)),
            Err(e) => failures.push(format!("{what}: error: {e}")),
        }
        // Sub-pixel centroids of the kept rows: found by the labels the rows carry.
        let accepts = |s: &ComponentStats| filter.accepts(s);
        let what = format!("row filter {filter:?}, sub-pixel");
        let expected = weights.centroids(oracle_labels, oracle_stats, &accepts);
        match (
            labeler.label_weighted(
                Mask::Bytes(image),
                connectivity,
                Want::Stats,
                &weights,
                &accepts,
            ),
            expected,
        ) {
            (Ok((out, centroids)), Ok(expected)) => {
                // Sub-pixel runs may bring every row (no claim for them).
                let all_rows = out.filtered.is_none();
                failures.extend(check(&what, &out, !all_rows));
                let sums = |c: &crate::ccl::subpixel::SubpixelCentroid| {
                    (c.label, c.weight, c.sum_wx, c.sum_wy)
                };
                if !centroids.iter().map(sums).eq(expected.iter().map(sums)) {
                    failures.push(format!(
                        "{what}: {} centroids differ from the {} expected",
                        centroids.len(),
                        expected.len()
                    ));
                }
            }
            (Err(e), _) => failures.push(format!("{what}: error: {e}")),
            (_, Err(e)) => failures.push(format!("{what}: the CPU reference failed: {e}")),
        }
    }
    labeler.set_row_filter(RowFilter::default());
    if let Some(was) = graphs_were {
        labeler.set_cuda_graphs(was);
    }
    failures
}

/// Frames in flight (`Labeler::submit`, `complete`) against the oracle, for a labeler that
/// keeps more than one: as many instances as it keeps (`twin`), each with a frame submitted
/// before the first is completed, in turn the byte mask, the bit-packed mask and the grey frame
/// (thresholded where the labeler runs), alternately the image and an empty one of its size (a
/// result handed to the wrong frame shows), with CUDA graphs off and on. Statistics exact, and
/// the frames complete in the order they were submitted. Labelers that keep one frame pass.
pub fn check_in_flight(
    labeler: &dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_stats: &[ComponentStats],
) -> Vec<String> {
    let k = labeler.frames_in_flight();
    if k <= 1 {
        return Vec::new();
    }
    let mut instances = Vec::with_capacity(k);
    for _ in 0..k {
        match labeler.twin() {
            Ok(l) => instances.push(l),
            Err(e) => return vec![format!("frames in flight: twin: {e}")],
        }
    }
    let empty = match BinaryImage::zeros(image.width, image.height) {
        Ok(e) => e,
        Err(e) => return vec![format!("frames in flight: the empty frame: {e}")],
    };
    let frames = [image, &empty];
    let packed = frames.map(|f| f.pack());
    // Foreground 255, background 0: the fixed level 127 gives the mask back.
    let mut greys = Vec::with_capacity(2);
    for f in frames {
        let data = f
            .data
            .iter()
            .map(|&v| if v != 0 { 255 } else { 0 })
            .collect();
        match GrayImage::new(f.width, f.height, data) {
            Ok(g) => greys.push(g),
            Err(e) => return vec![format!("frames in flight: the grey frame: {e}")],
        }
    }
    let fixed = ThresholdSpec::Fixed(127);
    let mut failures = Vec::new();
    for graphs in [false, true] {
        for round in 0..3 {
            let mut submitted = Vec::new();
            for (j, instance) in instances.iter_mut().enumerate() {
                instance.set_cuda_graphs(graphs);
                let content = j % 2;
                let (form, frame) = match (j + round) % 3 {
                    0 => ("bytes", Submission::Mask(Mask::Bytes(frames[content]))),
                    1 => ("packed", Submission::Mask(Mask::Packed(&packed[content]))),
                    _ => (
                        "grey",
                        Submission::Grey(GreyInput {
                            grey: &greys[content],
                            threshold: &fixed,
                            invert: false,
                            pixel_mask: None,
                            staged: None,
                        }),
                    ),
                };
                let what = format!(
                    "in flight {}/{k}, {form}, {}, graphs {}",
                    j + 1,
                    ["image", "empty"][content],
                    if graphs { "on" } else { "off" }
                );
                match instance.submit(frame, connectivity, Want::Stats) {
                    Ok(true) => submitted.push((j, what, content)),
                    Ok(false) => failures.push(format!("{what}: not submitted")),
                    Err(e) => failures.push(format!("{what}: submit: {e}")),
                }
            }
            for (j, what, content) in submitted {
                let expected = if content == 0 { oracle_stats } else { &[] };
                match instances[j].complete() {
                    Ok(out) => failures.extend(check_count_and_stats(&what, &out, expected)),
                    Err(e) => failures.push(format!("{what}: complete: {e}")),
                }
            }
        }
    }
    failures
}

/// Checks `label_shapes` against the shape sums over the oracle's labels, pixel by pixel over
/// the whole image (exact integers): with and without sub-pixel weights, every component or
/// the odd labels only, bytes or bit-packed (`flavour` picks, as in `check_weighted`).
pub fn check_shapes(
    labeler: &mut dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_labels: &LabelImage,
    oracle_stats: &[ComponentStats],
    flavour: usize,
) -> Vec<String> {
    let (grey, levels, invert) = weighted_input(image, flavour);
    let weights = GreyWeights {
        grey: &grey,
        levels: &levels,
        invert,
    };
    let odd_labels = |s: &ComponentStats| s.label % 2 == 1;
    let odd = flavour % 4 >= 2;
    let keep: Keep<'_> = if odd { &odd_labels } else { &keep_all };
    let with_weights = flavour % 3 == 0;
    let what = format!(
        "shape descriptors (flavour {}{}{})",
        flavour % 6,
        if odd { ", odd labels" } else { "" },
        if with_weights { ", with sub-pixel" } else { "" }
    );
    let reference =
        crate::ccl::descriptors::shape_sums_by_scan(oracle_labels, oracle_stats.len() as u32);
    let expected: Vec<_> = oracle_stats
        .iter()
        .zip(&reference)
        .filter(|(s, _)| keep(s))
        .map(|(_, r)| *r)
        .collect();
    let packed;
    let mask = if flavour % 2 == 0 {
        Mask::Bytes(image)
    } else {
        packed = image.pack();
        Mask::Packed(&packed)
    };
    let mut failures = Vec::new();
    let w = with_weights.then_some(&weights);
    match labeler.label_shapes(mask, connectivity, Want::Stats, w, keep) {
        Err(e) => failures.push(format!("{what}: error: {e}")),
        Ok((out, centroids, sums)) => {
            failures.extend(check_stats_only(&what, &out, oracle_stats));
            if with_weights != centroids.is_some() {
                failures.push(format!(
                    "{what}: sub-pixel centroids {} though {} asked for",
                    if centroids.is_some() {
                        "returned"
                    } else {
                        "missing"
                    },
                    if with_weights {
                        "they were"
                    } else {
                        "none were"
                    }
                ));
            }
            if sums.len() != expected.len() {
                failures.push(format!(
                    "{what}: {} rows for {} components",
                    sums.len(),
                    expected.len()
                ));
            } else if let Some((got, want)) = sums.iter().zip(&expected).find(|(g, e)| g != e) {
                failures.push(format!(
                    "{what}: component {}: {got:?}, expected {want:?}",
                    want.label
                ));
            }
        }
    }
    failures
}

/// Checks `label_weighted` against the CPU weighted centroids over the oracle's labels (exact
/// integer sums), with the mask as bytes or bit-packed (`flavour` picks; see `weighted_input`).
pub fn check_weighted(
    labeler: &mut dyn Labeler,
    image: &BinaryImage,
    connectivity: Connectivity,
    oracle_labels: &LabelImage,
    oracle_stats: &[ComponentStats],
    flavour: usize,
) -> Vec<String> {
    let (grey, levels, invert) = weighted_input(image, flavour);
    let weights = GreyWeights {
        grey: &grey,
        levels: &levels,
        invert,
    };
    // Every other pair of flavours keeps only the odd labels, as the pipeline's filter would.
    let odd_labels = |s: &ComponentStats| s.label % 2 == 1;
    let keep: Keep<'_> = if flavour % 4 >= 2 {
        &odd_labels
    } else {
        &keep_all
    };
    let what = format!(
        "sub-pixel (flavour {}{})",
        flavour % 6,
        if flavour % 4 >= 2 { ", odd labels" } else { "" }
    );
    let expected = match weights.centroids(oracle_labels, oracle_stats, keep) {
        Ok(e) => e,
        Err(e) => return vec![format!("{what}: the CPU reference failed: {e}")],
    };
    let packed;
    let mask = if flavour % 2 == 0 {
        Mask::Bytes(image)
    } else {
        packed = image.pack();
        Mask::Packed(&packed)
    };
    let mut failures = Vec::new();
    match labeler.label_weighted(mask, connectivity, Want::Stats, &weights, keep) {
        Err(e) => failures.push(format!("{what}: error: {e}")),
        Ok((out, centroids)) => {
            failures.extend(check_stats_only(&what, &out, oracle_stats));
            if centroids.len() != expected.len() {
                failures.push(format!(
                    "{what}: {} centroids for {} components",
                    centroids.len(),
                    expected.len()
                ));
            } else if let Some((got, want)) = centroids.iter().zip(&expected).find(|(g, e)| {
                (g.label, g.weight, g.sum_wx, g.sum_wy) != (e.label, e.weight, e.sum_wx, e.sum_wy)
            }) {
                failures.push(format!(
                    "{what}: component {}: sums (w, wx, wy) = ({}, {}, {}), expected ({}, {}, {})",
                    want.label,
                    got.weight,
                    got.sum_wx,
                    got.sum_wy,
                    want.weight,
                    want.sum_wx,
                    want.sum_wy
                ));
            }
        }
    }
    failures
}

/// Checks `label_grey` (the labeler thresholds the grey frame itself) against the host: the
/// level `global_level` picks, the oracle's statistics of the mask that level makes, and the
/// CPU's weighted centroids. The grey frame is `weighted_input`'s (flavours 0 and 1: either
/// polarity); `case` picks the threshold (fixed, Otsu, triangle, background) and every third
/// case asks for sub-pixel centroids; every other case masks a region out (a diamond and a
/// band of diagonal stripes, `frame::mask`). The labeler must do it exactly when the registry
/// says the pipeline will hand it grey frames: `thresholds_grey`, and with sub-pixel centroids
/// `subpixel_on_device` too; otherwise it must decline (`None`).
pub fn check_grey(
    labeler: &mut dyn Labeler,
    info: &AlgorithmInfo,
    image: &BinaryImage,
    connectivity: Connectivity,
    case: usize,
    backends: &Backends,
) -> Vec<String> {
    let (mut grey, _, invert) = weighted_input(image, case % 2);
    // A third of the cases hand the labeler a page-locked copy of the frame, as the capture
    // thread does (`Backends::stage_grey`), a third the frame page-locked where it is, as a
    // source's frame pool does (`source::frame_pool`), and the others let it stage the frame
    // itself.
    let staged = match (case / 2) % 3 {
        0 => backends.stage_grey(&grey),
        1 => {
            if let Some(locker) = backends.page_locker() {
                grey.lock(locker.as_ref());
            }
            None
        }
        _ => None,
    };
    let spec = [
        ThresholdSpec::Fixed(127),
        ThresholdSpec::Otsu,
        ThresholdSpec::Triangle,
        ThresholdSpec::Background { k: 5.0 },
    ][case % 4];
    let subpixel = case % 3 == 0;
    let pixel_mask = if case % 2 == 1 {
        let (w, h) = (image.width, image.height);
        let keep = (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| {
                let diamond = (2 * x).abs_diff(w) + (2 * y).abs_diff(h) < w.min(h);
                let stripe = (x + y) % 7 < 2;
                u8::from(!diamond && !stripe)
            })
            .collect();
        match PixelMask::from_keep(w, h, keep) {
            Ok(m) => Some(std::sync::Arc::new(m)),
            Err(e) => return vec![format!("grey input: the test mask failed: {e}")],
        }
    } else {
        None
    };
    let what = format!(
        "grey input (threshold {spec}{}{}{}{}{})",
        if invert { ", inverted" } else { "" },
        if subpixel { ", sub-pixel" } else { "" },
        if pixel_mask.is_some() { ", masked" } else { "" },
        if staged.is_some() { ", staged" } else { "" },
        if grey.page_locked() {
            ", page-locked"
        } else {
            ""
        }
    );
    let Some(level) = global_level(&grey, &spec, invert) else {
        return vec![format!("{what}: no global level on the host")];
    };
    let levels = ThresholdLevels::Global(level);
    let mut mask = match levels.mask(&grey, invert) {
        Ok(m) => m,
        Err(e) => return vec![format!("{what}: the host mask failed: {e}")],
    };
    if let Some(m) = &pixel_mask {
        m.apply(Some(&mut mask.data), None);
    }
    let (labels, moments) = flood_fill(&mask, connectivity);
    let stats: Vec<ComponentStats> = moments
        .iter()
        .enumerate()
        .map(|(i, m)| m.to_stats(i as u32 + 1))
        .collect();
    let keep: Keep<'_> = &keep_all;
    let input = GreyInput {
        grey: &grey,
        threshold: &spec,
        invert,
        pixel_mask: pixel_mask.as_ref(),
        staged: staged.as_ref(),
    };
    let expected = info.thresholds_grey && (!subpixel || info.subpixel_on_device);
    let out = match labeler.label_grey(&input, connectivity, Want::Stats, subpixel.then_some(keep))
    {
        Err(e) => return vec![format!("{what}: error: {e}")],
        Ok(None) if expected => {
            return vec![format!(
                "{what}: declined, but the registry says the pipeline hands it such frames"
            )]
        }
        Ok(None) => return Vec::new(),
        Ok(Some(_)) if !expected => {
            return vec![format!(
                "{what}: done, but the registry says the pipeline never hands it such frames"
            )]
        }
        Ok(Some(out)) => out,
    };
    let mut failures = Vec::new();
    if out.level != level {
        failures.push(format!(
            "{what}: level {}, the host's is {level}",
            out.level
        ));
    }
    failures.extend(check_stats_only(&what, &out.labeling, &stats));
    match (subpixel, &out.centroids) {
        (false, None) => {}
        (false, Some(_)) => failures.push(format!("{what}: centroids that were not asked for")),
        (true, None) => failures.push(format!("{what}: no centroids")),
        (true, Some(got)) => {
            let weights = GreyWeights {
                grey: &grey,
                levels: &levels,
                invert,
            };
            match weights.centroids(&labels, &stats, keep) {
                Err(e) => failures.push(format!("{what}: the CPU reference failed: {e}")),
                Ok(expected) if &expected != got => {
                    let first = expected.iter().zip(got).position(|(e, g)| e != g);
                    failures.push(format!(
                        "{what}: {} centroids, {} expected; first difference at row {first:?}",
                        got.len(),
                        expected.len()
                    ))
                }
                Ok(_) => {}
            }
        }
    }
    failures
}

/// Why `name` cannot be checked here: no such algorithm, the reference itself, or its backend
/// is unavailable (and why).
fn not_selectable(backends: &Backends, name: &str) -> String {
    let known = crate::ccl::algorithms();
    match known.iter().find(|a| a.name.eq_ignore_ascii_case(name)) {
        None => format!(
            "unknown algorithm '{name}' (known: {})",
            known.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
        ),
        Some(a) if a.is_oracle => {
            format!(
                "'{}' is the reference the others are checked against",
                a.name
            )
        }
        Some(a) => format!(
            "algorithm '{}' needs the {} backend, which is not usable here: {}",
            a.name,
            a.backend,
            backends.cuda_unavailable_reason().unwrap_or_default()
        ),
    }
}

pub fn run(
    backends: &Backends,
    opts: &SelftestOptions,
    mut progress: impl FnMut(&str),
) -> SelftestReport {
    let mut report = SelftestReport::default();
    let selected: Vec<&AlgorithmInfo> = backends
        .available()
        .filter(|a| !a.is_oracle)
        .filter(|a| {
            opts.algorithms.is_empty()
                || opts
                    .algorithms
                    .iter()
                    .any(|n| n.eq_ignore_ascii_case(a.name))
        })
        .collect();
    for name in &opts.algorithms {
        if !selected.iter().any(|a| a.name.eq_ignore_ascii_case(name)) {
            report.failures.push(not_selectable(backends, name));
        }
    }
    let locker = backends.page_locker();
    report.algorithms = selected.iter().map(|a| a.name.to_string()).collect();
    if selected.is_empty() {
        return report; // nothing to check: skip building the images
    }
    let cases = cases(opts.quick);
    for connectivity in [Connectivity::Four, Connectivity::Eight] {
        let mut labelers: Vec<(&AlgorithmInfo, Box<dyn Labeler>)> = Vec::new();
        for a in selected.iter().filter(|a| a.supports(connectivity)) {
            match backends.create(a.name, connectivity) {
                Ok(l) => labelers.push((a, l)),
                Err(e) => report
                    .failures
                    .push(format!("{}: cannot create: {e}", a.name)),
            }
        }
        if labelers.is_empty() {
            continue;
        }
        for (i, case) in cases.iter().enumerate() {
            progress(&format!(
                "[{connectivity}-conn {}/{}] {}",
                i + 1,
                cases.len(),
                case.name
            ));
            let (labels, moments) = flood_fill(&case.image, connectivity);
            let stats: Vec<ComponentStats> = moments
                .iter()
                .enumerate()
                .map(|(i, m)| m.to_stats(i as u32 + 1))
                .collect();
            for (info, labeler) in labelers.iter_mut() {
                let name = info.name;
                report.checks += 1;
                let start = std::time::Instant::now();
                if opts.verbose {
                    print!("{name} {connectivity}-conn {} ... ", case.name);
                    let _ = std::io::Write::flush(&mut std::io::stdout());
                }
                let mut failures =
                    check_one(labeler.as_mut(), &case.image, connectivity, &labels, &stats);
                failures.extend(check_graphs(
                    labeler.as_mut(),
                    &case.image,
                    connectivity,
                    &stats,
                    locker.as_deref(),
                ));
                failures.extend(check_in_flight(
                    labeler.as_ref(),
                    &case.image,
                    connectivity,
                    &stats,
                ));
                failures.extend(check_weighted(
                    labeler.as_mut(),
                    &case.image,
                    connectivity,
                    &labels,
                    &stats,
                    i,
                ));
                // Fused shape sums are not used with sub-pixel weights (flavours 0 mod 3): those
                // cases once more without weights, so that the fused path sees every image.
                let again = info.shape_sums == ShapeSumsOn::Fused && i % 3 == 0;
                for flavour in [i, i + 1].into_iter().take(if again { 2 } else { 1 }) {
                    failures.extend(check_shapes(
                        labeler.as_mut(),
                        &case.image,
                        connectivity,
                        &labels,
                        &stats,
                        flavour,
                    ));
                }
                failures.extend(check_grey(
                    labeler.as_mut(),
                    info,
                    &case.image,
                    connectivity,
                    i,
                    backends,
                ));
                failures.extend(check_row_filter(
                    labeler.as_mut(),
                    &case.image,
                    connectivity,
                    &labels,
                    &stats,
                    i,
                ));
                for f in failures {
                    report
                        .failures
                        .push(format!("{name} {connectivity}-conn on {}: {f}", case.name));
                }
                if opts.verbose {
                    println!("{:.1} ms", start.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    }
    check_device_levels(backends, &selected, &mut report);
    report
}

/// The levels the GPU picks from a histogram (`grey_level`) against the host's
/// (`level_from_histogram`), over many histograms, every global threshold and both polarities:
/// once per run, when a selected algorithm thresholds on the GPU.
#[cfg(feature = "cuda")]
fn check_device_levels(
    backends: &Backends,
    selected: &[&AlgorithmInfo],
    report: &mut SelftestReport,
) {
    if !selected.iter().any(|a| a.thresholds_grey) {
        return;
    }
    let Ok(gpu) = backends.gpu() else { return };
    let (checks, failures) = crate::threshold::gpu::check_levels(gpu.clone());
    report.checks += checks;
    report.failures.extend(failures);
}

#[cfg(not(feature = "cuda"))]
fn check_device_levels(_: &Backends, _: &[&AlgorithmInfo], _: &mut SelftestReport) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::cpu::oracle::Oracle;
    use crate::ccl::Labeling;

    /// Wraps the oracle and breaks one thing about its output.
    enum Fault {
        None,
        /// Numbers components in reverse order (same partition, wrong numbering).
        ReverseNumbering,
        /// Reports the count of the previous image (the stale-state bug selftest must catch).
        StaleCount,
        /// Merges components 1 and 2.
        MergeFirstTwo,
        /// Adds one to the weight of the first sub-pixel centroid.
        HeavierFirstCentroid,
        /// Adds a diagonal pixel pair to the first component's shape sums.
        ShorterFirstPerimeter,
    }

    struct Faulty {
        fault: Fault,
        last_count: u32,
    }

    impl Labeler for Faulty {
        fn name(&self) -> &'static str {
            "faulty"
        }
        fn label(
            &mut self,
            image: &BinaryImage,
            c: Connectivity,
            want: Want,
        ) -> crate::Result<Labeling> {
            let mut out = Oracle.label(image, c, want)?;
            let n = out.count;
            match self.fault {
                Fault::None | Fault::HeavierFirstCentroid | Fault::ShorterFirstPerimeter => {}
                Fault::ReverseNumbering => {
                    if let Some(l) = out.labels.as_mut() {
                        l.data
                            .iter_mut()
                            .filter(|v| **v != 0)
                            .for_each(|v| *v = n + 1 - *v);
                    }
                }
                Fault::StaleCount => out.count = self.last_count,
                Fault::MergeFirstTwo => {
                    if let Some(l) = out.labels.as_mut() {
                        l.data.iter_mut().filter(|v| **v == 2).for_each(|v| *v = 1);
                    }
                }
            }
            self.last_count = n;
            Ok(out)
        }

        fn label_weighted(
            &mut self,
            mask: Mask<'_>,
            c: Connectivity,
            want: Want,
            weights: &GreyWeights<'_>,
            keep: Keep<'_>,
        ) -> crate::Result<(Labeling, Vec<crate::ccl::subpixel::SubpixelCentroid>)> {
            let image = match mask {
                Mask::Bytes(b) => b.clone(),
                Mask::Packed(p) => p.unpack(),
            };
            let out = Oracle.label(&image, c, Want::Both)?;
            let mut centroids = weights.centroids(
                out.labels.as_ref().unwrap(),
                out.stats.as_ref().unwrap(),
                keep,
            )?;
            if let (Fault::HeavierFirstCentroid, Some(first)) = (&self.fault, centroids.first_mut())
            {
                first.weight += 1;
            }
            let out = Labeling {
                labels: out.labels.filter(|_| want.labels()),
                ..out
            };
            Ok((out, centroids))
        }

        fn label_shapes(
            &mut self,
            mask: Mask<'_>,
            c: Connectivity,
            want: Want,
            weights: Option<&GreyWeights<'_>>,
            keep: Keep<'_>,
        ) -> crate::Result<crate::ccl::ShapeLabeling> {
            let (out, centroids, mut sums) =
                crate::ccl::label_shapes_on_host(self, mask, c, want, weights, keep)?;
            if let (Fault::ShorterFirstPerimeter, Some(first)) = (&self.fault, sums.first_mut()) {
                first.pairs_diagonal += 1;
            }
            Ok((out, centroids, sums))
        }
    }

    fn run_faulty(fault: Fault, image: &BinaryImage) -> Vec<String> {
        let (labels, moments) = flood_fill(image, Connectivity::Four);
        let stats: Vec<_> = moments
            .iter()
            .enumerate()
            .map(|(i, m)| m.to_stats(i as u32 + 1))
            .collect();
        let mut l = Faulty {
            fault,
            last_count: 0,
        };
        let mut failures = check_one(&mut l, image, Connectivity::Four, &labels, &stats);
        for flavour in 0..6 {
            failures.extend(check_weighted(
                &mut l,
                image,
                Connectivity::Four,
                &labels,
                &stats,
                flavour,
            ));
            failures.extend(check_shapes(
                &mut l,
                image,
                Connectivity::Four,
                &labels,
                &stats,
                flavour,
            ));
        }
        failures
    }

    #[test]
    fn check_one_accepts_the_oracle_and_catches_each_fault() {
        let image = BinaryImage::from_fn(9, 7, |x, y| (x * 3 + y * 5) % 7 < 3).unwrap();
        assert!(run_faulty(Fault::None, &image).is_empty());
        let f = run_faulty(Fault::ReverseNumbering, &image);
        assert!(f.iter().any(|m| m.contains("raster order")), "{f:?}");
        let f = run_faulty(Fault::StaleCount, &image);
        assert!(f.iter().any(|m| m.contains("count")), "{f:?}");
        let f = run_faulty(Fault::MergeFirstTwo, &image);
        assert!(f.iter().any(|m| m.contains("labels:")), "{f:?}");
        let f = run_faulty(Fault::HeavierFirstCentroid, &image);
        assert_eq!(f.len(), 6, "{f:?}");
        assert!(f.iter().all(|m| m.starts_with("sub-pixel")), "{f:?}");
        let f = run_faulty(Fault::ShorterFirstPerimeter, &image);
        assert_eq!(f.len(), 6, "{f:?}");
        assert!(
            f.iter().all(|m| m.starts_with("shape descriptors")),
            "{f:?}"
        );
    }

    /// The oracle behind a graph switch: with graphs on it reports the graph step, unless it
    /// falls back to plain steps, or it drops the last row.
    struct GraphLabeler {
        graphs: bool,
        quiet_fallback: bool,
        drops_a_row: bool,
    }

    impl Labeler for GraphLabeler {
        fn name(&self) -> &'static str {
            "graphs"
        }
        fn set_cuda_graphs(&mut self, on: bool) -> Option<bool> {
            Some(std::mem::replace(&mut self.graphs, on))
        }
        fn label(
            &mut self,
            image: &BinaryImage,
            c: Connectivity,
            want: Want,
        ) -> crate::Result<Labeling> {
            let mut out = Oracle.label(image, c, want)?;
            let step = if self.graphs && !self.quiet_fallback {
                CUDA_GRAPH_STEP
            } else {
                "label"
            };
            out.timings = vec![crate::ccl::StepTime::new(step, 0.1)];
            if self.graphs && self.drops_a_row {
                out.stats.as_mut().unwrap().pop();
            }
            Ok(out)
        }
    }

    /// The oracle that drops the rows of its row filter on statistics-only runs, as the GPU
    /// labelers do, or gets it wrong in one way.
    struct RowFiltering {
        filter: RowFilter,
        fault: Option<RowFault>,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum RowFault {
        /// Says it filters, never does.
        Ignores,
        /// Numbers the kept rows 1..=kept instead of keeping their labels.
        Renumbers,
        /// Reports the kept rows as the count.
        CountsKept,
    }

    impl Labeler for RowFiltering {
        fn name(&self) -> &'static str {
            "row filtering oracle"
        }
        fn set_row_filter(&mut self, filter: RowFilter) -> bool {
            self.filter = filter;
            true
        }
        fn label(
            &mut self,
            image: &BinaryImage,
            connectivity: Connectivity,
            want: Want,
        ) -> crate::error::Result<Labeling> {
            let mut out = Oracle.label(image, connectivity, want)?;
            if want != Want::Stats || self.filter.is_unlimited() {
                return Ok(out);
            }
            if self.fault == Some(RowFault::Ignores) {
                return Ok(out);
            }
            let rows = out.stats.as_mut().expect("statistics asked");
            rows.retain(|s| self.filter.accepts(s));
            if self.fault == Some(RowFault::Renumbers) {
                for (i, row) in rows.iter_mut().enumerate() {
                    row.label = i as u32 + 1;
                }
            }
            if self.fault == Some(RowFault::CountsKept) {
                out.count = rows.len() as u32;
            }
            out.filtered = Some(self.filter);
            Ok(out)
        }
    }

    #[test]
    fn check_row_filter_accepts_filtered_rows_and_catches_each_fault() {
        let image = random_images(64, 48, &[1, 2], 0.25, 3)
            .into_iter()
            .map(|s| s.image)
            .max_by_key(|i| flood_fill(i, Connectivity::Four).1.len())
            .expect("random images");
        let (labels, moments) = flood_fill(&image, Connectivity::Four);
        let stats: Vec<_> = moments
            .iter()
            .enumerate()
            .map(|(i, m)| m.to_stats(i as u32 + 1))
            .collect();
        assert!(stats.len() > 20, "{} components", stats.len());
        let run = |fault: Option<RowFault>| {
            let mut l = RowFiltering {
                filter: RowFilter::default(),
                fault,
            };
            let mut failures = Vec::new();
            for flavour in 0..2 {
                failures.extend(check_row_filter(
                    &mut l,
                    &image,
                    Connectivity::Four,
                    &labels,
                    &stats,
                    flavour,
                ));
            }
            assert!(l.filter.is_unlimited(), "the filter is cleared afterwards");
            failures
        };
        assert!(run(None).is_empty(), "{:?}", run(None));
        for (fault, says) in [
            (RowFault::Ignores, "did not filter"),
            (RowFault::Renumbers, "stats: component"),
            (RowFault::CountsKept, "count"),
        ] {
            let failures = run(Some(fault));
            assert!(
                failures.iter().any(|f| f.contains(says)),
                "{says}: {failures:?}"
            );
        }
        // The edge filter keeps some rows and rejects others here.
        let edge = row_filters(&stats, 0)[0];
        let kept = stats.iter().filter(|s| edge.accepts(s)).count();
        assert!(kept > 0 && kept < stats.len(), "{kept} of {}", stats.len());
    }

    /// A small image of a few components, and its statistics at 4-connectivity.
    fn small_image_and_stats() -> (BinaryImage, Vec<ComponentStats>) {
        let image = BinaryImage::from_fn(9, 7, |x, y| (x * 3 + y * 5) % 7 < 3).unwrap();
        let (_, moments) = flood_fill(&image, Connectivity::Four);
        let stats = moments
            .iter()
            .enumerate()
            .map(|(i, m)| m.to_stats(i as u32 + 1))
            .collect();
        (image, stats)
    }

    /// The oracle keeping two frames in flight; with `shared`, every instance hands back the
    /// last frame submitted to any of them (results crossed between frames).
    struct InFlightOracle {
        result: std::sync::Arc<std::sync::Mutex<Option<Labeling>>>,
        shared: bool,
    }

    impl Labeler for InFlightOracle {
        fn name(&self) -> &'static str {
            "in flight"
        }
        fn label(
            &mut self,
            image: &BinaryImage,
            c: Connectivity,
            want: Want,
        ) -> crate::Result<Labeling> {
            Oracle.label(image, c, want)
        }
        fn submit(
            &mut self,
            frame: Submission<'_>,
            c: Connectivity,
            want: Want,
        ) -> crate::Result<bool> {
            let mask = match frame {
                Submission::Mask(Mask::Bytes(b)) => b.clone(),
                Submission::Mask(Mask::Packed(p)) => p.unpack(),
                Submission::Grey(g) => {
                    BinaryImage::from_fn(g.grey.width, g.grey.height, |x, y| {
                        g.grey.data[(y * g.grey.width + x) as usize] > 127
                    })?
                }
            };
            *self.result.lock().unwrap() = Some(Oracle.label(&mask, c, want)?);
            Ok(true)
        }
        fn complete(&mut self) -> crate::Result<Labeling> {
            Ok(self.result.lock().unwrap().take().unwrap_or_default())
        }
        fn frames_in_flight(&self) -> usize {
            2
        }
        fn twin(&self) -> crate::Result<Box<dyn Labeler>> {
            let result = if self.shared {
                self.result.clone()
            } else {
                Default::default()
            };
            Ok(Box::new(InFlightOracle {
                result,
                shared: self.shared,
            }))
        }
    }

    #[test]
    fn check_in_flight_catches_results_handed_to_the_wrong_frame() {
        let (image, stats) = small_image_and_stats();
        let check = |shared| {
            let l = InFlightOracle {
                result: Default::default(),
                shared,
            };
            check_in_flight(&l, &image, Connectivity::Four, &stats)
        };
        assert_eq!(check(false), Vec::<String>::new());
        let f = check(true);
        // Every round and graph setting: the first frame got the second's (empty) result.
        assert!(f.len() >= 6, "{f:?}");
        assert!(f.iter().all(|m| m.starts_with("in flight")), "{f:?}");
        assert!(f.iter().any(|m| m.contains("count 0 vs oracle")), "{f:?}");
        // A labeler that keeps one frame at a time is not checked.
        assert!(check_in_flight(&Oracle, &image, Connectivity::Four, &stats).is_empty());
    }

    #[test]
    fn check_graphs_compares_both_paths_and_restores_the_switch() {
        let (image, stats) = small_image_and_stats();
        let check = |quiet_fallback, drops_a_row| {
            let mut l = GraphLabeler {
                graphs: true,
                quiet_fallback,
                drops_a_row,
            };
            let f = check_graphs(&mut l, &image, Connectivity::Four, &stats, None);
            assert!(l.graphs, "the switch is left as it was");
            f
        };
        assert!(check(false, false).is_empty());
        let f = check(true, false);
        // Bytes and packed, capture and replay.
        assert_eq!(
            f.iter()
                .filter(|m| m.contains("ran without its CUDA graph"))
                .count(),
            4,
            "{f:?}"
        );
        let f = check(false, true);
        assert!(f.iter().all(|m| m.contains("graph")), "{f:?}");
        assert!(f.iter().any(|m| m.contains("stats:")), "{f:?}");
        // A labeler without graphs is not checked.
        let mut oracle = Oracle;
        assert!(check_graphs(&mut oracle, &image, Connectivity::Four, &stats, None).is_empty());
    }

    #[test]
    fn quick_cpu_selftest_passes_and_names_unknown_algorithms() {
        let opts = SelftestOptions {
            quick: true,
            algorithms: vec!["lsl".into(), "nope".into()],
            verbose: false,
        };
        let report = run(&Backends::cpu_only(), &opts, |_| {});
        assert_eq!(report.algorithms, vec!["lsl".to_string()]);
        assert!(report.checks > 100);
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        assert!(report.failures[0].contains("unknown algorithm 'nope'"));
        assert!(report.failures[0].contains("lsl"), "lists the known ones");
    }

    /// A GPU algorithm asked for where the GPU cannot be used fails at once, with the reason,
    /// instead of building the whole matrix for nothing.
    #[test]
    fn gpu_algorithms_without_a_gpu_fail_at_once_with_the_reason() {
        let opts = SelftestOptions {
            quick: false,
            algorithms: vec!["ha4".into(), "bfs".into()],
            verbose: false,
        };
        let mut cases_run = 0;
        let report = run(&Backends::cpu_only(), &opts, |_| cases_run += 1);
        assert_eq!(cases_run, 0, "no case is built or run");
        assert!(report.algorithms.is_empty());
        assert_eq!(report.checks, 0);
        assert_eq!(report.failures.len(), 2, "{:?}", report.failures);
        assert!(
            report.failures[0].contains("'ha4' needs the cuda backend, which is not usable here:"),
            "{}",
            report.failures[0]
        );
        assert!(report.failures[1].contains("'bfs' is the reference"));
    }
}
