//! The settings file read and written: the shipped file is the default, every value round-trips,
//! bad values are named and keep what was there.

use super::knobs::KNOBS;
use super::*;
use crate::ccl::{BackendChoice, Connectivity};
use crate::pipeline::ComponentFilter;
use crate::source::camera_controls::CameraControls;
use crate::threshold::spec::ThresholdSpec;
use crate::ui::tracks::DEFAULT_TAIL_FRAMES;

#[test]
fn shipped_config_is_the_default() {
    let mut s = UiSettings {
        source: "x".into(),
        invert: true,
        view: ViewMode::Labels,
        ..UiSettings::default()
    };
    let problems = s.apply_toml(DEFAULT_CONFIG, "config/default.toml");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(s, UiSettings::default());
}

#[test]
fn round_trips_through_toml() {
    let s = UiSettings {
        source: "clip \"a\".mp4".into(),
        threshold: ThresholdSpec::Adaptive { window: 31, c: 2.5 },
        invert: true,
        connectivity: Connectivity::Four,
        algorithm: Some("lsl".into()),
        backend: BackendChoice::Cpu,
        filter: ComponentFilter {
            min_area: Some(4),
            max_area: Some(900),
            max_aspect: Some(3.5),
            min_circularity: Some(0.7),
            max_circularity: Some(1.25),
            min_inertia_ratio: Some(0.5),
            max_inertia_ratio: None,
        },
        view: ViewMode::Binary,
        overlays: false,
        ids: false,
        show_tails: false,
        tail_frames: 120,
        shapes: true,
        world_points: ["0,0=0,0", "100,0=10,0", "100,50=10,5", "0,50=0,5"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect(),
        calibration: String::new(),
        world_units: "cm".into(),
        world: None,
        streams: vec!["osc://127.0.0.1:3333".into(), "ws://0.0.0.0:9000".into()],
        camera: CameraControls {
            exposure: Some(crate::source::camera_controls::Exposure::Manual(120)),
            gain: Some(3),
            resolution: Some((1280, 720)),
            fps: Some(120),
            format: Some(crate::source::camera_controls::PixelFormat::Yuyv),
        },
        markers: MarkerChoice {
            enabled: true,
            dictionaries: ["DICT_APRILTAG_36h11", "DICT_5X5_100"]
                .iter()
                .map(|n| Arc::new(Dictionary::predefined(n).unwrap()))
                .collect(),
            length: Some(0.05),
        },
        mask_file: "mask.png".into(),
        sources: Vec::new(),
    };
    let mut s = s;
    s.refit_world().unwrap();
    assert!(s.world.is_some());
    let mut back = UiSettings::default();
    let problems = back.apply_toml(&s.to_toml(), "saved");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back, s);
}

#[test]
fn every_threshold_method_round_trips_and_a_bad_k_is_reported() {
    for threshold in [
        ThresholdSpec::Fixed(9),
        ThresholdSpec::Otsu,
        ThresholdSpec::Triangle,
        ThresholdSpec::Background { k: 3.5 },
        ThresholdSpec::Adaptive {
            window: 15,
            c: -1.0,
        },
    ] {
        let s = UiSettings {
            threshold,
            ..UiSettings::default()
        };
        let mut back = UiSettings {
            threshold: ThresholdSpec::Fixed(1),
            ..UiSettings::default()
        };
        assert!(back.apply_toml(&s.to_toml(), "saved").is_empty());
        assert_eq!(back, s);
    }
    let mut s = UiSettings::default();
    let problems = s.apply_toml("[threshold]\nspec = \"background:-2\"\n", "t.toml");
    assert!(
        problems.len() == 1
            && problems[0].contains("t.toml: threshold.spec:")
            && problems[0].contains(">= 0"),
        "{problems:?}"
    );
    assert_eq!(s, UiSettings::default());
}

#[test]
fn bad_values_are_reported_and_keep_the_defaults() {
    let mut s = UiSettings::default();
    let problems = s.apply_toml(
        "[threshold]\nspec = \"fixed:300\"\ninvert = \"yes\"\n[labeling]\nconnectivity = 6\n\
         algorithm = \"nope\"\nbackend = \"gpu\"\n[filter]\nmin_area = -1\nmax_aspect = 0.5\n\
         [view]\nmode = \"rainbow\"\ncolour = 1\n[labelling]\nx = 1\n",
        "test.toml",
    );
    assert_eq!(s, UiSettings::default());
    assert_eq!(problems.len(), 10, "{problems:#?}");
    for key in [
        "threshold.spec",
        "threshold.invert",
        "labeling.connectivity",
        "labeling.algorithm",
        "labeling.backend",
        "filter.min_area",
        "filter.max_aspect",
        "view.mode",
        "view.colour",
        "labelling.x",
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(&format!("test.toml: {key}:"))),
            "no message for {key}: {problems:#?}"
        );
    }
    // A file from before the tail keys leaves them at their defaults.
    let problems = s.apply_toml("[view]\nids = false\n", "old.toml");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!((s.show_tails, s.tail_frames), (true, DEFAULT_TAIL_FRAMES));
    s = UiSettings::default();
    // Tail lengths out of range are reported and keep the previous value.
    for bad in ["1", "301", "-5", "30.5", "\"30\""] {
        let problems = s.apply_toml(&format!("[view]\ntail_frames = {bad}\n"), "t.toml");
        assert!(
            problems.len() == 1 && problems[0].contains("t.toml: view.tail_frames:"),
            "{bad}: {problems:?}"
        );
    }
    assert_eq!(s, UiSettings::default());
    assert!(s
        .apply_toml("[view]\ntail_frames = 300\ntails = false\n", "t")
        .is_empty());
    assert_eq!((s.tail_frames, s.show_tails), (300, false));
    s = UiSettings::default();

    // Camera modes: what is wrong is named, the values stay.
    let problems = s.apply_toml(
        "[camera]\nresolution = \"1280\"\nfps = -2\nformat = \"h264\"\n",
        "c.toml",
    );
    assert_eq!(problems.len(), 3, "{problems:?}");
    for (key, says) in [
        ("resolution", "WIDTHxHEIGHT"),
        ("fps", "frames/s"),
        ("format", "'h264'"),
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&format!("c.toml: camera.{key}:")) && p.contains(says)),
            "{key}: {problems:?}"
        );
    }
    assert_eq!(s, UiSettings::default());

    let broken = s.apply_toml("[threshold\nspec = 1", "broken.toml");
    assert_eq!(broken.len(), 1);
    assert!(
        broken[0].contains("broken.toml: not valid TOML"),
        "{broken:?}"
    );
    assert_eq!(s, UiSettings::default());
}

#[test]
fn every_knob_is_in_the_shipped_file_and_in_the_saved_copy() {
    let keys = |text: &str| -> Vec<String> {
        let table: toml::Table = text.parse().unwrap();
        let mut keys: Vec<String> = table
            .iter()
            .flat_map(|(section, keys)| {
                let keys = keys.as_table().unwrap();
                keys.keys().map(move |k| format!("{section}.{k}"))
            })
            .collect();
        keys.sort();
        keys
    };
    let mut knobs: Vec<String> = KNOBS.iter().map(|k| k.key.to_string()).collect();
    knobs.sort();
    assert_eq!(keys(DEFAULT_CONFIG), knobs);
    assert_eq!(keys(&UiSettings::default().to_toml()), knobs);
    assert!(KNOBS.iter().all(|k| !k.doc.is_empty()));
}

#[test]
fn marker_settings_are_read_checked_and_reach_the_pipeline() {
    let mut s = UiSettings::default();
    assert_eq!(s.pipeline_settings().markers, None, "off by default");
    let problems = s.apply_toml(
        "[markers]\nenabled = true\ndictionaries = [\"aprilTag_36h11\"]\nlength = 0.04\n",
        "f",
    );
    assert!(problems.is_empty(), "{problems:?}");
    let asked = s.pipeline_settings().markers.expect("markers asked for");
    assert_eq!(asked.dictionaries[0].name(), "DICT_APRILTAG_36h11");
    assert_eq!(asked.marker_length, Some(0.04));

    let problems = s.apply_toml(
        "[markers]\ndictionaries = [\"DICT_9X9_1\"]\nlength = -1\nenabled = \"yes\"\n",
        "f",
    );
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(
        problems[0].contains("DICT_4X4_50"),
        "lists the names: {problems:?}"
    );
    assert_eq!(
        s.markers.dictionaries[0].name(),
        "DICT_APRILTAG_36h11",
        "kept"
    );
    assert_eq!(s.markers.length, Some(0.04), "kept");
    assert!(!s
        .apply_toml("[markers]\ndictionaries = []\n", "f")
        .is_empty());
}

/// Two sources with their own threshold, world, mask and markers: written as `[[sources]]`
/// sections and read back the same; each source gets the shared keys of the top level.
#[test]
fn source_sections_round_trip_and_share_the_top_level_keys() {
    let top = UiSettings {
        threshold: ThresholdSpec::Otsu,
        connectivity: Connectivity::Four,
        ..UiSettings::default()
    };
    let mut first = top.defaults_for("synthetic:view=0/2");
    first.threshold = ThresholdSpec::Fixed(90);
    first.invert = true;
    first.mask_file = "left mask.png".into();
    let mut second = top.defaults_for("clip.mp4");
    second.world_points = ["0,0=0,0", "100,0=10,0", "100,50=10,5", "0,50=0,5"]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    second.world_units = "cm".into();
    second.refit_world().unwrap();
    second.markers.enabled = true;
    second.markers.length = Some(0.05);
    let saved = top.with_sections(&top, &[first.clone(), second.clone()]);
    let text = saved.to_toml();
    assert_eq!(text.matches("[[sources]]").count(), 2, "{text}");
    let mut back = UiSettings::default();
    let problems = back.apply_toml(&text, "saved");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back, saved);
    let sources = back.source_settings();
    assert_eq!(sources, [first, second]);
    assert!(sources.iter().all(|s| s.connectivity == Connectivity::Four));
    // Without sections: one source, the top level.
    assert_eq!(top.source_settings(), std::slice::from_ref(&top));
}

/// A bad value in a source's section names the source and the key and keeps the default; a
/// shared section in it is refused; a section without a source is left out.
#[test]
fn bad_source_sections_name_the_source_and_the_key() {
    let mut s = UiSettings::default();
    let problems = s.apply_toml(
        "[threshold]\nspec = \"otsu\"\n\
         [[sources]]\nsource.spec = \"camera:0\"\nthreshold.spec = \"fixed:300\"\n\
         [[sources]]\nsource.spec = \"clip.mp4\"\nlabeling.connectivity = 4\nmask.file = 3\n\
         [[sources]]\nthreshold.spec = \"otsu\"\n",
        "t.toml",
    );
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for (says, also) in [
        ("t.toml: source 1 (camera:0): threshold.spec:", "keeping"),
        ("t.toml: source 2 (clip.mp4): labeling:", "top level"),
        ("t.toml: source 2 (clip.mp4): mask.file:", "string"),
        ("t.toml: source 3: source.spec:", "left out"),
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(says) && p.contains(also)),
            "{says}: {problems:#?}"
        );
    }
    let specs: Vec<&str> = s.sources.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(specs, ["camera:0", "clip.mp4"]);
    // Each keeps the default (the top level's) where its value was bad.
    assert!(s.sources.iter().all(|s| s.threshold == ThresholdSpec::Otsu));
    assert!(s
        .sources
        .iter()
        .all(|s| s.connectivity == Connectivity::Eight));
    let problems = s.apply_toml("sources = 3\n", "t.toml");
    assert!(
        problems.len() == 1 && problems[0].starts_with("t.toml: sources: expected"),
        "{problems:?}"
    );
    assert_eq!(s.sources.len(), 2, "kept");
}
