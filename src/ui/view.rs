//! The frame view: the current frame as one texture (updated in place), zoom and pan, and the
//! component overlay (boxes, crosses and fading trajectory tails) drawn as one batched mesh with
//! off-screen components culled.

use super::config::ViewMode;
use super::state::AppState;
use super::tracks::TrackHistory;
use crate::pipeline::FrameResult;
use crate::stats::ComponentStats;
use egui::epaint::{Mesh, Shape};
use egui::{Color32, ColorImage, Pos2, Rect, Sense, TextureHandle, TextureOptions, Vec2};

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

/// What the last overlay pass drew (tests and the summary line read it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OverlayStats {
    pub in_view: usize,
    pub boxes: usize,
    pub crosses: usize,
    pub ids: usize,
    /// Trajectory tails drawn (tracks in view that moved).
    pub tails: usize,
}

pub struct ViewPanel {
    texture: Option<TextureHandle>,
    /// (frame index, mode, frame pointer) of what the texture holds.
    shown: Option<(u64, ViewMode, usize)>,
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

    pub fn zoom(&self) -> Option<f32> {
        self.zoom
    }

    /// Where image point (x, y) (pixel-index coordinates: pixel centres at +0.5) was drawn in
    /// the last pass; None before the first frame was shown.
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
        let mode = state.settings.view;
        let key = (frame.index, mode, std::sync::Arc::as_ptr(&frame) as usize);
        if self.shown != Some(key) {
            // A mask or label view asked for after the frame was made shows grey until the
            // pipeline sends one with it.
            let image = frame_image(&frame, mode);
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
        let Some(texture) = &self.texture else {
            return;
        };

        let (rect, response) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        let image_size = Vec2::new(frame.grey.width as f32, frame.grey.height as f32);
        let fit = (rect.width() / image_size.x).min(rect.height() / image_size.y);
        let zoom = match self.zoom {
            Some(z) => z,
            None => {
                self.pan = (rect.size() - image_size * fit) / 2.0;
                fit
            }
        };
        let mut zoom = zoom;

        // Zoom about the pointer (wheel or pinch), pan by dragging, double-click to fit.
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

        let to_screen = ScreenMap {
            origin: rect.min + self.pan,
            zoom,
        };
        let image_rect = Rect::from_min_size(to_screen.origin, image_size * zoom);
        let painter = ui.painter_at(rect);
        painter.rect_filled(rect, 0.0, ui.visuals().extreme_bg_color);
        painter.image(
            texture.id(),
            image_rect,
            Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0)),
            Color32::WHITE,
        );

        // A click picks the smallest component whose box holds the pointer.
        if response.clicked() && !response.double_clicked() {
            if let Some(p) = response.interact_pointer_pos() {
                let q = to_screen.to_image(p);
                let label = frame
                    .components
                    .iter()
                    .filter(|c| box_contains(c, q))
                    .min_by_key(|c| c.area)
                    .map(|c| c.label);
                state.select(label);
            }
        }

        self.last_overlay = if state.settings.overlays {
            let options = OverlayOptions {
                selected: state.selected,
                ids: state.settings.ids,
                tails: state.settings.show_tails.then_some(&state.tracks),
            };
            draw_overlay(&painter, rect, &frame, &to_screen, &options)
        } else {
            OverlayStats::default()
        };

        let summary = overlay_summary(&frame, &self.last_overlay, state.settings.overlays);
        // A label (not painted text) so screen readers and the UI tests can read it.
        let line = Rect::from_min_max(
            rect.left_bottom() + Vec2::new(6.0, -22.0),
            rect.right_bottom() + Vec2::new(-6.0, -4.0),
        );
        painter.rect_filled(line, 2.0, Color32::from_black_alpha(140));
        ui.put(
            line,
            egui::Label::new(egui::RichText::new(summary).color(Color32::WHITE)).truncate(),
        );
        self.last_map = Some(to_screen);
    }
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
}

/// Draws boxes (and, when few enough are in view, trajectory tails, centroid crosses and ids) as
/// one mesh plus a few text shapes. Components outside `clip` are skipped.
fn draw_overlay(
    painter: &egui::Painter,
    clip: Rect,
    frame: &FrameResult,
    map: &ScreenMap,
    options: &OverlayOptions,
) -> OverlayStats {
    let selected = options.selected;
    // (row in `frame.components`, component, its box on screen)
    let visible: Vec<(usize, &ComponentStats, Rect)> = frame
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
        .collect();
    let mut stats = OverlayStats {
        in_view: visible.len(),
        ..OverlayStats::default()
    };
    if visible.len() > MAX_BOXES {
        return stats;
    }
    let mut mesh = Mesh::default();
    // Tails first, so the boxes and crosses are drawn over them.
    if let Some(history) = options.tails {
        if visible.len() <= MAX_TAILS {
            stats.tails = add_tails(&mut mesh, frame, &visible, map, history, selected);
        }
    }
    let line = 1.5f32;
    let crosses = visible.len() <= MAX_CROSSES;
    for (_, c, r) in &visible {
        let is_selected = selected == Some(c.label);
        let (colour, w) = if is_selected {
            (SELECTED_COLOUR, 3.0)
        } else {
            (BOX_COLOUR, line)
        };
        // Outline just outside the component's pixels, so it does not hide them.
        let r = r.expand(w);
        add_frame(&mut mesh, r, w, colour);
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
        for (i, c, r) in &visible {
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
    visible: &[(usize, &ComponentStats, Rect)],
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

/// A rectangle outline of width `w` inside `r`, as four quads.
fn add_frame(mesh: &mut Mesh, r: Rect, w: f32, colour: Color32) {
    let (l, t, rt, b) = (r.left(), r.top(), r.right(), r.bottom());
    mesh.add_colored_rect(
        Rect::from_min_max(Pos2::new(l, t), Pos2::new(rt, t + w)),
        colour,
    );
    mesh.add_colored_rect(
        Rect::from_min_max(Pos2::new(l, b - w), Pos2::new(rt, b)),
        colour,
    );
    mesh.add_colored_rect(
        Rect::from_min_max(Pos2::new(l, t + w), Pos2::new(l + w, b - w)),
        colour,
    );
    mesh.add_colored_rect(
        Rect::from_min_max(Pos2::new(rt - w, t + w), Pos2::new(rt, b - w)),
        colour,
    );
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

/// The texture for `mode`: grey, the mask (white on black) or a colour per label.
pub fn frame_image(frame: &FrameResult, mode: ViewMode) -> ColorImage {
    let size = [frame.grey.width as usize, frame.grey.height as usize];
    match mode {
        ViewMode::Binary => {
            if let Some(b) = &frame.binary {
                return ColorImage::from_gray_iter(size, b.data.iter().map(|&v| v * 255));
            }
        }
        ViewMode::Labels => {
            if let Some(l) = &frame.labels {
                let pixels = l.data.iter().map(|&v| label_colour(v)).collect();
                return ColorImage::new(size, pixels);
            }
        }
        ViewMode::Grey => {}
    }
    ColorImage::from_gray(size, &frame.grey.data)
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
