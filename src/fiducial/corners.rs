//! Sub-pixel corners from edge lines: each side of a candidate quad is re-measured on the grey
//! image at many points along it (across the side, the strongest dark-to-light rise finds the
//! edge and the area under the grey profile between the dark and light levels places it to a
//! fraction of a pixel), a straight line is fitted to those points, and the corners are where
//! neighbouring lines meet. A corner found this way uses every pixel of its two sides, not the
//! few around the corner (which blur rounds off), so it stays put under blur and noise.

use super::candidates::Quad;
use crate::frame::image::GrayImage;

/// The grey value at (x, y), pixel centres at whole coordinates, bilinear between them; None
/// outside the image.
#[inline]
pub fn bilinear(grey: &GrayImage, x: f64, y: f64) -> Option<f64> {
    let (w, h) = (grey.width as usize, grey.height as usize);
    if !(x >= 0.0 && y >= 0.0 && x <= (w - 1) as f64 && y <= (h - 1) as f64) {
        return None;
    }
    // x, y ≥ 0: truncation is the floor (and no call to libm's floor on the x86-64 baseline).
    let (x0, y0) = (x as usize, y as usize);
    let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
    let (fx, fy) = (x - x0 as f64, y - y0 as f64);
    let p = |x: usize, y: usize| grey.data[y * w + x] as f64;
    let top = p(x0, y0) + (p(x1, y0) - p(x0, y0)) * fx;
    let bottom = p(x0, y1) + (p(x1, y1) - p(x0, y1)) * fx;
    Some(top + (bottom - top) * fy)
}

/// A line a·x + b·y = c with (a, b) a unit normal pointing out of the quad.
#[derive(Clone, Copy, Debug)]
struct Line {
    a: f64,
    b: f64,
    c: f64,
}

/// The smallest rise (grey levels per pixel) that counts as an edge.
const MIN_EDGE_RISE: f64 = 3.0;

/// The quad with its corners moved onto the intersections of the fitted side lines; `cell` is
/// the expected size of one marker cell in pixels (the search reaches a fraction of it, so the
/// edges of the inner cells stay out). None when a side shows no clear edge or a corner moves
/// further than the search reach.
pub fn refine_quad(grey: &GrayImage, quad: &Quad, cell: f64) -> Option<Quad> {
    let reach = (0.6 * cell).clamp(1.5, 4.0);
    let mut current = *quad;
    for pass in 0..2 {
        let r = if pass == 0 { reach } else { reach.min(2.5) };
        let mut lines = [Line {
            a: 0.0,
            b: 0.0,
            c: 0.0,
        }; 4];
        for (k, line) in lines.iter_mut().enumerate() {
            *line = fit_side(grey, current[k], current[(k + 1) % 4], r)?;
        }
        let mut next = current;
        for k in 0..4 {
            next[k] = intersect(&lines[(k + 3) % 4], &lines[k])?;
        }
        current = next;
    }
    let moved = (0..4)
        .map(|k| (current[k][0] - quad[k][0]).hypot(current[k][1] - quad[k][1]))
        .fold(0.0, f64::max);
    (moved <= reach + 1.5).then_some(current)
}

/// The edge line of the side from `a` to `b` (clockwise on screen, so the outside is to the
/// left of the direction of travel).
fn fit_side(grey: &GrayImage, a: [f64; 2], b: [f64; 2], reach: f64) -> Option<Line> {
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let len = dx.hypot(dy);
    if len < 4.0 {
        return None;
    }
    let (ux, uy) = (dx / len, dy / len);
    // Outward normal: the direction of travel turned a quarter anticlockwise on screen.
    let (nx, ny) = (uy, -ux);
    let margin = (0.1 * len).max(reach + 0.5);
    let samples = ((len - 2.0 * margin).floor() as usize).clamp(0, 200);
    if samples < 3 {
        return None;
    }
    let step = (len - 2.0 * margin) / (samples - 1) as f64;
    // Profile points every half pixel across the side, one more at each end for the rise.
    let half = (reach * 2.0).ceil() as i32 + 1;
    let mut profile = [0.0f64; 24];
    let mut points: Vec<([f64; 2], f64)> = Vec::with_capacity(samples);
    'along: for i in 0..samples {
        let t = margin + i as f64 * step;
        let (px, py) = (a[0] + ux * t, a[1] + uy * t);
        for (j, o) in (-half..=half).enumerate() {
            let s = o as f64 * 0.5;
            match bilinear(grey, px + nx * s, py + ny * s) {
                Some(v) => profile[j] = v,
                None => continue 'along,
            }
        }
        // Rise over one pixel at each half-pixel offset; the strongest, refined by a parabola.
        let m = (2 * half + 1) as usize;
        let rise = |j: usize| profile[j + 1] - profile[j - 1];
        let (best, at) = (2..m - 2)
            .map(|j| (rise(j), j))
            .fold((f64::MIN, 0), |b, x| if x.0 > b.0 { x } else { b });
        if best < MIN_EDGE_RISE {
            continue;
        }
        // The edge from the area under the profile, in a window centred on the strongest
        // rise: with the dark and light levels read at the window's ends, the dark share of
        // the window is the distance from its inner end to the edge, whatever the blur.
        // A rise at an end of the search (k = 2) gets one more point beyond that end, so that
        // its window too reaches 1.5 px to each side: an edge up to a pixel and a half off the
        // outline's side is still measured (small markers in dim light, where the threshold
        // puts the outline inside the edge).
        let k = at.min(m - 1 - at);
        let mut extended = [0.0f64; 7];
        let (window, lo) = if k >= 3 {
            (&profile[at - k..=at + k], at as i32 - k as i32)
        } else {
            let (beyond, lo) = if at == 2 {
                (-half - 1, -1)
            } else {
                (half + 1, at as i32 - 3)
            };
            let s = beyond as f64 * 0.5;
            let Some(v) = bilinear(grey, px + nx * s, py + ny * s) else {
                continue;
            };
            if at == 2 {
                extended[0] = v;
                extended[1..].copy_from_slice(&profile[..6]);
            } else {
                extended[..6].copy_from_slice(&profile[m - 6..m]);
                extended[6] = v;
            }
            (&extended[..], lo)
        };
        let last = window.len() - 1;
        let dark = 0.5 * (window[0] + window[1]);
        let light = 0.5 * (window[last] + window[last - 1]);
        if light - dark < MIN_EDGE_RISE {
            continue;
        }
        let dark_share: f64 = window
            .windows(2)
            .map(|pair| {
                let mid = 0.5 * (pair[0] + pair[1]);
                ((light - mid) / (light - dark)).clamp(0.0, 1.0) * 0.5
            })
            .sum();
        let s = (lo - half) as f64 * 0.5 + dark_share;
        points.push(([px + nx * s, py + ny * s], best));
    }
    if points.len() < 3 || points.len() * 2 < samples {
        return None;
    }
    let mut line = fit_line(&points, nx, ny)?;
    // Once more without the points far off the first line (a neighbour's edge, a blemish).
    let off = |p: &[f64; 2], l: &Line| (l.a * p[0] + l.b * p[1] - l.c).abs();
    let kept: Vec<([f64; 2], f64)> = points
        .iter()
        .copied()
        .filter(|(p, _)| off(p, &line) <= 0.75)
        .collect();
    if kept.len() >= 3 && kept.len() < points.len() {
        line = fit_line(&kept, nx, ny)?;
    }
    Some(line)
}

/// The weighted total-least-squares line through the points, its normal turned towards
/// (nx, ny).
fn fit_line(points: &[([f64; 2], f64)], nx: f64, ny: f64) -> Option<Line> {
    let wsum: f64 = points.iter().map(|p| p.1).sum();
    let mx = points.iter().map(|p| p.1 * p.0[0]).sum::<f64>() / wsum;
    let my = points.iter().map(|p| p.1 * p.0[1]).sum::<f64>() / wsum;
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for (p, w) in points {
        let (x, y) = (p[0] - mx, p[1] - my);
        sxx += w * x * x;
        sxy += w * x * y;
        syy += w * y * y;
    }
    // The normal is the eigenvector of the smaller eigenvalue of the scatter matrix.
    let theta = 0.5 * (2.0 * sxy).atan2(sxx - syy);
    let (mut a, mut b) = (-theta.sin(), theta.cos());
    if a * nx + b * ny < 0.0 {
        (a, b) = (-a, -b);
    }
    let line = Line {
        a,
        b,
        c: a * mx + b * my,
    };
    line.c.is_finite().then_some(line)
}

fn intersect(p: &Line, q: &Line) -> Option<[f64; 2]> {
    let det = p.a * q.b - p.b * q.a;
    if det.abs() < 1e-9 {
        return None;
    }
    Some([(p.c * q.b - p.b * q.c) / det, (p.a * q.c - p.c * q.a) / det])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_corners_of_a_blurred_square() {
        // A dark square from (20.3, 15.6) to (70.3, 65.6) (pixel centres at whole numbers),
        // area-sampled, on a light background.
        let (w, h) = (100u32, 90u32);
        let mut data = vec![0u8; (w * h) as usize];
        let (x0, y0, x1, y1) = (20.3, 15.6, 70.3, 65.6);
        for y in 0..h {
            for x in 0..w {
                let cover =
                    |lo: f64, hi: f64, p: f64| ((p + 0.5).min(hi) - (p - 0.5).max(lo)).max(0.0);
                let c = cover(x0, x1, x as f64) * cover(y0, y1, y as f64);
                data[(y * w + x) as usize] = (200.0 - 170.0 * c).round() as u8;
            }
        }
        let grey = GrayImage::new(w, h, data).unwrap();
        let coarse = [[21.0, 16.0], [69.0, 17.0], [70.0, 65.0], [20.0, 64.0]];
        let q = refine_quad(&grey, &coarse, 7.0).unwrap();
        let truth = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];
        for k in 0..4 {
            let d = (q[k][0] - truth[k][0]).hypot(q[k][1] - truth[k][1]);
            assert!(d < 0.08, "corner {k}: {:?} vs {:?}", q[k], truth[k]);
        }
    }
}
