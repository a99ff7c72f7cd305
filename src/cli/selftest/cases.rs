//! The images the self-test checks, the oracle's answer on them, and the grey frames that
//! threshold back to them.

use crate::ccl::cpu::oracle::flood_fill;
use crate::ccl::shapes::{hard_shapes, random_images, Shape};
use crate::ccl::stats::ComponentStats;
use crate::ccl::Connectivity;
use crate::frame::image::{BinaryImage, GrayImage, LabelImage};
use crate::threshold::levels::ThresholdLevels;

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

/// An image with the oracle's answer on it: what the checks hold a labeler to.
pub struct Case<'a> {
    pub image: &'a BinaryImage,
    pub connectivity: Connectivity,
    pub labels: &'a LabelImage,
    pub stats: &'a [ComponentStats],
}

/// The oracle's label image and statistics of `image` (labels numbered in raster order).
pub fn oracle_of(
    image: &BinaryImage,
    connectivity: Connectivity,
) -> (LabelImage, Vec<ComponentStats>) {
    let (labels, moments) = flood_fill(image, connectivity);
    let stats = moments
        .iter()
        .enumerate()
        .map(|(i, m)| m.to_stats(i as u32 + 1))
        .collect();
    (labels, stats)
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
