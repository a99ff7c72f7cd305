//! The labeling paths against the oracle: each `Want`, CUDA graphs and frames in flight.

use crate::ccl::cpu::oracle::Oracle;
use crate::ccl::partition::same_partition;
use crate::ccl::stats::{compare, ComponentStats};
use crate::ccl::subpixel::weighted_centroids;
use crate::ccl::{
    keep_all, Connectivity, LabelRequest, Labeler, Labeling, Mask, Submission, Want,
    CUDA_GRAPH_STEP,
};
use crate::frame::grey::FrameGrey;
use crate::frame::image::{BinaryImage, GrayImage};
use crate::frame::page_lock::PageLocker;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use crate::threshold::GreyInput;

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

/// A `Want::Stats` result: no label image, and the oracle's statistics.
pub(super) fn check_stats_only(
    what: &str,
    out: &Labeling,
    oracle_stats: &[ComponentStats],
) -> Vec<String> {
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
            let mask = mask.map_or(Mask::Bytes(image), Mask::Packed);
            let out = labeler.label_mask(LabelRequest::new(mask, connectivity, Want::Stats));
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

/// Frames in flight (`Labeler::submit`, `complete`) against the oracle,
/// for a labeler that keeps more than one: as many instances as it keeps (`twin`), each with a
/// frame submitted before the first is completed, in turn the byte mask, the bit-packed mask,
/// the grey frame (thresholded where the labeler runs) and the grey frame with its sub-pixel
/// centroids, alternately the image and an empty one of its size (a result handed to the wrong
/// frame shows), with CUDA graphs off and on. Statistics and centroids exact, and the frames
/// complete in the order they were submitted. A labeler may decline a form (the blocking calls
/// label it), not every one. Labelers that keep one frame pass.
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
            Ok(g) => greys.push(FrameGrey::from(g)),
            Err(e) => return vec![format!("frames in flight: the grey frame: {e}")],
        }
    }
    let fixed = ThresholdSpec::Fixed(127);
    // The image's centroids: every foreground pixel weighs 255 − 127.
    let centroids = match Oracle.label(image, connectivity, Want::Both) {
        Ok(Labeling {
            labels: Some(labels),
            ..
        }) => weighted_centroids(
            &greys[0],
            &labels,
            oracle_stats,
            &ThresholdLevels::Global(127),
            false,
        ),
        Ok(_) => return vec!["frames in flight: the oracle gave no label image".into()],
        Err(e) => return vec![format!("frames in flight: the oracle: {e}")],
    };
    let centroids = match centroids {
        Ok(c) => c,
        Err(e) => return vec![format!("frames in flight: the oracle's centroids: {e}")],
    };
    let mut failures = Vec::new();
    let mut taken = 0;
    for graphs in [false, true] {
        for round in 0..4 {
            let mut submitted = Vec::new();
            for (j, instance) in instances.iter_mut().enumerate() {
                instance.set_cuda_graphs(graphs);
                let content = j % 2;
                let grey = GreyInput {
                    grey: &greys[content],
                    threshold: &fixed,
                    invert: false,
                    pixel_mask: None,
                    staged: None,
                };
                let (form, frame) = match (j + round) % 4 {
                    0 => ("bytes", Submission::Mask(Mask::Bytes(frames[content]))),
                    1 => ("packed", Submission::Mask(Mask::Packed(&packed[content]))),
                    2 => ("grey", Submission::Grey(grey)),
                    _ => ("grey with centroids", Submission::WeightedGrey(grey)),
                };
                let weighted = matches!(frame, Submission::WeightedGrey(_));
                let what = format!(
                    "in flight {}/{k}, {form}, {}, graphs {}",
                    j + 1,
                    ["image", "empty"][content],
                    if graphs { "on" } else { "off" }
                );
                match instance.submit(LabelRequest::new(frame, connectivity, Want::Stats)) {
                    Ok(true) => submitted.push((j, what, content, weighted)),
                    Ok(false) => {}
                    Err(e) => failures.push(format!("{what}: submit: {e}")),
                }
            }
            for (j, what, content, weighted) in submitted {
                taken += 1;
                let expected = if content == 0 { oracle_stats } else { &[] };
                let (out, got) = match instances[j].complete(&keep_all) {
                    Ok(completed) => completed,
                    Err(e) => {
                        failures.push(format!("{what}: complete: {e}"));
                        continue;
                    }
                };
                failures.extend(check_count_and_stats(&what, &out, expected));
                let expected_centroids = if content == 0 { &centroids[..] } else { &[] };
                if weighted && got.as_deref() != Some(expected_centroids) {
                    failures.push(format!(
                        "{what}: centroids {:?} differ from the oracle's {}",
                        got.map(|c| c.len()),
                        expected_centroids.len()
                    ));
                }
            }
        }
    }
    if taken == 0 {
        failures.push(format!(
            "frames in flight: keeps {k} but took no frame in any form"
        ));
    }
    failures
}
