//! Square markers in the window: the Markers controls reach the pipeline's settings, and a
//! frame with markers gets their outlines, IDs, axes and table.

use super::*;
use crate::fiducial::{estimate_pose, MarkerSettings};
use crate::geometry::calibration::Calibration;
use crate::geometry::WorldMapping;
use crate::pipeline::{FrameResult, PipelineEvent, PipelineSettings};
use crate::ui::markers::{MarkerOverlay, AXIS_COLOURS, MARKER_COLOUR};
use egui::epaint::{ColorMode, Shape};
use std::sync::Mutex;

/// A marker seen as a square of side 20 px centred at (cx, cy), turned by `angle_deg`.
fn marker(
    track: u64,
    id: u32,
    cx: f32,
    cy: f32,
    angle_deg: f32,
) -> crate::fiducial::MarkerObservation {
    let (sin, cos) = angle_deg.to_radians().sin_cos();
    let corners = [(-10.0, -10.0), (10.0, -10.0), (10.0, 10.0), (-10.0, 10.0)]
        .map(|(u, v)| [cx + u * cos - v * sin, cy + u * sin + v * cos]);
    crate::fiducial::MarkerObservation {
        marker: crate::fiducial::Marker {
            id,
            dictionary: 0,
            hamming: 0,
            corners: corners.as_flattened().try_into().unwrap(),
            angle_deg,
        },
        dictionary: "DICT_4X4_50".into(),
        track,
        pose: None,
        world: None,
    }
}

/// The lens of the test frame (320×200).
const LENS: Calibration = Calibration {
    fx: 300.0,
    fy: 300.0,
    cx: 160.0,
    cy: 100.0,
    dist: [0.0; 5],
};

/// The disc grid, with two markers added to every frame while the settings ask for markers,
/// as the pipeline would: track 7 (ID 23) and track 8 (ID 5), posed when a length is given.
struct MarkerFeed {
    still: StillFeed,
    asked: Arc<Mutex<Option<Arc<MarkerSettings>>>>,
}

impl crate::ui::state::FrameFeed for MarkerFeed {
    fn poll(&mut self) -> Vec<PipelineEvent> {
        let asked = self.asked.lock().unwrap().clone();
        let Some(asked) = asked else {
            return self.still.poll();
        };
        let name: Arc<str> = asked.dictionaries[0].name().into();
        self.still
            .poll()
            .into_iter()
            .map(|event| match event {
                PipelineEvent::Frame(f) => {
                    let mut f = FrameResult::clone(&f);
                    f.markers = vec![
                        marker(7, 23, 100.0, 60.0, 10.0),
                        marker(8, 5, 220.0, 140.0, 0.0),
                    ];
                    for m in &mut f.markers {
                        m.dictionary = name.clone();
                    }
                    if let Some(length) = asked.marker_length {
                        let corners = [0, 1, 2, 3].map(|k| f.markers[0].marker.corner(k));
                        f.markers[0].pose = Some(estimate_pose(&corners, length, &LENS).unwrap());
                    }
                    PipelineEvent::Frame(Arc::new(f))
                }
                other => other,
            })
            .collect()
    }
    fn set_settings(&mut self, settings: &PipelineSettings) {
        *self.asked.lock().unwrap() = settings.markers.clone();
        self.still.set_settings(settings)
    }
    fn command(&mut self, _command: crate::pipeline::SourceCommand) {}
    fn open(&mut self, spec: &str) -> crate::Result<crate::ui::state::SourceInfo> {
        self.still.open(spec)
    }
    fn counters(&self) -> crate::pipeline::PipelineCounters {
        self.still.counters()
    }
}

/// The window over a `MarkerFeed`, with world coordinates that carry `LENS`.
fn marker_app() -> MarkerscopeApp {
    let backends = Arc::new(Backends::cpu_only());
    let feed = MarkerFeed {
        still: StillFeed::new(
            disc_grid(320, 200, 10, 5, 6.0).unwrap(),
            backends.clone(),
            true,
        ),
        asked: Arc::default(),
    };
    let points = ["0,0=0,0", "320,0=32,0", "320,200=32,20", "0,200=0,20"]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
    let settings = UiSettings {
        backend: BackendChoice::Cpu,
        world: Some(Arc::new(
            WorldMapping::new(points, Some(LENS), "cm").unwrap(),
        )),
        ..UiSettings::default()
    };
    MarkerscopeApp::new(settings, backends, Some(Box::new(feed)))
}

/// Every shape the last pass painted, nested lists opened.
fn painted(h: &Harness<'_, MarkerscopeApp>) -> Vec<Shape> {
    fn open(shape: &Shape, out: &mut Vec<Shape>) {
        match shape {
            Shape::Vec(inner) => inner.iter().for_each(|s| open(s, out)),
            s => out.push(s.clone()),
        }
    }
    let mut out = Vec::new();
    for clipped in &h.output().shapes {
        open(&clipped.shape, &mut out);
    }
    out
}

/// Closed four-point outlines in the marker colour, axis segments, and the overlay's texts.
fn marker_shapes(h: &Harness<'_, MarkerscopeApp>) -> (usize, usize, Vec<String>) {
    let (mut outlines, mut axes, mut texts) = (0, 0, Vec::new());
    for shape in painted(h) {
        match shape {
            Shape::Path(p) if p.closed && p.points.len() == 4 => {
                if matches!(p.stroke.color, ColorMode::Solid(c) if c == MARKER_COLOUR) {
                    outlines += 1;
                }
            }
            Shape::LineSegment { stroke, .. } if AXIS_COLOURS.contains(&stroke.color) => axes += 1,
            Shape::Text(t)
                if t.fallback_color == MARKER_COLOUR || t.galley.text().starts_with("ID ") =>
            {
                texts.push(t.galley.text().to_string())
            }
            _ => {}
        }
    }
    (outlines, axes, texts)
}

fn sent_markers(h: &Harness<'_, MarkerscopeApp>) -> Option<Arc<MarkerSettings>> {
    h.state().sent_settings().and_then(|s| s.markers.clone())
}

#[test]
fn markers_control_reaches_the_pipeline_and_the_overlay_draws_outlines_ids_and_axes() {
    let mut h = harness(marker_app());
    assert_eq!(sent_markers(&h), None, "off by default");
    assert_eq!(marker_shapes(&h).0, 0);

    // The Markers section lies below the window's edge: scrolled into view first.
    h.get_by_label("find markers").scroll_to_me();
    h.run_steps(10);
    h.get_by_label("find markers").click();
    h.run_steps(3);
    let asked = sent_markers(&h).expect("markers asked for");
    assert_eq!(asked.dictionaries[0].name(), "DICT_4X4_50");
    assert_eq!(asked.marker_length, None);
    assert_eq!(
        h.state().view.last_overlay.markers,
        MarkerOverlay {
            outlines: 2,
            axes: 0
        }
    );
    let (outlines, axes, texts) = marker_shapes(&h);
    assert_eq!((outlines, axes), (2, 0));
    assert!(
        texts.contains(&"ID 23".to_string()) && texts.contains(&"ID 5".to_string()),
        "{texts:?}"
    );
    // The marker table beside the components'.
    h.get_by_label("2 markers");
    h.get_by_label("#7");

    // Another dictionary from the list.
    h.get_by_label("dictionary").click();
    h.run_steps(2);
    h.get_by_label("DICT_APRILTAG_36h11").scroll_to_me();
    h.run_steps(5);
    h.get_by_label("DICT_APRILTAG_36h11").click();
    h.run_steps(3);
    let asked = sent_markers(&h).unwrap();
    assert_eq!(asked.dictionaries.len(), 1);
    assert_eq!(asked.dictionaries[0].name(), "DICT_APRILTAG_36h11");

    // A marker length asks for poses; the posed marker gets its three axes.
    h.get_by_role_and_label(egui::accesskit::Role::SpinButton, "marker length")
        .set_value_accesskit(0.05);
    h.run_steps(3);
    assert_eq!(sent_markers(&h).unwrap().marker_length, Some(0.05));
    assert_eq!(
        h.state().view.last_overlay.markers,
        MarkerOverlay {
            outlines: 2,
            axes: 1
        }
    );
    assert_eq!(marker_shapes(&h).1, 3, "x, y and z of one marker");

    // Off again: the pipeline is told, nothing is drawn.
    h.get_by_label("find markers").click();
    h.run_steps(3);
    assert_eq!(sent_markers(&h), None);
    assert_eq!(marker_shapes(&h).0, 0);
    assert_eq!(
        h.state().state.settings.markers.length,
        Some(0.05),
        "kept for next time"
    );
}

#[test]
fn startup_markers_turn_detection_on_with_their_dictionaries() {
    let dicts: Vec<_> = ["DICT_5X5_100", "DICT_APRILTAG_16h5"]
        .iter()
        .map(|n| Arc::new(crate::fiducial::Dictionary::predefined(n).unwrap()))
        .collect();
    let options = crate::ui::StartupOptions {
        markers: dicts.clone(),
        marker_length: Some(0.1),
        ..Default::default()
    };
    let mut settings = UiSettings::default();
    options.apply_to(&mut settings);
    let asked = settings.pipeline_settings().markers.unwrap();
    assert_eq!(asked.dictionaries, dicts);
    assert_eq!(asked.marker_length, Some(0.1));
    // Without --markers the settings keep their choice.
    let mut settings = UiSettings::default();
    crate::ui::StartupOptions::default().apply_to(&mut settings);
    assert_eq!(settings.pipeline_settings().markers, None);
}
