//! The window drawn on the CPU, for pictures on machines where wgpu finds no adapter (a GPU
//! server without a display or a software Vulkan/GL driver): egui's tessellated triangles
//! filled pixel by pixel, as egui's own renderers draw them in gamma space: the vertex colour
//! times the texel (both premultiplied sRGBA), blended over what is there with premultiplied
//! alpha. egui feathers every edge with vertex alpha itself, so sampling each pixel at its
//! centre gives its anti-aliasing.

use egui::epaint::ImageDelta;
use egui::epaint::{ClippedPrimitive, Mesh, Primitive, Vertex};
use egui::{Color32, ImageData, TextureFilter, TextureId, TexturesDelta};
use egui_kittest::TestRenderer;
use std::collections::HashMap;

/// A texture as the renderer holds it.
struct Texture {
    size: [usize; 2],
    pixels: Vec<Color32>,
    nearest: bool,
}

impl Texture {
    /// The texel at `uv` (0..1 over the texture), premultiplied, each channel 0..1.
    fn sample(&self, u: f32, v: f32) -> [f32; 4] {
        let [w, h] = self.size;
        if w == 0 || h == 0 {
            return [0.0; 4];
        }
        let at = |x: usize, y: usize| rgba(self.pixels[y * w + x]);
        let (x, y) = (u * w as f32 - 0.5, v * h as f32 - 0.5);
        let clamp = |i: f32, n: usize| (i.max(0.0) as usize).min(n - 1);
        if self.nearest {
            return at(clamp(x + 0.5, w), clamp(y + 0.5, h));
        }
        let (x0, y0) = (x.floor(), y.floor());
        let (fx, fy) = (x - x0, y - y0);
        let (xa, xb) = (clamp(x0, w), clamp(x0 + 1.0, w));
        let (ya, yb) = (clamp(y0, h), clamp(y0 + 1.0, h));
        let (p, q, r, s) = (at(xa, ya), at(xb, ya), at(xa, yb), at(xb, yb));
        std::array::from_fn(|c| {
            let top = p[c] + (q[c] - p[c]) * fx;
            let bottom = r[c] + (s[c] - r[c]) * fx;
            top + (bottom - top) * fy
        })
    }
}

fn rgba(c: Color32) -> [f32; 4] {
    c.to_array().map(|x| x as f32 / 255.0)
}

/// egui_kittest's renderer on the CPU.
#[derive(Default)]
pub struct SoftwareRenderer {
    textures: HashMap<TextureId, Texture>,
}

impl SoftwareRenderer {
    /// One texture update: the whole texture, or a patch of it at `pos`.
    fn apply(&mut self, id: TextureId, d: &ImageDelta) {
        let ImageData::Color(image) = &d.image;
        let nearest = d.options.magnification == TextureFilter::Nearest;
        let Some([x0, y0]) = d.pos else {
            let texture = Texture {
                size: image.size,
                pixels: image.pixels.clone(),
                nearest,
            };
            self.textures.insert(id, texture);
            return;
        };
        let Some(t) = self.textures.get_mut(&id) else {
            return;
        };
        let [w, h] = image.size;
        for y in 0..h.min(t.size[1].saturating_sub(y0)) {
            for x in 0..w.min(t.size[0].saturating_sub(x0)) {
                t.pixels[(y0 + y) * t.size[0] + x0 + x] = image.pixels[y * w + x];
            }
        }
    }
}

impl TestRenderer for SoftwareRenderer {
    fn handle_delta(&mut self, delta: &mut TexturesDelta) {
        for (id, deltas) in &delta.set {
            for d in deltas {
                self.apply(*id, d);
            }
        }
        for id in &delta.free {
            self.textures.remove(id);
        }
    }

    fn render(
        &mut self,
        ctx: &egui::Context,
        output: &egui::FullOutput,
    ) -> Result<image::RgbaImage, String> {
        let ppp = ctx.pixels_per_point();
        let size = ctx.content_rect().size() * ppp;
        let (w, h) = (size.x.round() as usize, size.y.round() as usize);
        let mut canvas = Canvas {
            width: w,
            height: h,
            pixels: vec![[0.0; 4]; w * h],
        };
        for ClippedPrimitive {
            clip_rect,
            primitive,
        } in ctx.tessellate(output.shapes.clone(), ppp)
        {
            // Paint callbacks (custom GPU drawing) have nothing to draw here.
            let Primitive::Mesh(mesh) = primitive else {
                continue;
            };
            let clip = [
                (clip_rect.min.x * ppp).round().max(0.0) as usize,
                (clip_rect.min.y * ppp).round().max(0.0) as usize,
                ((clip_rect.max.x * ppp).round().max(0.0) as usize).min(w),
                ((clip_rect.max.y * ppp).round().max(0.0) as usize).min(h),
            ];
            canvas.mesh(&mesh, self.textures.get(&mesh.texture_id), clip, ppp);
        }
        let bytes = canvas
            .pixels
            .iter()
            .flat_map(|p| p.map(|c| (c.clamp(0.0, 1.0) * 255.0).round() as u8))
            .collect();
        image::RgbaImage::from_raw(w as u32, h as u32, bytes)
            .ok_or_else(|| format!("a {w}x{h} picture"))
    }
}

/// Premultiplied sRGBA pixels, each channel 0..1, row by row.
struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<[f32; 4]>,
}

impl Canvas {
    /// The mesh's triangles within `clip` (pixels: x0, y0, x1, y1, the ends excluded).
    fn mesh(&mut self, mesh: &Mesh, texture: Option<&Texture>, clip: [usize; 4], ppp: f32) {
        for tri in mesh.indices.chunks_exact(3) {
            let vertex = |k: usize| mesh.vertices.get(tri[k] as usize);
            if let (Some(a), Some(b), Some(c)) = (vertex(0), vertex(1), vertex(2)) {
                self.triangle([a, b, c], texture, clip, ppp);
            }
        }
    }

    /// Fills the pixels whose centres lie in the triangle (either winding).
    fn triangle(&mut self, v: [&Vertex; 3], texture: Option<&Texture>, clip: [usize; 4], ppp: f32) {
        let p = v.map(|v| (v.pos.x * ppp, v.pos.y * ppp));
        let edge = |a: (f32, f32), b: (f32, f32), x: f32, y: f32| {
            (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0)
        };
        let area = edge(p[0], p[1], p[2].0, p[2].1);
        if area == 0.0 || !area.is_finite() {
            return;
        }
        let lo = |i: usize| {
            p.iter()
                .map(|q| [q.0, q.1][i])
                .fold(f32::INFINITY, f32::min)
        };
        let hi = |i: usize| {
            p.iter()
                .map(|q| [q.0, q.1][i])
                .fold(f32::NEG_INFINITY, f32::max)
        };
        let x0 = (lo(0).floor().max(0.0) as usize).max(clip[0]);
        let y0 = (lo(1).floor().max(0.0) as usize).max(clip[1]);
        let x1 = ((hi(0).ceil().max(0.0) as usize) + 1)
            .min(clip[2])
            .min(self.width);
        let y1 = ((hi(1).ceil().max(0.0) as usize) + 1)
            .min(clip[3])
            .min(self.height);
        let colors = v.map(|v| rgba(v.color));
        for y in y0..y1 {
            for x in x0..x1 {
                let (cx, cy) = (x as f32 + 0.5, y as f32 + 0.5);
                let w = [
                    edge(p[1], p[2], cx, cy) / area,
                    edge(p[2], p[0], cx, cy) / area,
                    edge(p[0], p[1], cx, cy) / area,
                ];
                if w.iter().any(|&k| k < 0.0) {
                    continue;
                }
                let mix = |f: &dyn Fn(usize) -> f32| w[0] * f(0) + w[1] * f(1) + w[2] * f(2);
                let texel = match texture {
                    Some(t) => t.sample(mix(&|k| v[k].uv.x), mix(&|k| v[k].uv.y)),
                    None => [1.0; 4],
                };
                let src: [f32; 4] = std::array::from_fn(|c| mix(&|k| colors[k][c]) * texel[c]);
                let dst = &mut self.pixels[y * self.width + x];
                *dst = std::array::from_fn(|c| src[c] + dst[c] * (1.0 - src[3]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use egui_kittest::Harness;

    /// A red square, a blue one half covered by a half-transparent white one, and a line of
    /// text on a panel: each pixel drawn the colour egui asked for, the text's pixels
    /// differing from the panel's.
    #[test]
    fn draws_fills_blends_and_text() {
        let mut h = Harness::builder()
            .with_size(egui::vec2(200.0, 120.0))
            .renderer(SoftwareRenderer::default())
            .build_ui(|ui| {
                let p = ui.painter();
                p.rect_filled(
                    egui::Rect::from_min_size((10.0, 10.0).into(), (40.0, 40.0).into()),
                    0.0,
                    Color32::RED,
                );
                p.rect_filled(
                    egui::Rect::from_min_size((60.0, 10.0).into(), (40.0, 40.0).into()),
                    0.0,
                    Color32::BLUE,
                );
                let veil = Color32::from_white_alpha(128);
                p.rect_filled(
                    egui::Rect::from_min_size((80.0, 10.0).into(), (40.0, 40.0).into()),
                    0.0,
                    veil,
                );
                p.text(
                    (10.0, 70.0).into(),
                    egui::Align2::LEFT_TOP,
                    "markerscope",
                    egui::FontId::monospace(20.0),
                    Color32::YELLOW,
                );
            });
        h.run();
        let image = h.render().unwrap();
        let ppp = h.ctx.pixels_per_point();
        let at = |x: f32, y: f32| image.get_pixel((x * ppp) as u32, (y * ppp) as u32).0;
        assert_eq!(image.width(), (200.0 * ppp).round() as u32);
        assert_eq!(at(30.0, 30.0), [255, 0, 0, 255]);
        assert_eq!(at(70.0, 30.0), [0, 0, 255, 255]);
        // Half white over blue, premultiplied: 128 + 255 × (1 − 128/255) each channel.
        let blended = at(90.0, 30.0);
        assert!(
            blended[0].abs_diff(128) <= 1 && blended[2] == 255,
            "{blended:?}"
        );
        // The panel's background, and yellow text somewhere on it.
        let panel = at(150.0, 110.0);
        assert_ne!(panel, [255, 0, 0, 255]);
        let yellow = (70..90)
            .flat_map(|y| (10..150).map(move |x| (x as f32, y as f32)))
            .filter(|&(x, y)| {
                let [r, g, b, _] = at(x, y);
                r > 200 && g > 200 && b < 80
            })
            .count();
        assert!(yellow > 20, "{yellow} yellow pixels of text");
    }
}
