//! The one-pass threshold (`threshold::binarize`) against the two-step path it replaces on the
//! capture thread: `threshold::apply` then `BinaryImage::pack`, and `ThresholdLevels::compute`
//! then `ThresholdLevels::mask` when sub-pixel levels are kept. Bytes, packed words (padding
//! bits included) and levels must be identical, for every threshold kind, both polarities,
//! sizes that are not multiples of 8/32/64, and buffers reused across frames of other sizes.

use markerscope::frame::image::{BinaryImage, GrayImage, PackedBinary};
use markerscope::threshold::apply;
use markerscope::threshold::binarize::{self, Applied, Binarizer, Outputs};
use markerscope::threshold::levels::ThresholdLevels;
use markerscope::threshold::spec::ThresholdSpec;
use proptest::prelude::*;

/// Grey frames of a few kinds: uniform noise, few levels (ties for Otsu), smooth gradients with
/// noise (what the adaptive threshold is for), and flat.
fn frame(w: u32, h: u32, kind: u8, seed: u64) -> GrayImage {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let data = (0..h)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .map(|(x, y)| match kind % 4 {
            0 => next() as u8,
            1 => [20u8, 40, 200, 220][(next() % 4) as usize],
            2 => ((x * 3 + y * 5) % 200) as u8 + (next() % 40) as u8,
            _ => 77,
        })
        .collect();
    GrayImage::new(w, h, data).unwrap()
}

/// Buffers left over from another frame: other sizes, every bit set, so that a value the
/// one-pass threshold forgets to write shows.
fn stale_buffers(w: u32, h: u32) -> (BinaryImage, PackedBinary, Vec<i32>) {
    let bytes = BinaryImage {
        width: w,
        height: h,
        data: vec![0xff; (w * h) as usize],
    };
    let wpr = PackedBinary::words_per_row_for(w);
    let packed = PackedBinary {
        width: w,
        height: h,
        words_per_row: wpr,
        lock: Default::default(),
        words: vec![u32::MAX; wpr * h as usize],
    };
    (bytes, packed, vec![i32::MIN; (w * h) as usize])
}

/// Runs the one-pass threshold with the outputs asked for and compares each with the two-step
/// path. `levels` asks for the per-pixel levels (what sub-pixel centroids keep).
fn check(
    b: &mut Binarizer,
    grey: &GrayImage,
    spec: &ThresholdSpec,
    invert: bool,
    outputs: (bool, bool, bool),
    stale: (u32, u32),
) -> Result<(), String> {
    let (want_bytes, want_packed, want_levels) = outputs;
    let what = format!(
        "{}x{} {spec} invert {invert} outputs {outputs:?}",
        grey.width, grey.height
    );
    let expected = apply(grey, spec, invert).map_err(|e| format!("{what}: apply: {e}"))?;
    let expected_packed = expected.pack();
    let (mut bytes, mut packed, mut levels) = stale_buffers(stale.0, stale.1);
    let applied = b
        .run(
            grey,
            spec,
            invert,
            Outputs {
                bytes: want_bytes.then_some(&mut bytes),
                packed: want_packed.then_some(&mut packed),
                levels: want_levels.then_some(&mut levels),
            },
        )
        .map_err(|e| format!("{what}: {e}"))?
        .ok_or_else(|| format!("{what}: no one-pass form"))?;
    if want_bytes && bytes != expected {
        let i = bytes
            .data
            .iter()
            .zip(&expected.data)
            .position(|(a, b)| a != b);
        return Err(format!(
            "{what}: bytes differ ({}x{} vs {}x{}, first at {i:?})",
            bytes.width, bytes.height, expected.width, expected.height
        ));
    }
    if want_packed && packed != expected_packed {
        let i = packed
            .words
            .iter()
            .zip(&expected_packed.words)
            .position(|(a, b)| a != b);
        return Err(format!("{what}: packed words differ (first at {i:?})"));
    }
    // The levels: what `ThresholdLevels::compute` gives (and the mask it makes is the same).
    let reference =
        ThresholdLevels::compute(grey, spec, invert).map_err(|e| format!("{what}: {e}"))?;
    match (&reference, applied) {
        (ThresholdLevels::Global(t), Applied::Global(got)) if *t == got => {}
        (ThresholdLevels::Local { levels: want, .. }, Applied::PerPixel) => {
            if want_levels && levels != *want {
                let i = levels.iter().zip(want).position(|(a, b)| a != b);
                return Err(format!("{what}: levels differ (first at {i:?})"));
            }
        }
        (r, a) => return Err(format!("{what}: applied {a:?}, reference {r:?}")),
    }
    if reference.mask(grey, invert).map_err(|e| e.to_string())? != expected {
        return Err(format!("{what}: the reference levels disagree with apply"));
    }
    // Levels computed elsewhere, applied in one pass (the door for other local methods).
    if let ThresholdLevels::Local { levels: lv, .. } = &reference {
        let (mut bytes, mut packed, _) = stale_buffers(stale.1, stale.0);
        binarize::per_pixel(
            grey,
            lv,
            invert,
            Outputs {
                bytes: Some(&mut bytes),
                packed: Some(&mut packed),
                levels: None,
            },
        )
        .map_err(|e| format!("{what}: per_pixel: {e}"))?;
        if bytes != expected || packed != expected_packed {
            return Err(format!("{what}: per_pixel differs"));
        }
    }
    Ok(())
}

fn specs() -> impl Strategy<Value = ThresholdSpec> {
    prop_oneof![
        any::<u8>().prop_map(ThresholdSpec::Fixed),
        Just(ThresholdSpec::Otsu),
        Just(ThresholdSpec::Triangle),
        (0u32..40).prop_map(|k| ThresholdSpec::Background { k: k as f64 * 0.25 }),
        // Windows up to 41 (wider than many of the frames: replicated borders), integer and
        // fractional C of either sign, and a C so large every pixel is on one side.
        (
            1u32..=20,
            prop_oneof![
                (-40i32..40, 0u8..4).prop_map(|(i, q)| i as f64 + q as f64 * 0.25),
                Just(300.0)
            ]
        )
            .prop_map(|(k, c)| ThresholdSpec::Adaptive {
                window: 2 * k + 1,
                c
            }),
    ]
}

fn sizes() -> impl Strategy<Value = (u32, u32)> {
    let edge = [1u32, 2, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129];
    prop_oneof![
        (1u32..=200, 1u32..=140),
        (
            prop::sample::select(edge.to_vec()),
            prop::sample::select(edge.to_vec())
        ),
        (1u32..=3, 1u32..=300),
        (1u32..=300, 1u32..=3),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn one_pass_equals_threshold_then_pack(
        (w, h) in sizes(),
        kind in 0u8..4,
        seed in any::<u64>(),
        spec in specs(),
        invert in any::<bool>(),
        outputs in (any::<bool>(), any::<bool>(), any::<bool>()),
        stale in (1u32..=150, 1u32..=150),
    ) {
        let grey = frame(w, h, kind, seed);
        let mut b = Binarizer::new();
        check(&mut b, &grey, &spec, invert, outputs, stale).map_err(TestCaseError::fail)?;
    }
}

/// Frames large enough for several bands of rows (run in parallel), with one `Binarizer` and
/// one set of buffers reused across sizes, kinds and polarities as the capture thread does.
#[test]
fn large_frames_and_reused_buffers() {
    let mut b = Binarizer::new();
    let specs = [
        ThresholdSpec::Fixed(100),
        ThresholdSpec::Otsu,
        ThresholdSpec::Triangle,
        ThresholdSpec::Background { k: 5.0 },
        ThresholdSpec::Adaptive { window: 3, c: 2.0 },
        ThresholdSpec::Adaptive {
            window: 31,
            c: -1.5,
        },
        ThresholdSpec::Adaptive {
            window: 101,
            c: 4.0,
        },
    ];
    let (mut bytes, mut packed, mut levels) = stale_buffers(1, 1);
    for (i, &(w, h)) in [
        (1921, 67),
        (1920, 1080),
        (257, 1031),
        (4097, 33),
        (64, 2049),
    ]
    .iter()
    .enumerate()
    {
        let grey = frame(w, h, (i % 3) as u8, i as u64 + 5);
        for spec in &specs {
            for invert in [false, true] {
                let reference = ThresholdLevels::compute(&grey, spec, invert).unwrap();
                let expected = apply(&grey, spec, invert).unwrap();
                let applied = b
                    .run(
                        &grey,
                        spec,
                        invert,
                        Outputs {
                            bytes: Some(&mut bytes),
                            packed: Some(&mut packed),
                            levels: Some(&mut levels),
                        },
                    )
                    .unwrap()
                    .unwrap();
                let what = format!("{w}x{h} {spec} invert {invert}");
                assert!(bytes == expected, "{what}: bytes");
                assert!(packed == expected.pack(), "{what}: packed");
                match &reference {
                    ThresholdLevels::Local { levels: want, .. } => {
                        assert_eq!(applied, Applied::PerPixel);
                        assert!(levels == *want, "{what}: levels");
                    }
                    ThresholdLevels::Global(t) => assert_eq!(applied, Applied::Global(*t)),
                }
                // Packed alone, levels alone: the same mask.
                let mut alone = stale_buffers(3, 5).1;
                b.run(
                    &grey,
                    spec,
                    invert,
                    Outputs {
                        packed: Some(&mut alone),
                        ..Outputs::default()
                    },
                )
                .unwrap();
                assert!(alone == expected.pack(), "{what}: packed alone");
            }
        }
    }
}

#[test]
fn histogram_counts_every_pixel() {
    for (w, h) in [(1, 1), (3, 5), (1920, 1080), (4097, 301)] {
        let grey = frame(w, h, 0, 9);
        let mut want = [0u64; 256];
        for &v in &grey.data {
            want[v as usize] += 1;
        }
        assert_eq!(
            markerscope::threshold::levels::histogram(&grey.data),
            want,
            "{w}x{h}"
        );
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let grey = frame(10, 4, 0, 1);
    let mut b = Binarizer::new();
    for (window, c) in [(4, 1.0), (1, 0.0), (5, f64::NAN), (9999, 0.0)] {
        let err = b
            .adaptive_mean(&grey, window, c, false, Outputs::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("adaptive"), "{err}");
    }
    let err = binarize::per_pixel(&grey, &[0; 39], false, Outputs::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("39 threshold levels for 40 pixels"), "{err}");
    // A grey frame whose buffer does not match its size (fields are public).
    let bad = GrayImage {
        width: 10,
        height: 5,
        lock: Default::default(),
        data: vec![0; 40],
    };
    assert!(binarize::global(&bad, 3, false, Outputs::default()).is_err());
}
