//! Rust wrapper of `kernels/subpixel.cu`: grey-weighted (sub-pixel) centroids on the GPU, over
//! a device label image numbered 1..=count in raster order (what a labeler leaves on the device
//! for `Want::Both`). The sums are exact integers, the same as the CPU's
//! `subpixel::weighted_centroids`, so selftest compares the two bit for bit.
//!
//! Use from a labeler: upload the grey frame (`threshold::DeviceGrey`) and `set_weights` (the
//! levels; per-pixel ones go up too) with the mask, label with `Want::Both`, read the component
//! count, then `launch` and `fetch`.

use super::common::{cleared_sums, rows_launch};
use super::threshold::DeviceGrey;
use super::{cuda_err, Gpu, KernelFile};
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid, ThresholdLevels};
use crate::ccl::Keep;
use crate::error::{Error, Result};
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use std::sync::Arc;

/// Reusable device buffers; each grows to the largest frame (or component count) seen.
pub struct SubpixelStage {
    gpu: Arc<Gpu>,
    accumulate: CudaFunction,
    /// Per-pixel levels (adaptive threshold); a one-element stand-in otherwise.
    levels: CudaSlice<i32>,
    /// Σ w, Σ w·x, Σ w·y per component.
    sums: Option<CudaSlice<u64>>,
    /// What `set_weights` was told.
    uploaded: Option<Uploaded>,
    host_sums: Vec<u64>,
}

#[derive(Clone, Copy)]
struct Uploaded {
    width: u32,
    height: u32,
    per_pixel: bool,
    level: i32,
    invert: bool,
}

impl SubpixelStage {
    pub fn new(gpu: Arc<Gpu>) -> Result<SubpixelStage> {
        let accumulate = gpu
            .module(KernelFile::Subpixel)
            .load_function("sp_accumulate")
            .map_err(|e| cuda_err("loading kernel sp_accumulate", e))?;
        let levels = gpu
            .stream
            .alloc_zeros::<i32>(1)
            .map_err(|e| cuda_err("allocating the level buffer", e))?;
        Ok(SubpixelStage {
            gpu,
            accumulate,
            levels,
            sums: None,
            uploaded: None,
            host_sums: Vec::new(),
        })
    }

    /// How the grey frame (uploaded by the caller) was thresholded: the global level, or the
    /// per-pixel levels of an adaptive threshold, whose upload this queues on the GPU's stream.
    pub fn set_weights(&mut self, weights: &GreyWeights<'_>) -> Result<()> {
        let grey = weights.grey;
        let pixels = grey.len();
        let s = &self.gpu.stream;
        let alloc_err = |e| cuda_err("allocating the threshold levels", e);
        let (per_pixel, level) = match weights.levels {
            ThresholdLevels::Global(t) => (false, *t as i32),
            ThresholdLevels::Local {
                width,
                height,
                levels,
            } => {
                if (*width, *height) != (grey.width, grey.height) || levels.len() != pixels {
                    return Err(Error::Invalid(format!(
                        "sub-pixel centroid: the threshold levels are {width}x{height} but the \
                         grey frame is {}x{}",
                        grey.width, grey.height
                    )));
                }
                if self.levels.len() < pixels {
                    // SAFETY: written by the upload below before any read.
                    self.levels = unsafe { s.alloc::<i32>(pixels) }.map_err(alloc_err)?;
                }
                s.memcpy_htod(levels, &mut self.levels.slice_mut(0..pixels))
                    .map_err(|e| cuda_err("uploading the threshold levels", e))?;
                (true, 0)
            }
        };
        self.uploaded = Some(Uploaded {
            width: grey.width,
            height: grey.height,
            per_pixel,
            level,
            invert: weights.invert,
        });
        Ok(())
    }

    /// Queues the accumulation over `labels` (`width × height`, numbered 1..=count; other
    /// values are ignored) and the download of the sums. `grey` must hold the frame
    /// `set_weights` described.
    pub fn launch(
        &mut self,
        labels: &CudaSlice<u32>,
        grey: &DeviceGrey,
        width: u32,
        height: u32,
        count: u32,
    ) -> Result<()> {
        let missing = || {
            Error::Invalid(format!(
                "sub-pixel centroid: no {width}x{height} grey frame was uploaded for this label image"
            ))
        };
        let up = self
            .uploaded
            .filter(|u| (u.width, u.height) == (width, height))
            .ok_or_else(missing)?;
        let grey = grey.get(width, height).ok_or_else(missing)?;
        if labels.len() < width as usize * height as usize {
            return Err(Error::Invalid(format!(
                "sub-pixel centroid: the label buffer holds {} pixels, {width}x{height} needs more",
                labels.len()
            )));
        }
        let n = 3 * count as usize;
        self.host_sums.resize(n, 0);
        if n == 0 {
            return Ok(());
        }
        let sums = cleared_sums(&self.gpu, &mut self.sums, n, "centroid sums")?;
        let s = &self.gpu.stream;
        let (per_pixel, invert) = (up.per_pixel as i32, up.invert as i32);
        // SAFETY: matches `sp_accumulate` in subpixel.cu; labels and grey (and levels when
        // per_pixel) hold width × height values, sums 3 × count (labels above count skipped).
        unsafe {
            s.launch_builder(&self.accumulate)
                .arg(labels)
                .arg(grey)
                .arg(&self.levels)
                .arg(&per_pixel)
                .arg(&up.level)
                .arg(&invert)
                .arg(&mut *sums)
                .arg(&count)
                .arg(&width)
                .arg(&height)
                .launch(rows_launch(height))
                .map_err(|e| cuda_err("launching sp_accumulate", e))?;
        }
        s.memcpy_dtoh(&sums.slice(0..n), &mut self.host_sums[..])
            .map_err(|e| cuda_err("downloading the centroid sums", e))
    }

    /// The centroids of the `stats` rows (labeled 1..=count) that `keep` accepts, from the sums
    /// `launch` queued for every component. Synchronizes the stream.
    pub fn fetch(&self, stats: &[ComponentStats], keep: Keep<'_>) -> Result<Vec<SubpixelCentroid>> {
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| cuda_err("waiting for the centroid sums", e))?;
        stats
            .iter()
            .filter(|st| keep(st))
            .map(|st| {
                let row = st.label.checked_sub(1).map(|k| 3 * k as usize);
                match row.and_then(|i| self.host_sums.get(i..i + 3)) {
                    Some(&[w, wx, wy]) if w > 0 => {
                        Ok(SubpixelCentroid::from_sums(st.label, w, wx, wy))
                    }
                    _ => Err(Error::Invalid(format!(
                        "sub-pixel centroid: component {} has no weighted pixel on the GPU",
                        st.label
                    ))),
                }
            })
            .collect()
    }
}
