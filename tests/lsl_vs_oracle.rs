//! `lsl` against the BFS oracle: exact label images (raster-order numbering) and exact statistics,
//! for every `Want`, both connectivities, random images (proptest), the hard shapes and the
//! papers' random images; small strip heights force many strip borders so the border merge is
//! exercised by small images.

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::cpu::oracle::flood_fill;
use markerscope::ccl::shapes::{hard_shapes, random_images};
use markerscope::ccl::stats::{compare, ComponentStats};
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::frame::image::BinaryImage;
use proptest::prelude::*;

const CONNS: [Connectivity; 2] = [Connectivity::Four, Connectivity::Eight];

/// Checks every `Want` of `lsl` against the oracle; the error says what differs and where.
fn check(lsl: &mut Lsl, img: &BinaryImage, conn: Connectivity) -> Result<(), String> {
    let (labels, moments) = flood_fill(img, conn);
    let stats: Vec<ComponentStats> = moments
        .iter()
        .enumerate()
        .map(|(i, m)| m.to_stats(i as u32 + 1))
        .collect();
    let size = format!("{}x{} {conn}-conn", img.width, img.height);
    for want in [Want::Both, Want::Labels, Want::Stats] {
        let out = lsl
            .label(img, conn, want)
            .map_err(|e| format!("{size} {want:?}: error {e}"))?;
        if out.count as usize != stats.len() {
            return Err(format!(
                "{size} {want:?}: count {} vs oracle {}",
                out.count,
                stats.len()
            ));
        }
        match (&out.labels, want.labels()) {
            (Some(l), true) => {
                if (l.width, l.height) != (labels.width, labels.height) {
                    return Err(format!(
                        "{size} {want:?}: label image is {}x{}",
                        l.width, l.height
                    ));
                }
                if let Some(i) = l.data.iter().zip(&labels.data).position(|(a, b)| a != b) {
                    let w = img.width as usize;
                    return Err(format!(
                        "{size} {want:?}: label at ({}, {}) is {}, oracle {}",
                        i % w,
                        i / w,
                        l.data[i],
                        labels.data[i]
                    ));
                }
            }
            (None, false) => {}
            (got, _) => {
                return Err(format!(
                    "{size} {want:?}: label image present = {}",
                    got.is_some()
                ))
            }
        }
        match (&out.stats, want.stats()) {
            (Some(s), true) => compare(&stats, s).map_err(|e| format!("{size} {want:?}: {e}"))?,
            (None, false) => {}
            (got, _) => {
                return Err(format!(
                    "{size} {want:?}: stats present = {}",
                    got.is_some()
                ))
            }
        }
    }
    Ok(())
}

fn check_all_strips(img: &BinaryImage, name: &str) {
    // Default strips, one-row strips (every row a border) and a few odd heights.
    let mut labelers = vec![
        Lsl::new(),
        Lsl::with_strip_rows(1),
        Lsl::with_strip_rows(3),
        Lsl::with_strip_rows(7),
    ];
    for lsl in &mut labelers {
        for conn in CONNS {
            if let Err(e) = check(lsl, img, conn) {
                panic!("{name}: {e}");
            }
        }
    }
}

/// Width/height strategy biased to the awkward sizes: 1, 31–33, 63–65 and small random ones.
fn dim() -> impl Strategy<Value = u32> {
    prop_oneof![Just(1u32), 31u32..=33, 63u32..=65, 1u32..=20, 1u32..=130,]
}

/// Random image with a random density, as (width, height, bytes); bytes may be any non-zero value.
fn image() -> impl Strategy<Value = BinaryImage> {
    (dim(), dim(), 0u32..=100, any::<u64>(), any::<bool>()).prop_map(
        |(w, h, density, seed, wide)| {
            // splitmix64: cheap deterministic pixels from the seed.
            let mut state = seed;
            let mut next = move || {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            let data: Vec<u8> = (0..w * h)
                .map(|_| ((next() % 100) < density as u64) as u8)
                .collect();
            let mut img = BinaryImage::new(w, h, data).expect("valid size");
            if wide {
                // Non-canonical foreground bytes (the struct's fields are public): any non-zero is foreground.
                for v in &mut img.data {
                    *v *= 200;
                }
            }
            img
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn random_images_match_oracle(img in image(), strip_rows in prop_oneof![Just(0usize), 1usize..=9]) {
        let mut lsl = if strip_rows == 0 { Lsl::new() } else { Lsl::with_strip_rows(strip_rows) };
        for conn in CONNS {
            if let Err(e) = check(&mut lsl, &img, conn) {
                return Err(TestCaseError::fail(e));
            }
        }
    }
}

#[test]
fn hard_shapes_match_oracle() {
    for (w, h) in [
        (1, 1),
        (1, 40),
        (40, 1),
        (33, 33),
        (64, 64),
        (65, 17),
        (17, 65),
        (128, 96),
    ] {
        for shape in hard_shapes(w, h) {
            check_all_strips(&shape.image, &shape.name);
        }
    }
}

#[test]
fn papers_random_images_match_oracle() {
    for shape in random_images(130, 97, &[1, 4, 16], 0.1, 3) {
        check_all_strips(&shape.image, &shape.name);
    }
}

#[test]
fn components_crossing_many_strip_borders() {
    // A spiral and zig-zags are one component crossing every strip border many times; with 2-row
    // strips the border merge links roots across long chains of strips.
    let mut lsl = Lsl::with_strip_rows(2);
    for shape in hard_shapes(97, 97).into_iter().chain(hard_shapes(257, 190)) {
        for conn in CONNS {
            if let Err(e) = check(&mut lsl, &shape.image, conn) {
                panic!("{}: {e}", shape.name);
            }
        }
    }
}

#[test]
fn buffers_are_reused_across_sizes() {
    // One labeler over shrinking and growing images and changing connectivity/want: stale state
    // from a previous call must not leak into the next.
    let mut lsl = Lsl::with_strip_rows(5);
    let sizes = [(64, 64), (3, 200), (200, 3), (1, 1), (65, 33), (64, 64)];
    for (i, &(w, h)) in sizes.iter().enumerate() {
        for shape in random_images(w, h, &[1, 4], 0.25, i as u32) {
            for conn in CONNS {
                if let Err(e) = check(&mut lsl, &shape.image, conn) {
                    panic!("{}: {e}", shape.name);
                }
            }
        }
    }
}

#[test]
fn larger_random_images_default_strips() {
    // Enough rows for the default strip count (several strips per thread).
    let mut lsl = Lsl::new();
    for shape in random_images(301, 517, &[1, 4], 0.2, 9) {
        for conn in CONNS {
            if let Err(e) = check(&mut lsl, &shape.image, conn) {
                panic!("{}: {e}", shape.name);
            }
        }
    }
}

#[test]
fn timings_are_reported() {
    let img = BinaryImage::from_fn(50, 80, |x, y| (x * y) % 7 < 3).unwrap();
    let out = Lsl::new()
        .label(&img, Connectivity::Eight, Want::Both)
        .unwrap();
    let steps: Vec<_> = out.timings.iter().map(|t| t.step.as_str()).collect();
    assert_eq!(
        steps,
        [
            "runs+strip labeling",
            "border merge",
            "numbering",
            "label image+stats"
        ]
    );
    assert!(out.timings.iter().all(|t| t.ms >= 0.0));
}

#[test]
fn long_thin_and_odd_sized_images() {
    // 1×N, N×1 and near-degenerate widths/heights, dense and sparse, default and forced strips.
    let sizes = [
        (1u32, 20_000u32),
        (20_000, 1),
        (2, 9_000),
        (9_000, 2),
        (3, 5_000),
        (5_000, 3),
        (1027, 301),
    ];
    for (i, &(w, h)) in sizes.iter().enumerate() {
        for shape in random_images(w, h, &[1, 3], 0.5, 40 + i as u32) {
            for lsl in [&mut Lsl::new(), &mut Lsl::with_strip_rows(5)] {
                for conn in CONNS {
                    if let Err(e) = check(lsl, &shape.image, conn) {
                        panic!("{}: {e}", shape.name);
                    }
                }
            }
        }
    }
}
