//! The frame view: the part of the current frame in view as one texture of the view's size
//! (sampled to screen pixels on the CPU, updated in place), zoom and pan, and the component
//! overlay (boxes, crosses and fading trajectory tails) drawn as one batched mesh with
//! off-screen components culled. When so many components are in view that only their boxes are
//! drawn, the boxes go into the texture instead: thousands of thin triangles are what a
//! software rasterizer (Mesa's llvmpipe) is slowest at.

use super::config::ViewMode;
use super::markers::{draw_markers, MarkerOverlay};
use super::state::AppState;
use super::tracks::TrackHistory;
use crate::ccl::stats::ComponentStats;
use crate::frame::mask::Roi;
use crate::pipeline::FrameResult;
use egui::epaint::{Mesh, Shape};
use egui::{Color32, ColorImage, Pos2, Rect, Sense, TextureHandle, TextureOptions, Vec2};
use std::sync::Arc;

/// Overlay colours: distinct from any grey, so tests can find them in a screenshot.
pub const BOX_COLOUR: Color32 = Color32::from_rgb(0, 230, 64);
pub const CROSS_COLOUR: Color32 = Color32::from_rgb(255, 64, 200);
pub const SELECTED_COLOUR: Color32 = Color32::from_rgb(255, 220, 0);
pub const TAIL_COLOUR: Color32 = Color32::from_rgb(0, 200, 255);

/// Above this many components in view, crosses are left out (boxes still drawn).
const MAX_CROSSES: usize = 2_000;
/// Above this many components in view, tails are left out (with the crosses, so the summary's
/// "centroids hidden: zoom in" covers both).
const MAX_TAILS: usize = MAX_CROSSES;
/// Tail width on screen (points).
const TAIL_WIDTH: f32 = 2.0;
/// Above this many components in view, ids are left out.
const MAX_IDS: usize = 300;
/// Ids are drawn only when a box is at least this wide on screen (points).
const MIN_BOX_FOR_ID: f32 = 14.0;
/// Above this many components in view, only a summary is drawn: more boxes than this cannot be
/// told apart on a screen and only cost time.
const MAX_BOXES: usize = 50_000;
/// Box outline width on screen (points); the selected component's is `SELECTED_WIDTH`.
const BOX_WIDTH: f32 = 1.5;
const SELECTED_WIDTH: f32 = 3.0;

/// What the last overlay pass drew (tests and the summary line read it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverlayStats {
    pub in_view: usize,
    pub boxes: usize,
    pub crosses: usize,
    pub ids: usize,
    /// Trajectory tails drawn (tracks in view that moved).
    pub tails: usize,
    /// Square markers outlined, and those drawn with axes.
    pub markers: MarkerOverlay,
}

pub struct ViewPanel {
    texture: Option<TextureHandle>,
    /// What the texture holds.
    shown: Option<TextureKey>,
    /// Screen points per image pixel; None = fit the frame into the panel.
    zoom: Option<f32>,
    /// Screen offset of the image's top-left corner from the panel's top-left corner.
    pan: Vec2,
    pub last_overlay: OverlayStats,
    /// Image ↔ screen mapping of the last pass (tests click on components through it).
    last_map: Option<ScreenMap>,
    /// Times the texture was (re)uploaded; the view test checks it is not every pass.
    pub uploads: u64,
}

/// Everything the view's texture depends on: it is redrawn and uploaded only when one changes.
#[derive(Clone, Debug, PartialEq)]
struct TextureKey {
    /// (frame index, mode, frame pointer).
    frame: (u64, ViewMode, usize),
    /// The texture's rectangle on screen, in pixels.
    pixels: Rect,
    /// The image's top-left corner on screen (pixels) and screen pixels per image pixel.
    origin: Pos2,
    zoom: f32,
    background: Color32,
    /// Boxes drawn into the texture: the selected component's label.
    boxes: Option<Option<u32>>,
}

impl Default for ViewPanel {
    fn default() -> Self {
        Self::new()
    }
}

impl ViewPanel {
    pub fn new() -> Self {
        Self {
            texture: None,
            shown: None,
            zoom: None,
            pan: Vec2::ZERO,
            last_overlay: OverlayStats::default(),
            last_map: None,
            uploads: 0,
        }
    }

    /// Back to "fit the frame into the panel".
    pub fn reset_zoom(&mut self) {
        self.zoom = None;
    }

    #[cfg(test)]
    pub fn zoom(&self) -> Option<f32> {
        self.zoom
    }

    /// Where image point (x, y) (pixel-index coordinates: pixel centres at +0.5) was drawn in
    /// the last pass; None before the first frame was shown.
    #[cfg(test)]
    pub fn image_to_screen(&self, x: f32, y: f32) -> Option<Pos2> {
        self.last_map.as_ref().map(|m| m.to_screen(x, y))
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        let Some(frame) = state.frame.clone() else {
            ui.centered_and_justified(|ui| {
                ui.label("Waiting for the first frame…");
            });
            return;
        };
        let (rect, response) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        let zoom = self.zoom_and_pan(ui, &response, rect, &frame, state);
        let to_screen = ScreenMap {
            origin: rect.min + self.pan,
            zoom,
        };
        let painter = ui.painter_at(rect);
        let overlays = state.settings.overlays;
        let visible = if overlays {
            visible_components(&frame, rect, &to_screen)
        } else {
            Vec::new()
        };
        // Only boxes to draw: they go into the texture.
        let baked = boxes_only(visible.len()) && visible.len() <= MAX_BOXES;
        let baked_boxes = baked.then_some(visible.as_slice());
        let Some(texture_rect) =
            self.update_texture(ui, rect, &frame, state, &to_screen, baked_boxes)
        else {
            return;
        };
        let Some(texture) = &self.texture else {
            return;
        };
        painter.image(
            texture.id(),
            texture_rect,
            Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0)),
            Color32::WHITE,
        );
        take_click(&response, &to_screen, &frame, state);
        self.last_overlay = if overlays {
            let options = OverlayOptions {
                selected: state.selected,
                ids: state.settings.ids,
                tails: state.settings.show_tails.then_some(&state.tracks),
                boxes_drawn: baked,
            };
            draw_overlay(&painter, &frame, &visible, &to_screen, &options)
        } else {
            OverlayStats::default()
        };
        if overlays {
            self.last_overlay.markers = markers_overlay(&painter, &frame, state, &to_screen);
        }
        draw_regions(&painter, state, &to_screen);
        draw_reference_points(&painter, state, &to_screen);
        let mut summary = overlay_summary(&frame, &self.last_overlay, overlays);
        if let Some(at) = selected_world_text(&frame, state) {
            summary += &at;
        }
        summary_line(ui, &painter, rect, summary);
        self.last_map = Some(to_screen);
    }

    /// Zoom about the pointer (wheel or pinch), pan by dragging, double-click to fit, and the
    /// jump to a component picked in the table. Returns the zoom for this pass.
    fn zoom_and_pan(
        &mut self,
        ui: &egui::Ui,
        response: &egui::Response,
        rect: Rect,
        frame: &FrameResult,
        state: &mut AppState,
    ) -> f32 {
        let image_size = Vec2::new(frame.grey.width as f32, frame.grey.height as f32);
        let fit = (rect.width() / image_size.x).min(rect.height() / image_size.y);
        let mut zoom = match self.zoom {
            Some(z) => z,
            None => {
                self.pan = (rect.size() - image_size * fit) / 2.0;
                fit
            }
        };
        if response.hovered() {
            let (scroll, pinch) = ui.input(|i| (i.smooth_scroll_delta.y, i.zoom_delta()));
            let factor = pinch * (scroll / 200.0).exp();
            if factor != 1.0 {
                let new_zoom = (zoom * factor).clamp(fit.min(1.0) * 0.25, 64.0);
                if let Some(p) = response.hover_pos() {
                    let at = p - rect.min;
                    self.pan = at - (at - self.pan) * (new_zoom / zoom);
                }
                zoom = new_zoom;
                self.zoom = Some(zoom);
            }
        }
        if response.dragged() {
            self.pan += response.drag_delta();
            self.zoom = Some(zoom);
        }
        if response.double_clicked() {
            self.zoom = None;
        }
        if state.focus_selected {
            state.focus_selected = false;
            if let Some(c) = state.selected_component() {
                // Close enough to read the ids around it.
                zoom = zoom.max(fit * 4.0).clamp(4.0, 64.0);
                let centre = Vec2::new(c.centroid_x as f32 + 0.5, c.centroid_y as f32 + 0.5);
                self.pan = rect.size() / 2.0 - centre * zoom;
                self.zoom = Some(zoom);
            }
        }
        zoom
    }

    /// Redraws and uploads the texture when what it shows has changed. Returns where it goes
    /// on screen (points); None when the view has no pixels. `baked_boxes`: the boxes drawn
    /// into the texture, when only boxes are drawn.
    fn update_texture(
        &mut self,
        ui: &egui::Ui,
        rect: Rect,
        frame: &Arc<FrameResult>,
        state: &AppState,
        to_screen: &ScreenMap,
        baked_boxes: Option<&[Visible]>,
    ) -> Option<Rect> {
        // The texture covers the view's pixels exactly, so it maps 1:1 onto the screen.
        let ppp = ui.ctx().pixels_per_point();
        let pixels = (rect * ppp).round();
        if pixels.width() < 1.0 || pixels.height() < 1.0 {
            return None;
        }
        let key = TextureKey {
            frame: (
                frame.index,
                state.settings.view,
                Arc::as_ptr(frame) as usize,
            ),
            pixels,
            origin: to_screen.origin * ppp - pixels.min.to_vec2(),
            zoom: to_screen.zoom * ppp,
            background: ui.visuals().extreme_bg_color,
            boxes: baked_boxes.map(|_| state.selected),
        };
        if self.shown.as_ref() != Some(&key) {
            let mut image = compose(frame, &key);
            if let Some(visible) = baked_boxes {
                draw_boxes(&mut image, visible, state.selected, ppp, pixels.min);
            }
            match &mut self.texture {
                Some(t) => t.set(image, TextureOptions::NEAREST),
                None => {
                    self.texture = Some(ui.ctx().load_texture(
                        "frame",
                        image,
                        TextureOptions::NEAREST,
                    ))
                }
            }
            self.shown = Some(key);
            self.uploads += 1;
        }
        Some(pixels / ppp)
    }
}

/// A click in the view: while reference points are picked, it adds one; while a region is
/// drawn, it adds a corner (pixel-index coordinates: the pixel under the pointer is centred
/// on its index); otherwise it picks the smallest component whose box holds the pointer.
fn take_click(
    response: &egui::Response,
    to_screen: &ScreenMap,
    frame: &FrameResult,
    state: &mut AppState,
) {
    if !response.clicked() || response.double_clicked() {
        return;
    }
    let Some(p) = response.interact_pointer_pos() else {
        return;
    };
    let q = to_screen.to_image(p);
    let at = [q.x as f64 - 0.5, q.y as f64 - 0.5];
    if state.world.picking {
        state.world.add(at);
        state.world.apply(&mut state.settings);
    } else if let Some(corners) = state.masks.drawing.as_mut() {
        corners.push(at);
    } else {
        let label = frame
            .components
            .iter()
            .filter(|c| box_contains(c, q))
            .min_by_key(|c| c.area)
            .map(|c| c.label);
        state.select(label);
    }
}

/// The summary under the frame: a label (not painted text) so screen readers and the UI tests
/// can read it.
fn summary_line(ui: &mut egui::Ui, painter: &egui::Painter, rect: Rect, summary: String) {
    let line = Rect::from_min_max(
        rect.left_bottom() + Vec2::new(6.0, -22.0),
        rect.right_bottom() + Vec2::new(-6.0, -4.0),
    );
    painter.rect_filled(line, 2.0, Color32::from_black_alpha(140));
    ui.put(
        line,
        egui::Label::new(egui::RichText::new(summary).color(Color32::WHITE)).truncate(),
    );
}

/// The mask's regions (outlined) and the region being drawn (its corners joined, the last to
/// the pointer's next click).
fn draw_regions(painter: &egui::Painter, state: &AppState, map: &ScreenMap) {
    // Pixel-index coordinates to the texture's (pixel centres at +0.5).
    let at = |p: [f64; 2]| map.to_screen(p[0] as f32 + 0.5, p[1] as f32 + 0.5);
    let outline = egui::Stroke::new(1.5, Color32::from_rgb(255, 200, 0));
    if let Some(mask) = state.masks.mask.as_deref() {
        for roi in &mask.rois {
            let corners: Vec<[f64; 2]> = match roi {
                Roi::Polygon(points) => points.clone(),
                Roi::Rect {
                    left,
                    top,
                    width,
                    height,
                } => {
                    let (l, t) = (*left as f64 - 0.5, *top as f64 - 0.5);
                    let (r, b) = (l + *width as f64, t + *height as f64);
                    vec![[l, t], [r, t], [r, b], [l, b]]
                }
            };
            let mut points: Vec<Pos2> = corners.into_iter().map(at).collect();
            if let Some(&first) = points.first() {
                points.push(first);
            }
            painter.add(egui::Shape::line(points, outline));
        }
    }
    if let Some(corners) = &state.masks.drawing {
        let points: Vec<Pos2> = corners.iter().copied().map(at).collect();
        painter.add(egui::Shape::line(points.clone(), outline));
        for p in points {
            painter.circle_filled(p, 3.0, outline.color);
        }
    }
}

/// The reference points being edited: a ring and the point's number at each.
fn draw_reference_points(painter: &egui::Painter, state: &AppState, map: &ScreenMap) {
    let colour = super::world::POINT_COLOUR;
    for (i, row) in state.world.rows.iter().enumerate() {
        let p = map.to_screen(row.image[0] as f32 + 0.5, row.image[1] as f32 + 0.5);
        painter.circle_stroke(p, 5.0, egui::Stroke::new(2.0, colour));
        painter.text(
            p + Vec2::new(7.0, -7.0),
            egui::Align2::LEFT_BOTTOM,
            format!("{}", i + 1),
            egui::FontId::proportional(13.0),
            colour,
        );
    }
}

/// " · selected at (X, Y) units": the selected component's world position, when the frame
/// has world coordinates.
fn selected_world_text(frame: &FrameResult, state: &AppState) -> Option<String> {
    let label = state.selected?;
    let i = frame.components.iter().position(|c| c.label == label)?;
    let [x, y] = *frame.world.get(i)?;
    let units = state
        .settings
        .world
        .as_ref()
        .map_or("", |w| w.units.as_str());
    Some(
        format!(" · selected at ({x:.2}, {y:.2}) {units}")
            .trim_end()
            .to_string(),
    )
}

/// The frame's markers over it; their axes need the lens calibration of the world mapping and
/// the markers' length (the axes are that long, as the marker's side).
fn markers_overlay(
    painter: &egui::Painter,
    frame: &FrameResult,
    state: &AppState,
    map: &ScreenMap,
) -> MarkerOverlay {
    let calibration = state.settings.world.as_ref().and_then(|w| w.calibration);
    let axes = calibration.as_ref().zip(state.settings.markers.length);
    // Marker corners have pixel centres at whole coordinates; the map at +0.5.
    let to_screen = |[x, y]: [f64; 2]| map.to_screen(x as f32 + 0.5, y as f32 + 0.5);
    draw_markers(painter, frame, &to_screen, axes)
}

/// Image pixel coordinates ↔ screen points.
#[derive(Clone, Debug)]
struct ScreenMap {
    origin: Pos2,
    zoom: f32,
}

impl ScreenMap {
    fn to_screen(&self, x: f32, y: f32) -> Pos2 {
        self.origin + Vec2::new(x, y) * self.zoom
    }
    fn to_image(&self, p: Pos2) -> Pos2 {
        ((p - self.origin) / self.zoom).to_pos2()
    }
}

fn box_contains(c: &ComponentStats, p: Pos2) -> bool {
    p.x >= c.left as f32
        && p.y >= c.top as f32
        && p.x < (c.left + c.width) as f32
        && p.y < (c.top + c.height) as f32
}

/// What the overlay shows besides the boxes.
struct OverlayOptions<'a> {
    /// The selected component's label.
    selected: Option<u32>,
    ids: bool,
    /// Tails of the tracks in view, from this history; None: no tails.
    tails: Option<&'a TrackHistory>,
    /// The boxes are already in the frame's texture.
    boxes_drawn: bool,
}

/// A component in view: its row in `frame.components`, itself, and its box on screen.
type Visible<'a> = (usize, &'a ComponentStats, Rect);

/// The components whose boxes meet `clip`.
fn visible_components<'a>(frame: &'a FrameResult, clip: Rect, map: &ScreenMap) -> Vec<Visible<'a>> {
    frame
        .components
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let r = Rect::from_min_max(
                map.to_screen(c.left as f32, c.top as f32),
                map.to_screen((c.left + c.width) as f32, (c.top + c.height) as f32),
            );
            r.intersects(clip).then_some((i, c, r))
        })
        .collect()
}

/// With this many components in view, only their boxes are drawn (no tails, crosses or ids).
fn boxes_only(in_view: usize) -> bool {
    in_view > MAX_CROSSES.min(MAX_TAILS).min(MAX_IDS)
}

/// A box's colour and outline width (points).
fn box_style(selected: bool) -> (Color32, f32) {
    if selected {
        (SELECTED_COLOUR, SELECTED_WIDTH)
    } else {
        (BOX_COLOUR, BOX_WIDTH)
    }
}

/// Draws boxes (unless already drawn into the texture; and, when few enough are in view,
/// trajectory tails, centroid crosses and ids) as one mesh plus a few text shapes.
fn draw_overlay(
    painter: &egui::Painter,
    frame: &FrameResult,
    visible: &[Visible],
    map: &ScreenMap,
    options: &OverlayOptions,
) -> OverlayStats {
    let selected = options.selected;
    let mut stats = OverlayStats {
        in_view: visible.len(),
        ..OverlayStats::default()
    };
    if visible.len() > MAX_BOXES {
        return stats;
    }
    if options.boxes_drawn {
        stats.boxes = visible.len();
        return stats;
    }
    let mut mesh = Mesh::default();
    // Tails first, so the boxes and crosses are drawn over them.
    if let Some(history) = options.tails {
        if visible.len() <= MAX_TAILS {
            stats.tails = add_tails(&mut mesh, frame, visible, map, history, selected);
        }
    }
    let crosses = visible.len() <= MAX_CROSSES;
    for (_, c, r) in visible {
        let (colour, w) = box_style(selected == Some(c.label));
        // Outline just outside the component's pixels, so it does not hide them.
        for bar in frame_bars(r.expand(w), w) {
            mesh.add_colored_rect(bar, colour);
        }
        stats.boxes += 1;
        if crosses {
            let p = map.to_screen(c.centroid_x as f32 + 0.5, c.centroid_y as f32 + 0.5);
            let arm = 4.0;
            mesh.add_colored_rect(
                Rect::from_center_size(p, Vec2::new(2.0 * arm + 1.0, 1.0)),
                CROSS_COLOUR,
            );
            mesh.add_colored_rect(
                Rect::from_center_size(p, Vec2::new(1.0, 2.0 * arm + 1.0)),
                CROSS_COLOUR,
            );
            stats.crosses += 1;
        }
    }
    painter.add(Shape::mesh(mesh));

    let ids = options.ids && visible.len() <= MAX_IDS;
    if ids {
        let font = egui::FontId::monospace(11.0);
        for (i, c, r) in visible {
            if r.width() >= MIN_BOX_FOR_ID || selected == Some(c.label) {
                painter.text(
                    r.left_top() + Vec2::new(0.0, -3.0),
                    egui::Align2::LEFT_BOTTOM,
                    id_text(frame, *i, c),
                    font.clone(),
                    BOX_COLOUR,
                );
                stats.ids += 1;
            }
        }
    }
    stats
}

/// The overlay's name for component row `i`: its track ID (`#17`) when it has one, else its
/// label.
fn id_text(frame: &FrameResult, i: usize, c: &ComponentStats) -> String {
    match frame.track_ids.get(i) {
        Some(&id) if id != 0 => format!("#{id}"),
        _ => c.label.to_string(),
    }
}

/// Adds the trajectory tails of the visible components' tracks to `mesh`: a polyline per track
/// whose alpha falls with age (newest point opaque, a point `tail_len - 1` frames old
/// transparent). Returns how many tails were drawn (tracks that moved on screen).
fn add_tails(
    mesh: &mut Mesh,
    frame: &FrameResult,
    visible: &[Visible],
    map: &ScreenMap,
    history: &TrackHistory,
    selected: Option<u32>,
) -> usize {
    let span = history.tail_len().saturating_sub(1).max(1) as f32;
    let mut drawn = 0;
    // One tail's points on screen with their alpha (reused between tails).
    let mut points: Vec<(Pos2, f32)> = Vec::new();
    for (i, c, _) in visible {
        let Some(tail) = frame
            .track_ids
            .get(*i)
            .filter(|&&id| id != 0)
            .and_then(|&id| history.tail(id))
        else {
            continue;
        };
        if tail.points.len() < 2 {
            continue;
        }
        points.clear();
        let newest = tail.points.len() - 1;
        for (k, p) in tail.points.iter().enumerate() {
            let age = frame.index.saturating_sub(p.frame) as f32;
            let alpha = (1.0 - age / span).clamp(0.0, 1.0);
            let at = map.to_screen(p.x as f32 + 0.5, p.y as f32 + 0.5);
            // Points less than a screen point apart add nothing visible, only vertices (a
            // zoomed-out view); the newest is always kept so the tail ends at the marker.
            let close = points.last().is_some_and(|(q, _)| q.distance(at) < 1.0);
            if !close || k == newest {
                points.push((at, alpha));
            }
        }
        let colour = if selected == Some(c.label) {
            SELECTED_COLOUR
        } else {
            TAIL_COLOUR
        };
        let mut any = false;
        for pair in points.windows(2) {
            let ((a, alpha_a), (b, alpha_b)) = (pair[0], pair[1]);
            any |= add_segment(
                mesh,
                a,
                b,
                colour.gamma_multiply(alpha_a),
                colour.gamma_multiply(alpha_b),
            );
        }
        if any {
            drawn += 1;
        }
    }
    drawn
}

/// A segment from `a` to `b` as one quad `TAIL_WIDTH` wide, its colour blended from `ca` to
/// `cb`. Returns false (adds nothing) for a segment too short to have a direction.
fn add_segment(mesh: &mut Mesh, a: Pos2, b: Pos2, ca: Color32, cb: Color32) -> bool {
    let d = b - a;
    let len = d.length();
    if len < 1e-3 {
        return false;
    }
    let n = Vec2::new(-d.y, d.x) * (TAIL_WIDTH / 2.0 / len);
    let base = mesh.vertices.len() as u32;
    mesh.colored_vertex(a + n, ca);
    mesh.colored_vertex(a - n, ca);
    mesh.colored_vertex(b + n, cb);
    mesh.colored_vertex(b - n, cb);
    mesh.add_triangle(base, base + 1, base + 2);
    mesh.add_triangle(base + 1, base + 3, base + 2);
    true
}

/// A rectangle outline of width `w` inside `r`, as four bars that do not overlap.
fn frame_bars(r: Rect, w: f32) -> [Rect; 4] {
    let (l, t, rt, b) = (r.left(), r.top(), r.right(), r.bottom());
    [
        Rect::from_min_max(Pos2::new(l, t), Pos2::new(rt, t + w)),
        Rect::from_min_max(Pos2::new(l, b - w), Pos2::new(rt, b)),
        Rect::from_min_max(Pos2::new(l, t + w), Pos2::new(l + w, b - w)),
        Rect::from_min_max(Pos2::new(rt - w, t + w), Pos2::new(rt, b - w)),
    ]
}

/// Draws the boxes of `visible` (screen points) into the view's texture `image`, whose top-left
/// corner is at screen pixel `corner`: the mesh's bars, filled as a rasterizer fills them.
fn draw_boxes(
    image: &mut ColorImage,
    visible: &[Visible],
    selected: Option<u32>,
    pixels_per_point: f32,
    corner: Pos2,
) {
    for (_, c, r) in visible {
        let (colour, w) = box_style(selected == Some(c.label));
        let r = (r.expand(w) * pixels_per_point).translate(-corner.to_vec2());
        for bar in frame_bars(r, w * pixels_per_point) {
            fill_rect(image, bar, colour);
        }
    }
}

/// Paints the pixels of `image` whose centres lie in `r` (pixel coordinates), as a rasterizer
/// fills a rectangle.
fn fill_rect(image: &mut ColorImage, r: Rect, colour: Color32) {
    let [w, h] = image.size;
    let span = |lo: f32, hi: f32, n: usize| {
        let first = (lo - 0.5).ceil().clamp(0.0, n as f32) as usize;
        let end = (hi - 0.5).ceil().clamp(0.0, n as f32) as usize;
        first..end.max(first)
    };
    let xs = span(r.left(), r.right(), w);
    for y in span(r.top(), r.bottom(), h) {
        image.pixels[y * w + xs.start..y * w + xs.end].fill(colour);
    }
}

/// One line under the frame: counts, and why details are left out.
pub fn overlay_summary(frame: &FrameResult, drawn: &OverlayStats, overlays: bool) -> String {
    let mut s = format!(
        "frame {} · {}×{} · {} component(s)",
        frame.index,
        frame.grey.width,
        frame.grey.height,
        frame.components.len()
    );
    if frame.all_count as usize != frame.components.len() {
        s += &format!(" of {} (filtered)", frame.all_count);
    }
    if !overlays {
        return s;
    }
    s += &format!(" · {} in view", drawn.in_view);
    if drawn.in_view > MAX_BOXES {
        s += " · too many to draw: zoom in";
    } else if drawn.crosses < drawn.boxes {
        s += " · centroids hidden: zoom in";
    } else if drawn.in_view > MAX_IDS {
        s += " · ids hidden: zoom in";
    }
    s
}

/// What the view shows of a frame: grey, the mask (white on black) or a colour per label. A
/// mask or label view asked for after the frame was made shows grey until the pipeline sends
/// one with it.
#[derive(Clone, Copy)]
enum Pixels<'a> {
    Grey(&'a [u8]),
    Mask(&'a [u8]),
    Labels(&'a [u32]),
}

impl<'a> Pixels<'a> {
    fn of(frame: &'a FrameResult, mode: ViewMode) -> Self {
        match (mode, &frame.binary, &frame.labels) {
            (ViewMode::Binary, Some(b), _) => Pixels::Mask(&b.data),
            (ViewMode::Labels, _, Some(l)) => Pixels::Labels(&l.data),
            _ => Pixels::Grey(&frame.grey.data),
        }
    }

    /// Fills `out` with the frame's pixels at `columns` of the row starting at offset `row`.
    fn row(self, out: &mut [Color32], row: usize, columns: &[u32]) {
        fn go<T: Copy>(out: &mut [Color32], src: &[T], columns: &[u32], f: impl Fn(T) -> Color32) {
            for (p, &x) in out.iter_mut().zip(columns) {
                *p = f(src[x as usize]);
            }
        }
        match self {
            Pixels::Grey(d) => go(out, &d[row..], columns, Color32::from_gray),
            Pixels::Mask(d) => go(out, &d[row..], columns, |v| Color32::from_gray(v * 255)),
            Pixels::Labels(d) => go(out, &d[row..], columns, label_colour),
        }
    }
}

/// The whole frame as an image for `mode` (one texel per pixel).
#[cfg(test)]
pub fn frame_image(frame: &FrameResult, mode: ViewMode) -> ColorImage {
    let (w, h) = (frame.grey.width as usize, frame.grey.height as usize);
    let columns: Vec<u32> = (0..w as u32).collect();
    let mut image = ColorImage::filled([w, h], Color32::BLACK);
    let pixels = Pixels::of(frame, mode);
    for (y, out) in image.pixels.chunks_exact_mut(w.max(1)).enumerate() {
        pixels.row(out, y * w, &columns);
    }
    image
}

/// The view's texture for `key`: each screen pixel shows the frame pixel under its centre (as
/// a texture with nearest-pixel sampling would), `key.background` where there is no frame.
fn compose(frame: &FrameResult, key: &TextureKey) -> ColorImage {
    let (w, h) = (key.pixels.width() as usize, key.pixels.height() as usize);
    let (fw, fh) = (frame.grey.width as usize, frame.grey.height as usize);
    // The frame pixel under the centre of screen pixel `i` along one axis, if any.
    let source = |i: usize, origin: f32, n: usize| {
        let s = ((i as f32 + 0.5 - origin) / key.zoom).floor();
        (s >= 0.0 && s < n as f32).then_some(s as u32)
    };
    // Screen columns showing the frame are one run: its start and the frame column of each.
    let first = (0..w).find(|&x| source(x, key.origin.x, fw).is_some());
    let columns: Vec<u32> = first
        .map(|x0| (x0..w).map_while(|x| source(x, key.origin.x, fw)).collect())
        .unwrap_or_default();
    let x0 = first.unwrap_or(0);
    let mut image = ColorImage::filled([w, h], key.background);
    let pixels = Pixels::of(frame, key.frame.1);
    let mut previous: Option<(u32, usize)> = None;
    for y in 0..h {
        let Some(sy) = source(y, key.origin.y, fh) else {
            continue;
        };
        let out = y * w + x0..y * w + x0 + columns.len();
        match previous {
            // Zoomed in, screen rows repeat frame rows.
            Some((py, start)) if py == sy => image
                .pixels
                .copy_within(start..start + columns.len(), out.start),
            _ => pixels.row(&mut image.pixels[out.clone()], sy as usize * fw, &columns),
        }
        previous = Some((sy, out.start));
    }
    image
}

/// A stable, well-spread colour per label (0 = background, black).
pub fn label_colour(label: u32) -> Color32 {
    if label == 0 {
        return Color32::BLACK;
    }
    palette()[label as usize % PALETTE_LEN]
}

const PALETTE_LEN: usize = 64;

/// Golden-ratio hue steps, so neighbouring labels differ; fixed saturation and value keep every
/// label bright. Made once: a label view converts millions of pixels per frame.
fn palette() -> &'static [Color32; PALETTE_LEN] {
    static PALETTE: std::sync::OnceLock<[Color32; PALETTE_LEN]> = std::sync::OnceLock::new();
    PALETTE.get_or_init(|| {
        std::array::from_fn(|i| {
            let hue = (i as f32 * 0.618_034).fract();
            Color32::from(egui::ecolor::Hsva::new(hue, 0.75, 0.95, 1.0))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::Backends;
    use crate::frame::disc_grid::disc_grid;
    use crate::ui::still::label_frame;
    use crate::ui::UiSettings;
    use std::sync::Arc;

    fn frame() -> FrameResult {
        let grey = Arc::new(disc_grid(40, 20, 4, 2, 3.0).unwrap());
        let settings = UiSettings::default().pipeline_settings();
        label_frame(grey, 0, &settings, &Backends::cpu_only()).unwrap()
    }

    fn key(size: [f32; 2], origin: Pos2, zoom: f32) -> TextureKey {
        TextureKey {
            frame: (0, ViewMode::Grey, 0),
            pixels: Rect::from_min_size(Pos2::ZERO, size.into()),
            origin,
            zoom,
            background: Color32::RED,
            boxes: None,
        }
    }

    #[test]
    fn texture_at_one_to_one_is_the_frame() {
        let f = frame();
        let image = compose(&f, &key([40.0, 20.0], Pos2::ZERO, 1.0));
        assert_eq!(image, frame_image(&f, ViewMode::Grey));
    }

    #[test]
    fn texture_samples_the_pixel_under_each_centre() {
        let f = frame();
        let (origin, zoom) = (Pos2::new(3.0, 1.0), 2.0);
        let image = compose(&f, &key([90.0, 50.0], origin, zoom));
        for y in 0..50 {
            for x in 0..90 {
                let (sx, sy) = (
                    ((x as f32 + 0.5 - origin.x) / zoom).floor(),
                    ((y as f32 + 0.5 - origin.y) / zoom).floor(),
                );
                let want = if (0.0..40.0).contains(&sx) && (0.0..20.0).contains(&sy) {
                    Color32::from_gray(f.grey.data[sy as usize * 40 + sx as usize])
                } else {
                    Color32::RED
                };
                assert_eq!(image.pixels[y * 90 + x], want, "({x}, {y})");
            }
        }
    }

    #[test]
    fn rectangles_fill_the_pixels_whose_centres_they_hold() {
        let mut image = ColorImage::filled([5, 3], Color32::BLACK);
        fill_rect(
            &mut image,
            Rect::from_min_max(Pos2::new(1.5, 0.4), Pos2::new(3.5, 1.6)),
            Color32::WHITE,
        );
        let white: Vec<(usize, usize)> = (0..15)
            .filter(|i| image.pixels[*i] == Color32::WHITE)
            .map(|i| (i % 5, i / 5))
            .collect();
        assert_eq!(white, [(1, 0), (2, 0), (1, 1), (2, 1)]);
        // Off the image: clipped.
        fill_rect(
            &mut image,
            Rect::from_min_max(Pos2::new(-9.0, -9.0), Pos2::new(0.0, 9.0)),
            Color32::WHITE,
        );
        assert_eq!(
            image
                .pixels
                .iter()
                .filter(|p| **p == Color32::WHITE)
                .count(),
            4
        );
    }

    #[test]
    fn boxes_in_the_texture_sit_just_outside_the_component() {
        let f = frame();
        let c = &f.components[0];
        let r = Rect::from_min_max(Pos2::new(10.0, 10.0), Pos2::new(20.0, 20.0));
        let mut image = ColorImage::filled([30, 30], Color32::BLACK);
        draw_boxes(&mut image, &[(0, c, r)], None, 1.0, Pos2::ZERO);
        let at = |image: &ColorImage, x: usize, y: usize| image.pixels[y * 30 + x];
        // 1.5 points wide, outside [10, 20): the bars cover [8.5, 10) and [20, 21.5), so the
        // pixels whose centres they hold are 8 and 9 above and left, 20 below and right.
        for (x, y) in [
            (15, 8),
            (15, 9),
            (8, 15),
            (9, 15),
            (15, 20),
            (20, 15),
            (20, 20),
            (8, 8),
        ] {
            assert_eq!(at(&image, x, y), BOX_COLOUR, "({x}, {y})");
        }
        for (x, y) in [
            (15, 7),
            (15, 10),
            (10, 15),
            (19, 19),
            (21, 15),
            (15, 21),
            (7, 7),
        ] {
            assert_eq!(at(&image, x, y), Color32::BLACK, "({x}, {y})");
        }
        // The selected component's box is wider and yellow.
        draw_boxes(&mut image, &[(0, c, r)], Some(c.label), 1.0, Pos2::ZERO);
        assert_eq!(at(&image, 15, 7), SELECTED_COLOUR);
    }
}
