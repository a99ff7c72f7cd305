use super::runs::extract_runs;
use super::*;
use crate::ccl::descriptors::ShapeSums;
use crate::frame::image::BinaryImage;

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
                let rows_all = ShapeRows {
                    keep: &crate::ccl::keep_all,
                    weights: None,
                };
                let (got, _, sums) = lsl
                    .label_shapes(
                        LabelRequest::new(Mask::Bytes(image), c, Want::Stats),
                        rows_all,
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
                let request = LabelRequest::new(Mask::Packed(&packed), c, Want::Both);
                let rows_big = ShapeRows {
                    keep: &big,
                    weights: None,
                };
                let (got, _, sums) = lsl.label_shapes(request, rows_big).unwrap();
                assert_eq!(sums, kept, "{c}, strips of {rows} rows, filtered");
                assert_eq!(got.labels.unwrap().data, labels.data);
            }
        }
    }
}

/// The centroids' sums from the runs (`label_weighted`) equal those over the label image
/// (`GreyWeights::centroids` on the flood fill's labels), exactly: both polarities, one level
/// and per-pixel levels, every row or a subset, with and without the label image, strips of
/// 1, 3 and 64 rows (components from strips above, long runs), and wide rows of one run.
#[test]
fn centroid_sums_from_the_runs_match_the_label_image() {
    use crate::ccl::cpu::oracle::flood_fill;
    use crate::ccl::subpixel::GreyWeights;
    use crate::ccl::CentroidRows;
    use crate::frame::image::GrayImage;
    use crate::frame::random_image::{generate, RandomImageSpec};
    use crate::threshold::levels::ThresholdLevels;
    use crate::threshold::spec::ThresholdSpec;
    let mut greys = Vec::new();
    for (width, height, density, granularity) in [
        (97, 61, 0.5, 1),
        (64, 17, 0.6, 2),
        (1, 50, 0.5, 1),
        (3000, 5, 0.95, 8),
    ] {
        let spec = RandomImageSpec {
            width,
            height,
            density,
            granularity,
            seed: 7,
        };
        let mask = generate(&spec).unwrap();
        // Foreground bright, background dark, and noise over both.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let data = (mask.data.iter())
            .map(|&m| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (if m != 0 { 120 } else { 0 }) + (state >> 57) as u8
            })
            .collect();
        greys.push(GrayImage::new(width, height, data).unwrap());
    }
    let big = |s: &ComponentStats| s.area >= 3;
    let keeps: [crate::ccl::Keep<'_>; 2] = [&crate::ccl::keep_all, &big];
    for grey in &greys {
        for (t, invert) in [(99, false), (120, true)] {
            let adaptive = ThresholdSpec::Adaptive { window: 9, c: -3.0 };
            for levels in [
                ThresholdLevels::Global(t),
                ThresholdLevels::compute(grey, &adaptive, invert).unwrap(),
            ] {
                let mask = levels.mask(grey, invert).unwrap();
                let weights = GreyWeights {
                    grey,
                    levels: &levels,
                    invert,
                };
                for c in [Connectivity::Four, Connectivity::Eight] {
                    let (labels, moments) = flood_fill(&mask, c);
                    let stats: Vec<ComponentStats> = (moments.iter().enumerate())
                        .map(|(i, m)| m.to_stats(i as u32 + 1))
                        .collect();
                    for keep in keeps {
                        let want = weights.centroids(&labels, &stats, keep).unwrap();
                        for (rows, asked) in [(1, Want::Stats), (3, Want::Both), (64, Want::Stats)]
                        {
                            let mut lsl = Lsl::with_strip_rows(rows);
                            let request = LabelRequest::new(Mask::Bytes(&mask), c, asked);
                            let (got, centroids) = lsl
                                .label_weighted(
                                    request,
                                    CentroidRows {
                                        weights: &weights,
                                        keep,
                                    },
                                )
                                .unwrap();
                            let what =
                                format!("{}x{} {c}, strips of {rows}", grey.width, grey.height);
                            assert_eq!(centroids, want, "{what}");
                            assert_eq!(got.stats.as_deref(), Some(&stats[..]), "{what}");
                            assert_eq!(
                                got.labels.as_ref(),
                                asked.labels().then_some(&labels),
                                "{what}"
                            );
                            let steps: Vec<&str> =
                                got.timings.iter().map(|t| t.step.as_ref()).collect();
                            assert!(steps.contains(&"sub-pixel centroids"), "{steps:?}");
                        }
                    }
                }
            }
        }
    }
}

/// A grey frame of another size than the mask is refused before any labeling; a grey frame
/// whose levels did not make the mask (nothing weighs) is an error, not a centroid.
#[test]
fn centroid_sums_refuse_a_grey_frame_that_did_not_make_the_mask() {
    use crate::ccl::subpixel::GreyWeights;
    use crate::ccl::CentroidRows;
    use crate::frame::image::GrayImage;
    use crate::threshold::levels::ThresholdLevels;
    let mask = BinaryImage {
        width: 4,
        height: 2,
        data: vec![0, 1, 1, 0, 0, 1, 0, 0],
    };
    let levels = ThresholdLevels::Global(100);
    let request = LabelRequest::new(Mask::Bytes(&mask), Connectivity::Eight, Want::Stats);
    let refusal = |grey: GrayImage| {
        let weights = GreyWeights {
            grey: &grey,
            levels: &levels,
            invert: false,
        };
        let rows = CentroidRows {
            weights: &weights,
            keep: &crate::ccl::keep_all,
        };
        let err = Lsl::new().label_weighted(request, rows).unwrap_err();
        err.to_string()
    };
    let err = refusal(GrayImage::new(3, 2, vec![200; 6]).unwrap());
    assert!(err.contains("grey frame is 3x2"), "{err}");
    let err = refusal(GrayImage::new(4, 2, vec![10; 8]).unwrap());
    assert!(err.contains("weigh nothing"), "{err}");
}

/// With sub-pixel weights the shape sums come from the runs too: `label_shapes` gives the
/// centroids of `label_weighted` and the shape sums of a run without weights, and a label image
/// only when asked for.
#[test]
fn shape_sums_with_weights_are_those_without_and_the_centroids_are_label_weighteds() {
    use crate::ccl::subpixel::GreyWeights;
    use crate::ccl::CentroidRows;
    use crate::frame::image::GrayImage;
    use crate::frame::random_image::{generate, RandomImageSpec};
    use crate::threshold::levels::ThresholdLevels;
    let spec = RandomImageSpec {
        width: 83,
        height: 70,
        density: 0.55,
        granularity: 2,
        seed: 11,
    };
    let mask = generate(&spec).unwrap();
    let data = (mask.data.iter().enumerate())
        .map(|(i, &m)| {
            if m != 0 {
                140 + (i % 97) as u8
            } else {
                (i % 89) as u8
            }
        })
        .collect();
    let grey = GrayImage::new(spec.width, spec.height, data).unwrap();
    let levels = ThresholdLevels::Global(99);
    let mask = levels.mask(&grey, false).unwrap();
    let weights = GreyWeights {
        grey: &grey,
        levels: &levels,
        invert: false,
    };
    let big = |s: &ComponentStats| s.area >= 2;
    for c in [Connectivity::Four, Connectivity::Eight] {
        for (rows, want) in [(1, Want::Stats), (3, Want::Both), (64, Want::Stats)] {
            let request = LabelRequest::new(Mask::Bytes(&mask), c, want);
            let (_, centroids) = Lsl::with_strip_rows(rows)
                .label_weighted(
                    request,
                    CentroidRows {
                        weights: &weights,
                        keep: &big,
                    },
                )
                .unwrap();
            let (_, _, plain) = Lsl::with_strip_rows(rows)
                .label_shapes(
                    request,
                    ShapeRows {
                        keep: &big,
                        weights: None,
                    },
                )
                .unwrap();
            let rows_weighted = ShapeRows {
                keep: &big,
                weights: Some(&weights),
            };
            let (got, with_centroids, sums) = Lsl::with_strip_rows(rows)
                .label_shapes(request, rows_weighted)
                .unwrap();
            assert_eq!(with_centroids.as_ref(), Some(&centroids), "{c}, {rows}");
            assert_eq!(sums, plain, "{c}, {rows}");
            assert!(!sums.is_empty());
            assert_eq!(got.labels.is_some(), want.labels());
            let steps: Vec<&str> = got.timings.iter().map(|t| t.step.as_ref()).collect();
            assert!(
                steps.ends_with(&["sub-pixel centroids", "shape descriptors"]),
                "{steps:?}"
            );
        }
    }
}
