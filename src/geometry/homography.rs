//! Plane-to-plane homography from point pairs: the normalised direct linear transform (Hartley
//! and Zisserman, algorithm 4.2), least squares for more than four pairs.

use crate::error::{Error, Result};

/// A 3×3 homography, row-major, mapping (x, y, 1) to (X, Y, W) → (X/W, Y/W).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Homography(pub [[f64; 3]; 3]);

impl Homography {
    /// The point `h` maps (x, y) to; None where it maps to infinity (a point on the horizon
    /// line of the plane).
    pub fn apply(&self, x: f64, y: f64) -> Option<[f64; 2]> {
        let m = &self.0;
        let w = m[2][0] * x + m[2][1] * y + m[2][2];
        let u = m[0][0] * x + m[0][1] * y + m[0][2];
        let v = m[1][0] * x + m[1][1] * y + m[1][2];
        (w.abs() > 1e-12 * (u.abs() + v.abs()).max(1e-300)).then(|| [u / w, v / w])
    }

    /// The homography that maps every `from[i]` to `to[i]` (least squares beyond four pairs).
    /// Errors: fewer than four pairs, non-finite coordinates, all points (or, with exactly
    /// four, three of them) on one line, or pairs no homography can join.
    pub fn fit(from: &[[f64; 2]], to: &[[f64; 2]]) -> Result<Homography> {
        let n = from.len();
        if n != to.len() {
            return Err(Error::Invalid(format!(
                "homography: {n} image points but {} world points",
                to.len()
            )));
        }
        if n < 4 {
            return Err(Error::Invalid(format!(
                "homography: {n} reference points given, at least 4 are needed (not three on one line)"
            )));
        }
        if let Some(p) = from
            .iter()
            .chain(to)
            .find(|p| !p[0].is_finite() || !p[1].is_finite())
        {
            return Err(Error::Invalid(format!(
                "homography: the point ({}, {}) is not a finite number",
                p[0], p[1]
            )));
        }
        let (tf, nf) = normalise(from, "image")?;
        let (tt, nt) = normalise(to, "world")?;
        // Two equations per pair in the nine entries of H; AᵀA accumulated directly.
        let mut ata = [[0.0f64; 9]; 9];
        for (p, q) in nf.iter().zip(&nt) {
            let (x, y, u, v) = (p[0], p[1], q[0], q[1]);
            let rows = [
                [-x, -y, -1.0, 0.0, 0.0, 0.0, u * x, u * y, u],
                [0.0, 0.0, 0.0, -x, -y, -1.0, v * x, v * y, v],
            ];
            for r in &rows {
                for i in 0..9 {
                    for j in 0..9 {
                        ata[i][j] += r[i] * r[j];
                    }
                }
            }
        }
        let (values, vectors) = symmetric_eigen(ata);
        let mut order: Vec<usize> = (0..9).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        let (smallest, second) = (order[0], order[1]);
        let largest = values[order[8]].max(1e-300);
        // A second null direction: the pairs do not fix H (degenerate configuration).
        if values[second] / largest < 1e-10 {
            return Err(Error::Invalid(
                "homography: the reference points do not determine a homography (three or more \
                 on one line, or repeated points); spread them over the plane"
                    .into(),
            ));
        }
        let h: Vec<f64> = (0..9).map(|i| vectors[i][smallest]).collect();
        let hn = [[h[0], h[1], h[2]], [h[3], h[4], h[5]], [h[6], h[7], h[8]]];
        if det(&hn).abs() < 1e-9 {
            return Err(Error::Invalid(
                "homography: the reference points give a singular mapping (three of them on one \
                 line); choose points with no three on one line"
                    .into(),
            ));
        }
        // H = Tt⁻¹ · Hn · Tf.
        let m = mul(&mul(&inverse_similarity(&tt), &hn), &tf);
        let s = if m[2][2].abs() > 1e-300 { m[2][2] } else { 1.0 };
        let h = Homography(m.map(|r| r.map(|v| v / s)));
        // Coordinates at the ends of the f64 range (points 1e-300 apart, or 1e300 large) pass
        // the checks above but give a mapping that puts every point nowhere.
        let finite = |p: &[f64; 2]| {
            h.apply(p[0], p[1])
                .is_some_and(|w| w[0].is_finite() && w[1].is_finite())
        };
        if !from.iter().all(finite) {
            return Err(Error::Invalid(
                "homography: the reference points' coordinates are too small or too large to \
                 compute a mapping with (it puts them at no finite place); give them in other \
                 units"
                    .into(),
            ));
        }
        Ok(h)
    }
}

/// The similarity that moves the points' centroid to the origin and their mean distance to
/// √2, and the moved points. Errors when they lie on one line (or are one point).
fn normalise(points: &[[f64; 2]], what: &str) -> Result<([[f64; 3]; 3], Vec<[f64; 2]>)> {
    let n = points.len() as f64;
    let (cx, cy) = points
        .iter()
        .fold((0.0, 0.0), |a, p| (a.0 + p[0] / n, a.1 + p[1] / n));
    let mean = points
        .iter()
        .map(|p| (p[0] - cx).hypot(p[1] - cy))
        .sum::<f64>()
        / n;
    if mean <= 0.0 {
        return Err(Error::Invalid(format!(
            "homography: the {what} points are all the same point"
        )));
    }
    let s = std::f64::consts::SQRT_2 / mean;
    let moved: Vec<[f64; 2]> = points
        .iter()
        .map(|p| [(p[0] - cx) * s, (p[1] - cy) * s])
        .collect();
    // Collinear: the spread across the main direction vanishes.
    let (sxx, syy, sxy) = moved.iter().fold((0.0, 0.0, 0.0), |a, p| {
        (a.0 + p[0] * p[0], a.1 + p[1] * p[1], a.2 + p[0] * p[1])
    });
    let half = ((sxx - syy) / 2.0).hypot(sxy);
    let (big, small) = ((sxx + syy) / 2.0 + half, (sxx + syy) / 2.0 - half);
    if small <= 1e-10 * big {
        return Err(Error::Invalid(format!(
            "homography: the {what} points lie on one line; at least 4 points with no three \
             on one line are needed"
        )));
    }
    if points.len() == 4 {
        for skip in 0..4 {
            let t: Vec<&[f64; 2]> = moved
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, p)| p)
                .collect();
            let area = (t[1][0] - t[0][0]) * (t[2][1] - t[0][1])
                - (t[2][0] - t[0][0]) * (t[1][1] - t[0][1]);
            if area.abs() < 1e-9 {
                return Err(Error::Invalid(format!(
                    "homography: three of the four {what} points lie on one line; move one \
                     of them or add more points"
                )));
            }
        }
    }
    let t = [[s, 0.0, -s * cx], [0.0, s, -s * cy], [0.0, 0.0, 1.0]];
    Ok((t, moved))
}

fn inverse_similarity(t: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let s = t[0][0];
    [
        [1.0 / s, 0.0, -t[0][2] / s],
        [0.0, 1.0 / s, -t[1][2] / s],
        [0.0, 0.0, 1.0],
    ]
}

fn mul(a: &[[f64; 3]; 3], b: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let mut m = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            m[i][j] = (0..3).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    m
}

fn det(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

/// Eigenvalues and eigenvectors (columns) of a symmetric matrix: cyclic Jacobi rotations.
fn symmetric_eigen(mut a: [[f64; 9]; 9]) -> ([f64; 9], [[f64; 9]; 9]) {
    let mut v = [[0.0; 9]; 9];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..9)
            .flat_map(|i| (0..9).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum();
        if off < 1e-30 {
            break;
        }
        for p in 0..9 {
            for q in p + 1..9 {
                if a[p][q].abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..9 {
                    let (akp, akq) = (a[k][p], a[k][q]);
                    a[k][p] = c * akp - s * akq;
                    a[k][q] = s * akp + c * akq;
                }
                for k in 0..9 {
                    let (apk, aqk) = (a[p][k], a[q][k]);
                    a[p][k] = c * apk - s * aqk;
                    a[q][k] = s * apk + c * aqk;
                }
                for row in v.iter_mut() {
                    let (vkp, vkq) = (row[p], row[q]);
                    row[p] = c * vkp - s * vkq;
                    row[q] = s * vkp + c * vkq;
                }
            }
        }
    }
    let values = std::array::from_fn(|i| a[i][i]);
    (values, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: [[f64; 3]; 3] = [
        [0.52, 0.031, -12.0],
        [-0.018, 0.49, 7.5],
        [0.00021, -0.00012, 1.0],
    ];

    fn project(x: f64, y: f64) -> [f64; 2] {
        Homography(H).apply(x, y).unwrap()
    }

    #[test]
    fn recovers_a_known_homography_from_four_and_from_many_points() {
        let four = [[10.0, 20.0], [900.0, 35.0], [870.0, 640.0], [40.0, 610.0]];
        let mut many: Vec<[f64; 2]> = four.to_vec();
        for i in 0..20 {
            many.push([50.0 + 41.0 * i as f64, 100.0 + 23.0 * ((i * 7) % 20) as f64]);
        }
        for points in [&four[..], &many[..]] {
            let world: Vec<[f64; 2]> = points.iter().map(|p| project(p[0], p[1])).collect();
            let h = Homography::fit(points, &world).unwrap();
            for (i, row) in h.0.iter().enumerate() {
                for (j, v) in row.iter().enumerate() {
                    assert!(
                        (v - H[i][j]).abs() < 1e-9 * H[i][j].abs().max(1e-3),
                        "{h:?}"
                    );
                }
            }
            let p = h.apply(333.3, 444.4).unwrap();
            let q = project(333.3, 444.4);
            assert!((p[0] - q[0]).abs() < 1e-9 && (p[1] - q[1]).abs() < 1e-9);
        }
    }

    #[test]
    fn least_squares_averages_noisy_points() {
        let mut image = Vec::new();
        let mut world = Vec::new();
        for i in 0..49 {
            let (x, y) = (20.0 + 90.0 * (i % 7) as f64, 30.0 + 80.0 * (i / 7) as f64);
            image.push([x, y]);
            let w = project(x, y);
            // ±0.01 world units of deterministic noise.
            let e = 0.01 * (((i * 37) % 11) as f64 / 5.0 - 1.0);
            world.push([w[0] + e, w[1] - e]);
        }
        let h = Homography::fit(&image, &world).unwrap();
        let p = h.apply(300.0, 250.0).unwrap();
        let q = project(300.0, 250.0);
        assert!((p[0] - q[0]).hypot(p[1] - q[1]) < 0.01, "{p:?} vs {q:?}");
    }

    #[test]
    fn too_few_and_degenerate_points_are_clear_errors() {
        let three = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]];
        let err = Homography::fit(&three, &three).unwrap_err().to_string();
        assert!(
            err.contains("3 reference points") && err.contains("at least 4"),
            "{err}"
        );
        let line = [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [5.0, 5.0], [7.0, 7.0]];
        let ok = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.2]];
        let err = Homography::fit(&line, &ok).unwrap_err().to_string();
        assert!(err.contains("image points lie on one line"), "{err}");
        let err = Homography::fit(&ok, &line).unwrap_err().to_string();
        assert!(err.contains("world points lie on one line"), "{err}");
        let three_on_a_line = [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 1.0]];
        let square = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]];
        let err = Homography::fit(&three_on_a_line, &square)
            .unwrap_err()
            .to_string();
        assert!(err.contains("three of the four image points"), "{err}");
        let err = Homography::fit(&square, &[[0.0, 0.0]; 4])
            .unwrap_err()
            .to_string();
        assert!(err.contains("all the same point"), "{err}");
        let err = Homography::fit(&square, &[[0.0, f64::NAN]; 4])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a finite number"), "{err}");
        // Finite, but too large to compute with.
        let huge = square.map(|p| p.map(|v| v * 1e300));
        let err = Homography::fit(&square, &huge).unwrap_err().to_string();
        assert!(err.contains("too small or too large"), "{err}");
    }
}
