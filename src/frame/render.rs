//! Anti-aliased rendering of filled discs and axis-aligned squares at sub-pixel positions, for
//! the synthetic demo and the sub-pixel accuracy tests.
//!
//! Coordinate convention (the one `ComponentStats` centroids use): pixel (x, y) is the unit
//! square centred on the integer point (x, y), i.e. it covers [x − ½, x + ½) × [y − ½, y + ½).
//! A shape centred at (cx, cy) therefore has its area centroid at (cx, cy) in pixel-index
//! coordinates, and a perfect centroid estimator returns (cx, cy) directly.
//!
//! Each pixel the shape touches is blended towards the shape's intensity by the exact fraction
//! of the pixel's area the shape covers: `new = old + (intensity − old) × coverage`, rounded to
//! the nearest grey level. On a flat background b that is b + (intensity − b) × coverage.
//! Only the shape's bounding box is visited; disc coverage is analytic (exact up to floating
//! point) for edge pixels, 0 or 1 elsewhere. A disc is drawn row by row: the run of pixels it
//! covers whole is set to the intensity in one fill, and coverage is worked out only for the
//! edge pixels on either side (the same grey levels as blending every pixel of the box).

use crate::frame::image::GrayImage;

/// A filled shape in pixel-index coordinates (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Disc {
        cx: f64,
        cy: f64,
        radius: f64,
    },
    /// Axis-aligned square with sides of length `side`.
    Square {
        cx: f64,
        cy: f64,
        side: f64,
    },
}

impl Shape {
    /// Area centroid in pixel-index coordinates.
    pub fn center(&self) -> (f64, f64) {
        match *self {
            Shape::Disc { cx, cy, .. } | Shape::Square { cx, cy, .. } => (cx, cy),
        }
    }

    /// Half of the bounding box's side.
    fn half_extent(&self) -> f64 {
        match *self {
            Shape::Disc { radius, .. } => radius,
            Shape::Square { side, .. } => side / 2.0,
        }
    }

    /// Fraction of pixel (x, y) covered by the shape, in [0, 1].
    pub fn coverage(&self, x: u32, y: u32) -> f64 {
        let (cx, cy) = self.center();
        // The pixel's square relative to the shape's centre.
        let x0 = x as f64 - 0.5 - cx;
        let y0 = y as f64 - 0.5 - cy;
        let (x1, y1) = (x0 + 1.0, y0 + 1.0);
        match *self {
            Shape::Disc { radius, .. } => disc_coverage(radius, x0, x1, y0, y1),
            Shape::Square { side, .. } => {
                let h = side / 2.0;
                let ox = (x1.min(h) - x0.max(-h)).max(0.0);
                let oy = (y1.min(h) - y0.max(-h)).max(0.0);
                ox * oy
            }
        }
    }
}

/// Draws `shape` into `image` with grey level `intensity`. Shapes with a non-finite position or
/// size, or a size ≤ 0, draw nothing; parts outside the image are clipped.
pub fn draw(image: &mut GrayImage, shape: &Shape, intensity: u8) {
    let (cx, cy) = shape.center();
    let h = shape.half_extent();
    if !(cx.is_finite() && cy.is_finite() && h.is_finite() && h > 0.0) {
        return;
    }
    // Pixels whose square meets [c − h, c + h]: x + ½ > c − h and x − ½ < c + h.
    let range = |c: f64, len: u32| -> Option<(u32, u32)> {
        let lo = (c - h - 0.5).floor().max(0.0);
        let hi = (c + h + 0.5).ceil().min(len as f64 - 1.0);
        (lo <= hi).then_some((lo as u32, hi as u32))
    };
    let (Some((xa, xb)), Some((ya, yb))) = (range(cx, image.width), range(cy, image.height)) else {
        return;
    };
    let w = image.width as usize;
    for y in ya..=yb {
        let row = &mut image.data[y as usize * w..(y as usize + 1) * w];
        match *shape {
            Shape::Disc { cx, cy, radius } => {
                // Pixels whose whole square lies inside the disc: blending them by a coverage
                // of 1 gives the intensity itself, so the run is filled directly.
                let y0 = y as f64 - 0.5 - cy;
                let far_y = y0.abs().max((y0 + 1.0).abs());
                let inner = (far_y < radius)
                    .then(|| {
                        let half = (radius * radius - far_y * far_y).sqrt();
                        // x − ½ − cx ≥ −half and x + ½ − cx ≤ half.
                        let lo = (cx - half + 0.5).ceil().max(xa as f64);
                        let hi = (cx + half - 0.5).floor().min(xb as f64);
                        (lo <= hi).then_some((lo as u32, hi as u32))
                    })
                    .flatten();
                match inner {
                    Some((lo, hi)) => {
                        blend_span(row, shape, y, xa..lo, intensity);
                        row[lo as usize..=hi as usize].fill(intensity);
                        blend_span(row, shape, y, hi + 1..xb + 1, intensity);
                    }
                    None => blend_span(row, shape, y, xa..xb + 1, intensity),
                }
            }
            Shape::Square { .. } => blend_span(row, shape, y, xa..xb + 1, intensity),
        }
    }
}

/// Blends pixels `xs` of row `y` towards `intensity` by the shape's coverage of each.
fn blend_span(row: &mut [u8], shape: &Shape, y: u32, xs: std::ops::Range<u32>, intensity: u8) {
    let target = intensity as f64;
    for x in xs {
        let a = shape.coverage(x, y);
        if a > 0.0 {
            let old = row[x as usize] as f64;
            row[x as usize] = (old + (target - old) * a).round().clamp(0.0, 255.0) as u8;
        }
    }
}

/// Area of the disc of radius r centred at the origin inside [x0, x1] × [y0, y1] (x0 < x1, y0 < y1).
fn disc_coverage(r: f64, x0: f64, x1: f64, y0: f64, y1: f64) -> f64 {
    // Quick answers: the square entirely inside or entirely outside.
    let far_x = x0.abs().max(x1.abs());
    let far_y = y0.abs().max(y1.abs());
    if far_x * far_x + far_y * far_y <= r * r {
        return (x1 - x0) * (y1 - y0);
    }
    let near_x = if x0 > 0.0 {
        x0
    } else if x1 < 0.0 {
        -x1
    } else {
        0.0
    };
    let near_y = if y0 > 0.0 {
        y0
    } else if y1 < 0.0 {
        -y1
    } else {
        0.0
    };
    if near_x * near_x + near_y * near_y >= r * r {
        return 0.0;
    }
    disc_rect_area(r, x0, x1, y0, y1)
}

/// ∫ over t in [x0, x1] of the length of [−h(t), h(t)] ∩ [y0, y1], h(t) = √(r² − t²).
/// Between the points where h(t) = |y0| or |y1| the integrand is one smooth form (2h, h − y0,
/// y1 + h, y1 − y0 or 0), each with a closed-form integral.
fn disc_rect_area(r: f64, x0: f64, x1: f64, y0: f64, y1: f64) -> f64 {
    let (a, b) = (x0.max(-r), x1.min(r));
    if a >= b {
        return 0.0;
    }
    let mut cuts = [a, b, 0.0, 0.0, 0.0, 0.0];
    let mut n = 2;
    for y in [y0, y1] {
        if y.abs() < r {
            let t = (r * r - y * y).sqrt();
            for c in [-t, t] {
                if c > a && c < b {
                    cuts[n] = c;
                    n += 1;
                }
            }
        }
    }
    let cuts = &mut cuts[..n];
    cuts.sort_by(f64::total_cmp);
    let h = |t: f64| (r * r - t * t).max(0.0).sqrt();
    // G' = h.
    let g = |t: f64| 0.5 * (t * h(t) + r * r * (t / r).clamp(-1.0, 1.0).asin());
    let mut area = 0.0;
    for pair in cuts.windows(2) {
        let (s, e) = (pair[0], pair[1]);
        if e <= s {
            continue;
        }
        let hm = h(0.5 * (s + e));
        let top_is_h = hm < y1;
        let bottom_is_h = -hm > y0;
        if hm.min(y1) <= (-hm).max(y0) {
            continue; // empty overlap over the whole piece
        }
        let int_h = g(e) - g(s);
        let top = if top_is_h { int_h } else { y1 * (e - s) };
        let bottom = if bottom_is_h { -int_h } else { y0 * (e - s) };
        area += top - bottom;
    }
    area.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coverage by brute-force supersampling (n × n points per pixel).
    fn supersampled(shape: &Shape, x: u32, y: u32, n: u32) -> f64 {
        let (cx, cy) = shape.center();
        let mut inside = 0u32;
        for j in 0..n {
            for i in 0..n {
                let px = x as f64 - 0.5 + (i as f64 + 0.5) / n as f64 - cx;
                let py = y as f64 - 0.5 + (j as f64 + 0.5) / n as f64 - cy;
                let hit = match *shape {
                    Shape::Disc { radius, .. } => px * px + py * py < radius * radius,
                    Shape::Square { side, .. } => px.abs() < side / 2.0 && py.abs() < side / 2.0,
                };
                inside += hit as u32;
            }
        }
        inside as f64 / (n * n) as f64
    }

    #[test]
    fn disc_coverage_matches_supersampling_and_sums_to_the_area() {
        for (cx, cy, r) in [(10.3, 11.7, 4.2), (12.0, 12.0, 0.7), (9.55, 10.05, 7.9)] {
            let disc = Shape::Disc { cx, cy, radius: r };
            let mut total = 0.0;
            for y in 0..24 {
                for x in 0..24 {
                    let a = disc.coverage(x, y);
                    let s = supersampled(&disc, x, y, 200);
                    assert!((a - s).abs() < 0.01, "pixel ({x},{y}): {a} vs {s}");
                    total += a;
                }
            }
            let exact = std::f64::consts::PI * r * r;
            assert!((total - exact).abs() < 1e-9 * exact, "{total} vs {exact}");
        }
    }

    /// Every pixel of the image blended by its coverage: what `draw` must equal.
    fn draw_every_pixel(image: &mut GrayImage, shape: &Shape, intensity: u8) {
        let target = intensity as f64;
        for y in 0..image.height {
            for x in 0..image.width {
                let a = shape.coverage(x, y);
                if a > 0.0 {
                    let i = (y * image.width + x) as usize;
                    let old = image.data[i] as f64;
                    image.data[i] = (old + (target - old) * a).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
    }

    #[test]
    fn disc_runs_equal_blending_every_pixel() {
        let mut seed = 99u64;
        let mut unit = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for trial in 0..400 {
            let (w, h) = (37 + trial % 13, 29 + trial % 7);
            // Noisy background, so a pixel wrongly filled or skipped shows.
            let data = (0..w * h).map(|_| (unit() * 256.0) as u8).collect();
            let mut fast = GrayImage::new(w, h, data).unwrap();
            let mut slow = fast.clone();
            let shape = Shape::Disc {
                cx: -8.0 + unit() * (w as f64 + 16.0),
                cy: -8.0 + unit() * (h as f64 + 16.0),
                // Whole-pixel and half-pixel radii too, where edges meet pixel borders.
                radius: match trial % 4 {
                    0 => (1.0 + unit() * 20.0).round(),
                    1 => 0.5 + (unit() * 20.0).round(),
                    _ => 0.2 + unit() * 25.0,
                },
            };
            let level = if trial % 2 == 0 { 230 } else { 3 };
            draw(&mut fast, &shape, level);
            draw_every_pixel(&mut slow, &shape, level);
            assert_eq!(fast, slow, "{shape:?} on {w}x{h}");
        }
    }

    #[test]
    fn square_coverage_is_exact() {
        let sq = Shape::Square {
            cx: 5.25,
            cy: 6.0,
            side: 3.0,
        };
        // x from 3.75 to 6.75: pixel 4 (3.5..4.5) covers 0.75, pixel 7 (6.5..7.5) 0.25;
        // y from 4.5 to 7.5: rows 5, 6, 7 full.
        assert_eq!(sq.coverage(4, 5), 0.75);
        assert_eq!(sq.coverage(5, 6), 1.0);
        assert_eq!(sq.coverage(6, 7), 1.0);
        assert_eq!(sq.coverage(7, 6), 0.25);
        assert_eq!(sq.coverage(8, 6), 0.0);
        assert_eq!(sq.coverage(5, 4), 0.0);
    }

    #[test]
    fn rendered_centroid_is_the_shape_centre() {
        for shape in [
            Shape::Disc {
                cx: 20.37,
                cy: 18.81,
                radius: 6.3,
            },
            Shape::Square {
                cx: 19.12,
                cy: 21.64,
                side: 9.4,
            },
        ] {
            let mut img = GrayImage::filled(40, 40, 0).unwrap();
            draw(&mut img, &shape, 255);
            let (mut s, mut sx, mut sy) = (0.0, 0.0, 0.0);
            for (i, &v) in img.data.iter().enumerate() {
                let v = v as f64;
                s += v;
                sx += v * (i % 40) as f64;
                sy += v * (i / 40) as f64;
            }
            let (cx, cy) = shape.center();
            // Rounding to grey levels costs a little; well under 0.01 px at this contrast.
            assert!((sx / s - cx).abs() < 0.01, "{shape:?}: x {}", sx / s);
            assert!((sy / s - cy).abs() < 0.01, "{shape:?}: y {}", sy / s);
        }
    }

    #[test]
    fn clips_at_the_border_and_ignores_bad_shapes() {
        let mut img = GrayImage::filled(8, 8, 10).unwrap();
        draw(
            &mut img,
            &Shape::Disc {
                cx: -1.0,
                cy: 3.0,
                radius: 2.5,
            },
            200,
        );
        assert!(img.data[3 * 8] > 10);
        assert_eq!(img.data[3 * 8 + 3], 10);
        let before = img.clone();
        for bad in [
            Shape::Disc {
                cx: f64::NAN,
                cy: 1.0,
                radius: 2.0,
            },
            Shape::Square {
                cx: 1.0,
                cy: 1.0,
                side: -1.0,
            },
            Shape::Disc {
                cx: 100.0,
                cy: 1.0,
                radius: 2.0,
            },
        ] {
            draw(&mut img, &bad, 200);
        }
        assert_eq!(img, before);
    }

    #[test]
    fn blends_towards_darker_intensity() {
        let mut img = GrayImage::filled(10, 10, 200).unwrap();
        draw(
            &mut img,
            &Shape::Square {
                cx: 4.5,
                cy: 4.0,
                side: 2.0,
            },
            0,
        );
        // x from 3.5 to 5.5: pixels 4 and 5 are fully covered; y from 3 to 5: rows 3, 5 half.
        assert_eq!(img.data[4 * 10 + 4], 0);
        assert_eq!(img.data[3 * 10 + 4], 100);
        assert_eq!(img.data[4 * 10 + 3], 200);
    }
}
