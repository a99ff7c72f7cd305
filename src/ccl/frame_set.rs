//! Frame sets: the frames of several sources of one size labeled as one image, in one
//! submission (`Labeler::submit_grey_set`), so that eight small frames cost about what one frame
//! of their pixels costs instead of eight frames' launches, waits and hand-overs.
//!
//! The frames are stacked top to bottom with `GAP_ROWS` background rows between them: no
//! component joins two frames, and labels numbered in raster order of the stacked image are
//! frame-major. Each frame is thresholded with its own level, and its sub-pixel sums are taken
//! with its own rows counted from 0; `SetLayout::split` then gives each frame the rows and
//! centroids it has alone: its rows moved up to its own first row, its labels counted from 1.
//! The statistics are integer sums, so moved rows equal the frame's own bit for bit.

use super::stats::ComponentStats;
use super::subpixel::SubpixelCentroid;
use super::Connectivity;
use crate::error::{Error, Result};
use crate::frame::image::BinaryImage;
use crate::threshold::GreyInput;

/// A frame set for `Labeler::submit_grey_set`: grey frames of one size, with one threshold and
/// polarity (each frame gets its own level) and no pixel mask.
#[derive(Clone, Copy)]
pub struct GreySet<'a> {
    pub frames: &'a [GreyInput<'a>],
    pub connectivity: Connectivity,
    /// With the sub-pixel centroids (of the rows each frame's keep accepts, given to
    /// `Labeler::complete_grey_set`).
    pub subpixel: bool,
}

impl GreySet<'_> {
    /// The layout of the stacked image: the first frame's size (`Labeler::submit_grey_set`
    /// refuses frames of another).
    pub fn layout(&self) -> SetLayout {
        let (width, height) = self
            .frames
            .first()
            .map_or((0, 0), |f| (f.grey.width, f.grey.height));
        SetLayout {
            width,
            height,
            frames: self.frames.len() as u32,
        }
    }
}

/// Background rows between two frames of a set: one keeps 8-connected components apart.
pub const GAP_ROWS: u32 = 1;

/// Where the frames of a set lie in the stacked image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetLayout {
    /// Each frame's size.
    pub width: u32,
    pub height: u32,
    pub frames: u32,
}

/// One frame's part of a set's results: its rows and, when asked, their sub-pixel centroids.
/// `SetLayout::split` gives it with the frame's count (all its components).
pub type FramePart = (Vec<ComponentStats>, Option<Vec<SubpixelCentroid>>);

impl SetLayout {
    /// Rows from one frame's first row to the next's.
    pub fn pitch_rows(&self) -> u32 {
        self.height + GAP_ROWS
    }

    /// The height of the stacked image; an error when it does not fit the labelers' u32 rows.
    pub fn stacked_height(&self) -> Result<u32> {
        let rows =
            u64::from(self.frames.max(1)) * u64::from(self.pitch_rows()) - u64::from(GAP_ROWS);
        u32::try_from(rows).map_err(|_| {
            Error::Invalid(format!(
                "a set of {} frames of {}x{} is too tall to label as one image",
                self.frames, self.width, self.height
            ))
        })
    }

    /// The first row of frame `k` in the stacked image.
    pub fn first_row(&self, k: u32) -> u64 {
        u64::from(k) * u64::from(self.pitch_rows())
    }

    /// The labels before each frame of the set and, last, the count (`set_frame_starts` on the
    /// device), from every row of the stacked image (labels 1..=n in raster order).
    pub fn starts_of(&self, rows: &[ComponentStats]) -> Vec<u32> {
        let mut starts: Vec<u32> = (0..self.frames)
            .map(|k| rows.partition_point(|r| u64::from(r.top) < self.first_row(k)) as u32)
            .collect();
        starts.push(rows.len() as u32);
        starts
    }

    /// Splits rows of the stacked image and their sub-pixel centroids (one per row, with y
    /// counted from each frame's own first row; or none) into each frame's, as each frame
    /// labeled alone gives them: every row (labels 1..=n in raster order), or the rows a filter
    /// kept, each with its own label. `starts`: the labels before each frame, then the count
    /// (`starts_of`). Returns each frame's part and its count. An error where a row reaches
    /// into a gap or out of the set, or its label is not its frame's (the labeling joined
    /// frames: not expected).
    pub fn split(
        &self,
        rows: Vec<ComponentStats>,
        centroids: Option<Vec<SubpixelCentroid>>,
        starts: &[u32],
    ) -> Result<Vec<(FramePart, u32)>> {
        if centroids.as_ref().is_some_and(|c| c.len() != rows.len()) {
            return Err(Error::Invalid(
                "a frame set's sub-pixel centroids do not match its rows".into(),
            ));
        }
        let frames = self.frames as usize;
        if starts.len() != frames + 1 || starts.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::Invalid(format!(
                "frame set: {} label starts for {frames} frames",
                starts.len()
            )));
        }
        let with_centroids = centroids.is_some();
        let mut parts: Vec<(FramePart, u32)> = (0..frames)
            .map(|k| {
                let part = (Vec::new(), with_centroids.then(Vec::new));
                (part, starts[k + 1] - starts[k])
            })
            .collect();
        let mut centroids = centroids.map(Vec::into_iter);
        let mut frame = 0;
        for mut row in rows {
            let k = (u64::from(row.top) / u64::from(self.pitch_rows())) as usize;
            let first = self.first_row(k as u32);
            let inside = k < frames
                && k >= frame
                && u64::from(row.top) + u64::from(row.height) <= first + u64::from(self.height)
                && row.label > starts[k]
                && row.label <= starts[k + 1];
            if !inside {
                return Err(Error::Invalid(format!(
                    "frame set: component {} (rows {}..{}) is not within one frame of {} rows",
                    row.label,
                    row.top,
                    u64::from(row.top) + u64::from(row.height),
                    self.height
                )));
            }
            frame = k;
            let before = starts[k];
            row.label -= before;
            row.top -= first as u32;
            row.sum_y -= row.area * first;
            row.centroid_y = row.sum_y as f64 / row.area as f64;
            let ((mine, their_centroids), _) = &mut parts[k];
            mine.push(row);
            if let (Some(all), Some(theirs)) = (centroids.as_mut(), their_centroids.as_mut()) {
                let mut c = all.next().expect("as many centroids as rows");
                c.label -= before;
                theirs.push(c);
            }
        }
        Ok(parts)
    }

    /// The stacked image of `masks` (each this layout's size), the gap rows background: what a
    /// labeler labels for the set (for the checks; the GPU makes it on the device).
    pub fn stack(&self, masks: &[&BinaryImage]) -> Result<BinaryImage> {
        if masks.len() != self.frames as usize
            || masks
                .iter()
                .any(|m| (m.width, m.height) != (self.width, self.height))
        {
            return Err(Error::Invalid(format!(
                "frame set: {} masks for a set of {} frames of {}x{}",
                masks.len(),
                self.frames,
                self.width,
                self.height
            )));
        }
        let mut out = BinaryImage::zeros(self.width, self.stacked_height()?)?;
        let w = self.width as usize;
        for (k, m) in masks.iter().enumerate() {
            let at = self.first_row(k as u32) as usize * w;
            out.data[at..at + m.data.len()].copy_from_slice(&m.data);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::cpu::oracle::Oracle;
    use crate::ccl::{Connectivity, Labeler, Want};

    fn rows_of(mask: &BinaryImage, connectivity: Connectivity) -> Vec<ComponentStats> {
        let labeling = Oracle.label(mask, connectivity, Want::Stats).unwrap();
        labeling.stats.unwrap()
    }

    fn random_mask(width: u32, height: u32, seed: u64, density: u64) -> BinaryImage {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut m = BinaryImage::zeros(width, height).unwrap();
        for v in m.data.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *v = u8::from(state % 100 < density);
        }
        m
    }

    #[test]
    fn a_stacked_set_split_gives_each_frame_its_own_rows() {
        for (width, height, frames, density) in [
            (37, 11, 3, 45),
            (64, 1, 5, 60),
            (5, 9, 1, 50),
            (33, 17, 8, 70),
            (20, 6, 4, 0),
        ] {
            let layout = SetLayout {
                width,
                height,
                frames,
            };
            let masks: Vec<BinaryImage> = (0..frames)
                .map(|k| random_mask(width, height, u64::from(k) + 7, density))
                .collect();
            let refs: Vec<&BinaryImage> = masks.iter().collect();
            let stacked = layout.stack(&refs).unwrap();
            assert_eq!(stacked.height, frames * (height + GAP_ROWS) - GAP_ROWS);
            for connectivity in [Connectivity::Four, Connectivity::Eight] {
                let all = rows_of(&stacked, connectivity);
                let starts = layout.starts_of(&all);
                // Every row, and the rows a filter keeps (each with its own label).
                let kept: Vec<ComponentStats> =
                    all.iter().filter(|r| r.area >= 3).copied().collect();
                let parts = layout.split(all, None, &starts).unwrap();
                let kept_parts = layout.split(kept, None, &starts).unwrap();
                assert_eq!(parts.len(), frames as usize);
                for (k, ((rows, centroids), count)) in parts.into_iter().enumerate() {
                    let alone = rows_of(&masks[k], connectivity);
                    assert_eq!(rows, alone, "{width}x{height} frame {k} of {frames}");
                    assert_eq!(count as usize, alone.len());
                    assert!(centroids.is_none());
                    let alone_kept: Vec<ComponentStats> =
                        alone.iter().filter(|r| r.area >= 3).copied().collect();
                    assert_eq!(kept_parts[k].0 .0, alone_kept);
                    assert_eq!(kept_parts[k].1, count);
                }
            }
        }
    }

    #[test]
    fn centroids_follow_their_rows_and_their_labels_count_from_one_a_frame() {
        let layout = SetLayout {
            width: 8,
            height: 3,
            frames: 2,
        };
        let row = |label, top| ComponentStats {
            label,
            left: 0,
            top,
            width: 1,
            height: 1,
            area: 1,
            sum_x: 0,
            sum_y: u64::from(top),
            centroid_x: 0.0,
            centroid_y: f64::from(top),
        };
        let centroid = |label, y| SubpixelCentroid {
            label,
            weight: 1,
            sum_wx: 0,
            sum_wy: y,
            x: 0.0,
            y: y as f64,
        };
        let rows = vec![row(1, 0), row(2, 2), row(3, 4), row(4, 6)];
        let centroids = vec![
            centroid(1, 0),
            centroid(2, 2),
            centroid(3, 0),
            centroid(4, 2),
        ];
        let starts = layout.starts_of(&rows);
        assert_eq!(starts, vec![0, 2, 4]);
        let parts = layout.split(rows, Some(centroids), &starts).unwrap();
        let ((first, _), (second, second_centroids)) = (&parts[0].0, &parts[1].0);
        assert_eq!(*first, vec![row(1, 0), row(2, 2)]);
        assert_eq!(*second, vec![row(1, 0), row(2, 2)]);
        assert_eq!(second_centroids.as_ref().unwrap()[1], centroid(2, 2));
        // A row in the gap joined two frames: refused, never split wrongly.
        let one = [0, 1, 1];
        assert!(layout.split(vec![row(1, 3)], None, &one).is_err());
        let tall = ComponentStats {
            height: 3,
            ..row(1, 2)
        };
        assert!(layout.split(vec![tall], None, &one).is_err());
        assert!(layout
            .split(vec![row(1, 0)], Some(Vec::new()), &one)
            .is_err());
        // A label outside its frame's, and starts that do not fit the set.
        assert!(layout.split(vec![row(2, 0)], None, &one).is_err());
        assert!(layout.split(vec![row(1, 0)], None, &[0, 1]).is_err());
    }

    #[test]
    fn a_set_too_tall_for_u32_rows_is_an_error() {
        let layout = SetLayout {
            width: 4,
            height: u32::MAX / 2,
            frames: 3,
        };
        assert!(layout.stacked_height().is_err());
    }
}
