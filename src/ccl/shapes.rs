//! Shapes that break CCL algorithms (DESIGN.md): used by selftest and the property tests.

use crate::frame::image::BinaryImage;
use crate::frame::random_image::{generate, RandomImageSpec};

/// A named test image.
pub struct Shape {
    pub name: String,
    pub image: BinaryImage,
}

fn shape(name: impl Into<String>, w: u32, h: u32, f: impl Fn(u32, u32) -> bool) -> Shape {
    Shape {
        name: name.into(),
        image: BinaryImage::from_fn(w, h, f).expect("test shapes have valid sizes"),
    }
}

/// Square spiral: one long 1-pixel-wide path, the worst case for iterative algorithms
/// (its geodesic length is about n²/2).
pub fn spiral(n: u32) -> BinaryImage {
    let mut img = BinaryImage::zeros(n, n).expect("n > 0");
    let (mut lo, mut hi) = (0i64, n as i64 - 1);
    let set = |img: &mut BinaryImage, x: i64, y: i64| img.data[(y * n as i64 + x) as usize] = 1;
    // Walls at even offsets from the border, leaving a 1-pixel gap between turns.
    while lo <= hi {
        for x in lo..=hi {
            set(&mut img, x, lo);
        }
        for y in lo..=hi {
            set(&mut img, hi, y);
        }
        for x in lo..=hi {
            set(&mut img, x, hi);
        }
        for y in (lo + 2)..=hi {
            set(&mut img, lo, y);
        }
        if lo + 2 <= hi {
            set(&mut img, lo + 1, lo + 2);
        }
        lo += 2;
        hi -= 2;
    }
    img
}

/// Vertical zig-zag (serpentine): columns joined alternately at the top and bottom.
pub fn zigzag(w: u32, h: u32) -> BinaryImage {
    BinaryImage::from_fn(w, h, |x, y| {
        x % 2 == 0 || (x % 4 == 1 && y == h - 1) || (x % 4 == 3 && y == 0)
    })
    .expect("w, h > 0")
}

/// Every hard shape at the given size.
pub fn hard_shapes(w: u32, h: u32) -> Vec<Shape> {
    let mut v = vec![
        shape(format!("all-zero {w}x{h}"), w, h, |_, _| false),
        shape(format!("all-one {w}x{h}"), w, h, |_, _| true),
        shape(format!("checkerboard {w}x{h}"), w, h, |x, y| {
            (x + y) % 2 == 0
        }),
        shape(format!("horizontal lines {w}x{h}"), w, h, |_, y| y % 2 == 0),
        shape(format!("vertical lines {w}x{h}"), w, h, |x, _| x % 2 == 0),
        shape(format!("diagonal stairs {w}x{h}"), w, h, |x, y| {
            (x + y) % 3 == 0
        }),
        shape(format!("anti-diagonal stairs {w}x{h}"), w, h, |x, y| {
            (x + 3 * h - y) % 4 == 0
        }),
        shape(format!("concave combs {w}x{h}"), w, h, |x, y| {
            y == h - 1 || x % 3 == 0
        }),
        shape(format!("inverted combs {w}x{h}"), w, h, |x, y| {
            y == 0 || x % 3 == 0
        }),
        // Components crossing every 4-row strip border and every 32/64-column warp border.
        shape(format!("strip crossings {w}x{h}"), w, h, |x, y| {
            (y % 4 == 3 || y % 4 == 0) && (x % 32 == 31 || x % 32 == 0 || x % 64 == 63)
                || x % 67 == 5
        }),
        shape(format!("border frame {w}x{h}"), w, h, |x, y| {
            x == 0 || y == 0 || x == w - 1 || y == h - 1
        }),
        Shape {
            name: format!("zig-zag {w}x{h}"),
            image: zigzag(w, h),
        },
    ];
    if w == h {
        v.push(Shape {
            name: format!("spiral {w}x{h}"),
            image: spiral(w),
        });
    }
    v
}

/// The papers' random images over densities 0..1 (step `step`) and the given granularities.
pub fn random_images(w: u32, h: u32, granularities: &[u32], step: f64, seed: u32) -> Vec<Shape> {
    let steps = (1.0 / step).round() as u32;
    let mut v = Vec::new();
    for &g in granularities {
        for i in 0..=steps {
            let d = i as f64 * step;
            let spec = RandomImageSpec {
                width: w,
                height: h,
                density: d,
                granularity: g,
                seed: seed.wrapping_add(i * 131 + g),
            };
            v.push(Shape {
                name: format!("random {w}x{h} d={d:.2} g={g}"),
                image: generate(&spec).expect("valid spec"),
            });
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::cpu::oracle::flood_fill;
    use crate::ccl::Connectivity;

    #[test]
    fn spiral_is_one_component() {
        for n in [1, 2, 5, 8, 33, 64] {
            let (_, m) = flood_fill(&spiral(n), Connectivity::Four);
            assert_eq!(m.len(), 1, "spiral {n}");
        }
    }

    #[test]
    fn zigzag_is_one_component() {
        let (_, m) = flood_fill(&zigzag(33, 9), Connectivity::Four);
        assert_eq!(m.len(), 1);
    }
}
