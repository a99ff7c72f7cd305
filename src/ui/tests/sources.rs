//! Several sources in one window: the grid of cells with their titles, the selected source
//! whose settings the panels edit, a source that cannot be opened, and the saved sections.

use super::*;
use crate::ui::app::SourceStart;
use crate::ui::state::SourceInfo;

/// A still source of `cols` × `rows` discs on a 320×240 frame, named `spec`.
fn still(spec: &str, cols: u32, rows: u32, settings: &UiSettings) -> SourceStart {
    let backends = Arc::new(Backends::cpu_only());
    let feed = StillFeed::new(
        disc_grid(320, 240, cols, rows, 6.0).unwrap(),
        backends,
        false,
    );
    // No description: a live source without playback controls, as the single view's tests.
    SourceStart {
        settings: settings.defaults_for(spec),
        spec: spec.into(),
        opened: Ok((Box::new(feed), SourceInfo::default())),
        restart: None,
    }
}

fn defaults() -> UiSettings {
    UiSettings {
        backend: BackendChoice::Cpu,
        ..UiSettings::default()
    }
}

/// Two sources: 50 discs ("left") and 12 discs ("right").
fn two_sources() -> MarkerscopeApp {
    let settings = defaults();
    let starts = vec![
        still("left", 10, 5, &settings),
        still("right", 4, 3, &settings),
    ];
    MarkerscopeApp::with_sources(settings, Arc::new(Backends::cpu_only()), starts)
}

/// Components of source `i`'s last frame.
fn components_of(h: &Harness<'_, MarkerscopeApp>, i: usize) -> usize {
    let state = h.state().source_state(i).unwrap();
    state.frame.as_ref().map_or(0, |f| f.components.len())
}

/// The frame summaries shown (one per cell in view).
fn summaries(h: &Harness<'_, MarkerscopeApp>) -> usize {
    h.query_all_by_label_contains("320×240").count()
}

#[test]
fn two_sources_show_two_cells_with_their_titles_and_one_can_be_enlarged() {
    let mut h = harness(two_sources());
    assert_eq!(h.state().source_count(), 2);
    h.get_by_label("1 left");
    h.get_by_label("2 right");
    assert_eq!((components_of(&h, 0), components_of(&h, 1)), (50, 12));
    // Each cell draws its source's frame with its overlay.
    h.get_by_label_contains("· 50 component(s)");
    h.get_by_label_contains("· 12 component(s)");
    assert_eq!(summaries(&h), 2);
    // The timings panel has a line per source.
    h.get_by_label_contains("1 left: ");
    h.get_by_label_contains("2 right: ");

    // Enlarged, the second cell is the only one; and back.
    h.query_all_by_label("enlarge").nth(1).unwrap().click();
    h.run_steps(2);
    assert_eq!(h.state().grid.enlarged, Some(1));
    assert_eq!(summaries(&h), 1);
    h.get_by_label_contains("· 12 component(s)");
    h.get_by_label("back to grid").click();
    h.run_steps(2);
    assert_eq!(h.state().grid.enlarged, None);
    assert_eq!(summaries(&h), 2);
}

#[test]
fn selecting_the_second_source_makes_the_controls_edit_only_its_settings() {
    let mut h = harness(two_sources());
    assert_eq!(h.state().selected_source(), 0);
    h.get_by_label("2 right").click();
    h.run_steps(2);
    assert_eq!(h.state().selected_source(), 1);
    assert_eq!(h.state().state.source_spec, "right");

    // A fixed threshold above the discs' grey: the second source finds nothing.
    h.get_by_label("method").click();
    h.run_steps(2);
    h.get_by_label("fixed").click();
    h.run_steps(3);
    h.get_by_role(egui::accesskit::Role::Slider)
        .set_value_accesskit(230.0);
    h.run_steps(3);
    let threshold = |h: &Harness<'_, MarkerscopeApp>, i: usize| {
        h.state().source_state(i).unwrap().settings.threshold
    };
    assert_eq!(threshold(&h, 1), ThresholdSpec::Fixed(230));
    assert_eq!(threshold(&h, 0), ThresholdSpec::default(), "unchanged");
    assert_eq!((components_of(&h, 0), components_of(&h, 1)), (50, 0));

    // A shared key (connectivity) reaches both sources' pipelines.
    h.get_by_label("4").click();
    h.run_steps(3);
    for i in 0..2 {
        let f = h.state().source_state(i).unwrap().frame.clone().unwrap();
        assert_eq!(f.connectivity, Connectivity::Four, "source {i}");
    }

    // Back on the first source (its line in the timings panel): its own threshold again.
    h.get_by_label_contains("1 left: ").click();
    h.run_steps(2);
    assert_eq!(h.state().selected_source(), 0);
    assert_eq!(h.state().state.settings.threshold, ThresholdSpec::default());
    assert_eq!(threshold(&h, 1), ThresholdSpec::Fixed(230), "kept");
}

#[test]
fn a_source_that_cannot_be_opened_shows_its_error_in_its_cell_while_the_other_runs() {
    let settings = defaults();
    let backends = Arc::new(Backends::cpu_only());
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.png").display().to_string();
    let starts = vec![
        still("left", 10, 5, &settings),
        SourceStart::live(settings.defaults_for(&missing), &backends),
    ];
    let mut h = harness(MarkerscopeApp::with_sources(settings, backends, starts));
    assert_eq!(components_of(&h, 0), 50, "the first source runs");
    let why = h.state().source_state(1).unwrap().source_error.clone();
    let why = why.expect("the second source's error");
    assert!(why.contains("missing.png"), "{why}");
    h.get_by_label(&why);
    h.get_by_label(&format!("2 {missing}"));
    h.get_by_label_contains("stopped: ");
    // Said in the notices too, named after its source.
    let said = |h: &Harness<'_, MarkerscopeApp>| {
        let messages = &h.state().state.messages;
        messages
            .iter()
            .filter(|(_, m)| m.contains("missing.png"))
            .count()
    };
    assert!(h
        .state()
        .state
        .messages
        .iter()
        .any(|(_, m)| m.starts_with("source 2 (") && m.contains("missing.png")));
    assert_eq!(said(&h), 1);

    // Reopened (still missing): tried again, the error stays; the click selected its cell.
    h.get_by_label("reopen").click();
    h.run_steps(3);
    assert_eq!(h.state().selected_source(), 1);
    assert_eq!(said(&h), 2);
    assert!(h.state().state.source_error.is_some());
    assert_eq!(components_of(&h, 0), 50);
}

/// What the window saves: the defaults, and a section per source with its own keys, read
/// back as the same sources.
#[test]
fn the_saved_settings_have_a_section_per_source() {
    let mut h = harness(two_sources());
    h.get_by_label("2 right").click();
    h.run_steps(2);
    h.state_mut().state.settings.threshold = ThresholdSpec::Fixed(77);
    h.state_mut().state.settings.connectivity = Connectivity::Four;
    h.run_steps(2);
    let saved = h.state().saved_settings();
    let text = saved.to_toml();
    let mut back = UiSettings::default();
    let problems = back.apply_toml(&text, "saved");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back, saved);
    let sources = back.source_settings();
    let specs: Vec<&str> = sources.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(specs, ["left", "right"]);
    assert_eq!(sources[0].threshold, ThresholdSpec::default());
    assert_eq!(sources[1].threshold, ThresholdSpec::Fixed(77));
    assert!(sources.iter().all(|s| s.connectivity == Connectivity::Four));
    // The window's sources now are those of the saved copy.
    for (i, s) in sources.iter().enumerate() {
        assert_eq!(
            &h.state().source_state(i).unwrap().settings,
            s,
            "source {i}"
        );
    }
}
