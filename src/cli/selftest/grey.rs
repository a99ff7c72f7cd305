//! Grey frames thresholded where the labeler runs, against the host's level, mask and sums.

use super::cases::{oracle_of, weighted_input};
use super::labels::check_stats_only;
use super::row_filter::row_filters;
use crate::ccl::frame_set::GreySet;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use crate::ccl::{
    keep_all, AlgorithmInfo, Backends, Connectivity, Keep, LabelRequest, Labeler, RowFilter, Want,
};
use crate::frame::grey::FrameGrey;
use crate::frame::image::{BinaryImage, GrayImage, LabelImage};
use crate::frame::mask::PixelMask;
use crate::threshold::levels::global_level;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use crate::threshold::{GreyInput, StagedGrey};
use std::sync::Arc;

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
    let frame = match GreyCase::new(image, case, backends, true) {
        Ok(frame) => frame,
        Err(why) => return vec![why],
    };
    let what = frame.describe();
    let host = match HostResult::of(&frame, connectivity) {
        Ok(host) => host,
        Err(why) => return vec![format!("{what}: {why}")],
    };
    let keep: Keep<'_> = &keep_all;
    let grey = frame.frame_grey();
    let input = frame.input(&grey);
    let expected = info.thresholds_grey && (!frame.subpixel || info.subpixel_on_device);
    let subpixel = frame.subpixel.then_some(keep);
    let request = LabelRequest::new(&input, connectivity, Want::Stats);
    let out = match labeler.label_grey(request, subpixel) {
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
    if frame.on_device.as_ref().is_some_and(|d| !d.on_device()) {
        failures.push(format!(
            "{what}: the frame on the device was copied to the host"
        ));
    }
    if out.level != host.level {
        failures.push(format!(
            "{what}: level {}, the host's is {}",
            out.level, host.level
        ));
    }
    failures.extend(check_stats_only(&what, &out.labeling, &host.stats));
    failures.extend(check_centroids(
        &what,
        &frame,
        &host,
        (out.centroids.as_deref(), keep),
    ));
    failures
}

/// Checks `label_grey_set` (the frames of a frame set labeled as one image) against each
/// frame's host result: 2 to 5 frames made from `image` (its rows turned round by a share of
/// the height a frame, every other frame mirrored), thresholded as `case` says for
/// `check_grey` but without a pixel mask (sets have none). The labeler must label the set
/// exactly when the registry says so (`frame_sets`); each frame's rows and centroids must be
/// the host's for that frame alone.
pub fn check_grey_set(
    labeler: &mut dyn Labeler,
    info: &AlgorithmInfo,
    image: &BinaryImage,
    connectivity: Connectivity,
    case: usize,
    backends: &Backends,
) -> Vec<String> {
    let count = 2 + case % 4;
    let mut frames = Vec::with_capacity(count);
    for k in 0..count {
        let turned = turned_round(image, k, count);
        match GreyCase::new(&turned, case, backends, false) {
            Ok(frame) => frames.push(frame),
            Err(why) => return vec![why],
        }
    }
    let what = format!("frame set of {count}, {}", frames[0].describe());
    let mut hosts = Vec::with_capacity(count);
    for frame in &frames {
        match HostResult::of(frame, connectivity) {
            Ok(host) => hosts.push(host),
            Err(why) => return vec![format!("{what}: {why}")],
        }
    }
    let greys: Vec<FrameGrey> = frames.iter().map(GreyCase::frame_grey).collect();
    let inputs: Vec<GreyInput<'_>> = frames
        .iter()
        .zip(&greys)
        .map(|(f, grey)| f.input(grey))
        .collect();
    // Every other case with the area and aspect limits of `row_filters`, applied on the device.
    let filter = match case % 2 {
        0 => row_filters(&hosts[0].stats, case)[0],
        _ => RowFilter::default(),
    };
    let claims = labeler.set_row_filter(filter);
    let accepts = |c: &ComponentStats| filter.accepts(c);
    let keeps: Vec<Keep<'_>> = vec![&accepts; count];
    let subpixel = frames[0].subpixel;
    let set = GreySet {
        frames: &inputs,
        connectivity,
        subpixel,
    };
    let out = labeler.label_grey_set(set, &keeps);
    labeler.set_row_filter(RowFilter::default());
    let what = format!("{what}, row filter {filter:?}");
    let out = match out {
        Err(e) => return vec![format!("{what}: error: {e}")],
        Ok(None) if info.frame_sets => {
            return vec![format!(
                "{what}: declined, but the registry says it labels frame sets"
            )]
        }
        Ok(None) => return Vec::new(),
        Ok(Some(_)) if !info.frame_sets => {
            return vec![format!(
                "{what}: done, but the registry says it labels each frame alone"
            )]
        }
        Ok(Some(out)) => out,
    };
    if out.len() != count {
        return vec![format!("{what}: {} results", out.len())];
    }
    let mut failures = Vec::new();
    for (k, ((labeling, centroids), (frame, host))) in
        out.iter().zip(frames.iter().zip(&hosts)).enumerate()
    {
        let what = format!("{what}, frame {k}");
        if frame.on_device.as_ref().is_some_and(|d| !d.on_device()) {
            failures.push(format!(
                "{what}: the frame on the device was copied to the host"
            ));
        }
        if labeling.count as usize != host.stats.len() {
            failures.push(format!(
                "{what}: count {}, the host's {}",
                labeling.count,
                host.stats.len()
            ));
        }
        let kept: Vec<ComponentStats>;
        let expected = match labeling.filtered {
            Some(f) if f == filter => {
                kept = host
                    .stats
                    .iter()
                    .filter(|c| filter.accepts(c))
                    .copied()
                    .collect();
                &kept[..]
            }
            Some(f) => {
                failures.push(format!("{what}: filtered with {f:?}"));
                continue;
            }
            None if claims && !filter.is_unlimited() => {
                failures.push(format!("{what}: the rows were not filtered"));
                continue;
            }
            None => &host.stats[..],
        };
        failures.extend(check_stats_only(&what, labeling, expected));
        let got = (centroids.as_deref(), &accepts as Keep<'_>);
        failures.extend(check_centroids(&what, frame, host, got));
    }
    failures
}

/// Frame `k` of `count` made from `image`: its rows turned round by k × height / count, and
/// mirrored left to right when k is odd.
fn turned_round(image: &BinaryImage, k: usize, count: usize) -> BinaryImage {
    let (w, h) = (image.width as usize, image.height as usize);
    let shift = k * h / count.max(1);
    let mut out = image.clone();
    for y in 0..h {
        let from = &image.data[((y + shift) % h) * w..][..w];
        let to = &mut out.data[y * w..][..w];
        to.copy_from_slice(from);
        if k % 2 == 1 {
            to.reverse();
        }
    }
    out
}

/// The grey frame of one case and how it is to be thresholded.
struct GreyCase {
    grey: GrayImage,
    /// The same frame on the device, as a decoder leaves it (GPU backends only).
    on_device: Option<FrameGrey>,
    invert: bool,
    spec: ThresholdSpec,
    subpixel: bool,
    pixel_mask: Option<Arc<PixelMask>>,
    staged: Option<StagedGrey>,
}

impl GreyCase {
    /// `masked`: every other case masks a region out (frame sets have no pixel mask).
    fn new(
        image: &BinaryImage,
        case: usize,
        backends: &Backends,
        masked: bool,
    ) -> Result<GreyCase, String> {
        let (mut grey, _, invert) = weighted_input(image, case % 2);
        // A quarter of the cases hand the labeler a page-locked copy of the frame, as the
        // capture thread does (`Backends::stage_grey`), a quarter the frame page-locked where
        // it is, as a source's frame pool does (`source::frame_pool`), a quarter the frame in
        // GPU memory as a hardware decoder leaves it (`frame::grey`: pitched rows written on a
        // stream of their own), and the others let it stage the frame itself.
        let mut on_device = None;
        let staged = match (case / 2) % 4 {
            0 => backends.stage_grey(&grey),
            1 => {
                if let Some(locker) = backends.page_locker() {
                    grey.lock(locker.as_ref());
                }
                None
            }
            2 => {
                on_device = decoded_on_device(&grey, backends)?;
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
        let pixel_mask = if masked && case % 2 == 1 {
            Some(Arc::new(diamond_and_stripes(image.width, image.height)?))
        } else {
            None
        };
        Ok(GreyCase {
            on_device,
            grey,
            invert,
            spec,
            subpixel: case % 3 == 0,
            pixel_mask,
            staged,
        })
    }

    /// The frame as the labeler gets it: on the device where the case put it there.
    fn frame_grey(&self) -> FrameGrey {
        match &self.on_device {
            Some(on_device) => on_device.clone(),
            None => FrameGrey::from(self.grey.clone()),
        }
    }

    /// The labeler's input of the case with its frame `grey` (`frame_grey`).
    fn input<'a>(&'a self, grey: &'a FrameGrey) -> GreyInput<'a> {
        GreyInput {
            grey,
            threshold: &self.spec,
            invert: self.invert,
            pixel_mask: self.pixel_mask.as_ref(),
            staged: self.staged.as_ref(),
        }
    }

    /// The case in a failure message.
    fn describe(&self) -> String {
        format!(
            "grey input (threshold {}{}{}{}{}{}{})",
            self.spec,
            if self.invert { ", inverted" } else { "" },
            if self.subpixel { ", sub-pixel" } else { "" },
            if self.pixel_mask.is_some() {
                ", masked"
            } else {
                ""
            },
            if self.staged.is_some() {
                ", staged"
            } else {
                ""
            },
            if self.grey.page_locked() {
                ", page-locked"
            } else {
                ""
            },
            if self.on_device.is_some() {
                ", on the device"
            } else {
                ""
            }
        )
    }
}

/// A pixel mask that drops a diamond in the middle and a band of diagonal stripes.
fn diamond_and_stripes(w: u32, h: u32) -> Result<PixelMask, String> {
    let keep = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .map(|(x, y)| {
            let diamond = (2 * x).abs_diff(w) + (2 * y).abs_diff(h) < w.min(h);
            let stripe = (x + y) % 7 < 2;
            u8::from(!diamond && !stripe)
        })
        .collect();
    PixelMask::from_keep(w, h, keep).map_err(|e| format!("grey input: the test mask failed: {e}"))
}

/// What the host makes of a grey case: the level, and the oracle's labels of the mask it gives.
struct HostResult {
    level: u8,
    levels: ThresholdLevels,
    labels: LabelImage,
    stats: Vec<ComponentStats>,
}

impl HostResult {
    fn of(frame: &GreyCase, connectivity: Connectivity) -> Result<HostResult, String> {
        let Some(level) = global_level(&frame.grey, &frame.spec, frame.invert) else {
            return Err("no global level on the host".into());
        };
        let levels = ThresholdLevels::Global(level);
        let mut mask = levels
            .mask(&frame.grey, frame.invert)
            .map_err(|e| format!("the host mask failed: {e}"))?;
        if let Some(m) = &frame.pixel_mask {
            m.apply(Some(&mut mask.data), None);
        }
        let (labels, stats) = oracle_of(&mask, connectivity);
        Ok(HostResult {
            level,
            levels,
            labels,
            stats,
        })
    }
}

/// The centroids came back exactly when asked for, equal to the CPU's over the host's labels.
fn check_centroids(
    what: &str,
    frame: &GreyCase,
    host: &HostResult,
    (got, keep): (Option<&[SubpixelCentroid]>, Keep<'_>),
) -> Option<String> {
    match (frame.subpixel, got) {
        (false, None) => None,
        (false, Some(_)) => Some(format!("{what}: centroids that were not asked for")),
        (true, None) => Some(format!("{what}: no centroids")),
        (true, Some(got)) => {
            let weights = GreyWeights {
                grey: &frame.grey,
                levels: &host.levels,
                invert: frame.invert,
            };
            match weights.centroids(&host.labels, &host.stats, keep) {
                Err(e) => Some(format!("{what}: the CPU reference failed: {e}")),
                Ok(expected) if expected != got => {
                    let first = expected.iter().zip(got).position(|(e, g)| e != g);
                    Some(format!(
                        "{what}: {} centroids, {} expected; first difference at row {first:?}",
                        got.len(),
                        expected.len()
                    ))
                }
                Ok(_) => None,
            }
        }
    }
}

/// `grey` on the device as a hardware decoder leaves it: rows of a wider pitch, written on a
/// stream of their own (`gpu::device_plane`); None without a GPU.
#[cfg(feature = "cuda")]
fn decoded_on_device(grey: &GrayImage, backends: &Backends) -> Result<Option<FrameGrey>, String> {
    use crate::gpu::device_plane::{copy_rows, CudaPlane, Rows};
    use cudarc::driver::{sys, DevicePtrMut};

    let Ok(gpu) = backends.gpu() else {
        return Ok(None);
    };
    let fail = |e: &dyn std::fmt::Display| format!("a frame on the device: {e}");
    let (w, h) = (grey.width as usize, grey.height as usize);
    let pitch = w.div_ceil(512) * 512;
    let stream = gpu.ctx.new_stream().map_err(|e| fail(&e))?;
    // SAFETY: written whole (w of each pitch's bytes: the rest is never read) below.
    let mut memory = unsafe { stream.alloc::<u8>(pitch * h.max(1)) }.map_err(|e| fail(&e))?;
    let (address, sync) = memory.device_ptr_mut(&stream);
    drop(sync);
    let params = copy_rows(
        Rows::Host(grey.data.as_ptr().cast_mut().cast(), w),
        Rows::Device(address, pitch),
        w,
        h,
    );
    let cu_stream = stream.cu_stream();
    // SAFETY: `grey.data` holds w × h bytes (pageable: the copy has read them when the call
    // returns); the device memory pitch × h, kept by the plane with the stream that writes it
    // (freed there, behind the plane's reads).
    let plane = unsafe {
        if w * h > 0 {
            sys::cuMemcpy2DAsync_v2(&params, cu_stream)
                .result()
                .map_err(|e| fail(&e))?;
        }
        let keep = Box::new((memory, stream));
        CudaPlane::after_decoder_copy(gpu.ctx.cu_ctx(), cu_stream, address, pitch, keep)
            .map_err(|e| fail(&e))?
    };
    Ok(Some(FrameGrey::on_gpu(
        grey.width,
        grey.height,
        Box::new(plane),
    )))
}

/// Without CUDA there is no device to hold the frame.
#[cfg(not(feature = "cuda"))]
fn decoded_on_device(_: &GrayImage, _: &Backends) -> Result<Option<FrameGrey>, String> {
    Ok(None)
}
