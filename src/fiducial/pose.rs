//! A square marker's pose from its four corners: IPPE for a square (T. Collins, A. Bartoli,
//! "Infinitesimal Plane-based Pose Estimation", IJCV 109(3), 2014), the method of
//! `cv2.solvePnP(..., flags=cv2.SOLVEPNP_IPPE_SQUARE)`, with the same conventions and results.
//!
//! The marker's frame: origin at its centre, x to the right, y up, z out of its face, so its
//! corners (OpenCV's order: top-left, top-right, bottom-right, bottom-left) lie at (−L/2, L/2),
//! (L/2, L/2), (L/2, −L/2), (−L/2, −L/2). The corners are undistorted as `solvePnP` does
//! (`cv2.undistortPoints`: five fixed-point steps), the homography from the square to them is
//! exact (four points), and IPPE gives the two rotations that agree with the homography's
//! first-order change at the centre; each gets the translation that best fits all four corners,
//! and the one that reprojects better comes first.

use crate::error::{Error, Result};
use crate::geometry::calibration::Calibration;

/// A rotation (axis-angle, OpenCV's `rvec`) and translation of the marker frame in the camera
/// frame, in the unit of the marker length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    pub rvec: [f64; 3],
    pub tvec: [f64; 3],
    /// Sum of the squared distances between the corners and their reprojection, in normalised
    /// image coordinates (undistorted pixels over the focal length).
    pub reprojection_error: f64,
}

type Mat3 = [[f64; 3]; 3];

/// Steps of `cv2.undistortPoints`' fixed-point iteration (its default criteria).
const OPENCV_UNDISTORT_STEPS: usize = 5;

/// The marker's pose from its corners (pixels, OpenCV's order) and side length (any unit):
/// `cv2.solvePnP` with `SOLVEPNP_IPPE_SQUARE`. The other IPPE solution is `square_poses`' second.
pub fn estimate_pose(
    corners: &[[f64; 2]; 4],
    marker_length: f64,
    calibration: &Calibration,
) -> Result<Pose> {
    Ok(square_poses(corners, marker_length, calibration)?[0])
}

/// Both IPPE poses, the one that reprojects better first.
pub fn square_poses(
    corners: &[[f64; 2]; 4],
    marker_length: f64,
    calibration: &Calibration,
) -> Result<[Pose; 2]> {
    if !(marker_length.is_finite() && marker_length > 0.0) {
        return Err(Error::Invalid(format!(
            "marker length {marker_length}: give a positive length"
        )));
    }
    if corners.iter().flatten().any(|v| !v.is_finite()) {
        return Err(Error::Invalid(
            "a marker corner is not a finite number".into(),
        ));
    }
    let image = corners.map(|[u, v]| undistort_normalized(calibration, u, v));
    let h = marker_length / 2.0;
    let object = [[-h, h], [h, h], [h, -h], [-h, -h]];
    let hom = square_homography(&object, &image).ok_or_else(|| {
        Error::Invalid("the four marker corners are degenerate (three on a line)".into())
    })?;
    let [r1, r2] = ippe_rotations(&hom);
    let poses = [r1, r2].map(|r| {
        let t = best_translation(&r, &object, &image);
        Pose {
            rvec: rodrigues(&r),
            tvec: t,
            reprojection_error: reprojection_error(&r, &t, &object, &image),
        }
    });
    Ok(
        if poses[0].reprojection_error > poses[1].reprojection_error {
            [poses[1], poses[0]]
        } else {
            poses
        },
    )
}

/// The normalised ideal image point of pixel (u, v), as `cv2.undistortPoints` computes it.
pub fn undistort_normalized(c: &Calibration, u: f64, v: f64) -> [f64; 2] {
    let [k1, k2, p1, p2, k3] = c.dist;
    let (x0, y0) = ((u - c.cx) * (1.0 / c.fx), (v - c.cy) * (1.0 / c.fy));
    let (mut x, mut y) = (x0, y0);
    for _ in 0..OPENCV_UNDISTORT_STEPS {
        let r2 = x * x + y * y;
        let icdist = 1.0 / (1.0 + ((k3 * r2 + k2) * r2 + k1) * r2);
        if icdist < 0.0 {
            return [x0, y0];
        }
        let dx = 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x);
        let dy = p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y;
        x = (x0 - dx) * icdist;
        y = (y0 - dy) * icdist;
    }
    [x, y]
}

/// The homography (H₂₂ = 1) taking the four plane points to the four image points, exactly.
pub(crate) fn square_homography(from: &[[f64; 2]; 4], to: &[[f64; 2]; 4]) -> Option<Mat3> {
    // h = (h00 h01 h02 h10 h11 h12 h20 h21): u (h20 x + h21 y + 1) = h00 x + h01 y + h02, ...
    let mut a = [[0.0f64; 9]; 8];
    for k in 0..4 {
        let ([x, y], [u, v]) = (from[k], to[k]);
        a[2 * k] = [x, y, 1.0, 0.0, 0.0, 0.0, -u * x, -u * y, u];
        a[2 * k + 1] = [0.0, 0.0, 0.0, x, y, 1.0, -v * x, -v * y, v];
    }
    let h = solve8(a)?;
    Some([[h[0], h[1], h[2]], [h[3], h[4], h[5]], [h[6], h[7], 1.0]])
}

/// Gaussian elimination with partial pivoting on an 8×8 system (right-hand side in column 8).
fn solve8(mut a: [[f64; 9]; 8]) -> Option<[f64; 8]> {
    for col in 0..8 {
        let pivot = (col..8).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        let (done, rest) = a.split_at_mut(col + 1);
        let top = &done[col];
        for row in rest {
            let f = row[col] / top[col];
            for (v, t) in row[col..].iter_mut().zip(&top[col..]) {
                *v -= f * t;
            }
        }
    }
    let mut x = [0.0; 8];
    for row in (0..8).rev() {
        let s: f64 = (row + 1..8).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][8] - s) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// IPPE's two rotations from the homography of a plane whose model is centred on the origin.
fn ippe_rotations(h: &Mat3) -> [Mat3; 2] {
    // Where the centre goes, and the homography's Jacobian there.
    let v = [h[0][2], h[1][2]];
    let j = [
        [h[0][0] - h[2][0] * v[0], h[0][1] - h[2][1] * v[0]],
        [h[1][0] - h[2][0] * v[1], h[1][1] - h[2][1] * v[1]],
    ];
    // Rv turns the optical axis onto the ray through v.
    let t = v[0].hypot(v[1]);
    let rv = if t < 1e-12 {
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    } else {
        let s = (v[0] * v[0] + v[1] * v[1] + 1.0).sqrt();
        let (cos, sin) = (1.0 / s, (1.0 - 1.0 / (s * s)).max(0.0).sqrt());
        let k = [
            [0.0, 0.0, v[0] / t],
            [0.0, 0.0, v[1] / t],
            [-v[0] / t, -v[1] / t, 0.0],
        ];
        let k2 = mul3(&k, &k);
        let mut r = [[0.0; 3]; 3];
        for a in 0..3 {
            for b in 0..3 {
                r[a][b] = (a == b) as u8 as f64 + sin * k[a][b] + (1.0 - cos) * k2[a][b];
            }
        }
        r
    };
    // B = [I | −v] Rv (first two columns); A = B⁻¹ J.
    let b = [
        [rv[0][0] - v[0] * rv[2][0], rv[0][1] - v[0] * rv[2][1]],
        [rv[1][0] - v[1] * rv[2][0], rv[1][1] - v[1] * rv[2][1]],
    ];
    let det = b[0][0] * b[1][1] - b[0][1] * b[1][0];
    let binv = [
        [b[1][1] / det, -b[0][1] / det],
        [-b[1][0] / det, b[0][0] / det],
    ];
    let a = [
        [
            binv[0][0] * j[0][0] + binv[0][1] * j[1][0],
            binv[0][0] * j[0][1] + binv[0][1] * j[1][1],
        ],
        [
            binv[1][0] * j[0][0] + binv[1][1] * j[1][0],
            binv[1][0] * j[0][1] + binv[1][1] * j[1][1],
        ],
    ];
    // The largest singular value of A scales it to the top-left block of a rotation.
    let ata = [
        a[0][0] * a[0][0] + a[1][0] * a[1][0],
        a[0][0] * a[0][1] + a[1][0] * a[1][1],
        a[0][1] * a[0][1] + a[1][1] * a[1][1],
    ];
    let (tr, dt) = (ata[0] + ata[2], ata[0] * ata[2] - ata[1] * ata[1]);
    let gamma = ((tr + (tr * tr - 4.0 * dt).max(0.0).sqrt()) / 2.0).sqrt();
    let r22 = [
        [a[0][0] / gamma, a[0][1] / gamma],
        [a[1][0] / gamma, a[1][1] / gamma],
    ];
    // The third row's first two entries complete the columns to unit, orthogonal vectors.
    let m00 = 1.0 - (r22[0][0] * r22[0][0] + r22[1][0] * r22[1][0]);
    let m01 = -(r22[0][0] * r22[0][1] + r22[1][0] * r22[1][1]);
    let m11 = 1.0 - (r22[0][1] * r22[0][1] + r22[1][1] * r22[1][1]);
    let b0 = m00.max(0.0).sqrt();
    let b1 = if m01 < 0.0 { -1.0 } else { 1.0 } * m11.max(0.0).sqrt();
    [1.0, -1.0].map(|sign| {
        let c1 = [r22[0][0], r22[1][0], sign * b0];
        let c2 = [r22[0][1], r22[1][1], sign * b1];
        let c3 = [
            c1[1] * c2[2] - c1[2] * c2[1],
            c1[2] * c2[0] - c1[0] * c2[2],
            c1[0] * c2[1] - c1[1] * c2[0],
        ];
        let local = [
            [c1[0], c2[0], c3[0]],
            [c1[1], c2[1], c3[1]],
            [c1[2], c2[2], c3[2]],
        ];
        mul3(&rv, &local)
    })
}

fn mul3(a: &Mat3, b: &Mat3) -> Mat3 {
    let mut m = [[0.0; 3]; 3];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = (0..3).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    m
}

/// The translation that, with rotation `r`, best fits the image points in the linear sense
/// (x·(R p + t)_z = (R p + t)_x and the same for y, in least squares), as IPPE takes it.
fn best_translation(r: &Mat3, object: &[[f64; 2]; 4], image: &[[f64; 2]; 4]) -> [f64; 3] {
    // Normal equations of rows [1 0 −x], [0 1 −y] with right-hand sides x·rz − rx, y·rz − ry.
    let mut ata = [[0.0f64; 3]; 3];
    let mut atb = [0.0f64; 3];
    for (p, &[x, y]) in object.iter().zip(image) {
        let rp = [0, 1, 2].map(|i| r[i][0] * p[0] + r[i][1] * p[1]);
        let (bx, by) = (x * rp[2] - rp[0], y * rp[2] - rp[1]);
        ata[0][0] += 1.0;
        ata[1][1] += 1.0;
        ata[0][2] -= x;
        ata[1][2] -= y;
        ata[2][2] += x * x + y * y;
        atb[0] += bx;
        atb[1] += by;
        atb[2] -= x * bx + y * by;
    }
    ata[2][0] = ata[0][2];
    ata[2][1] = ata[1][2];
    solve3(&ata, &atb)
}

/// Cramer's rule for a 3×3 system.
fn solve3(a: &Mat3, b: &[f64; 3]) -> [f64; 3] {
    let det = |m: &Mat3| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(a);
    [0, 1, 2].map(|c| {
        let mut m = *a;
        for (row, v) in m.iter_mut().zip(b) {
            row[c] = *v;
        }
        det(&m) / d
    })
}

fn reprojection_error(
    r: &Mat3,
    t: &[f64; 3],
    object: &[[f64; 2]; 4],
    image: &[[f64; 2]; 4],
) -> f64 {
    object
        .iter()
        .zip(image)
        .map(|(p, q)| {
            let c = [0, 1, 2].map(|i| r[i][0] * p[0] + r[i][1] * p[1] + t[i]);
            let (dx, dy) = (c[0] / c[2] - q[0], c[1] / c[2] - q[1]);
            dx * dx + dy * dy
        })
        .sum()
}

/// The axis-angle vector of a rotation matrix (`cv2.Rodrigues`, angle in 0..=π).
pub fn rodrigues(r: &Mat3) -> [f64; 3] {
    let mut v = [r[2][1] - r[1][2], r[0][2] - r[2][0], r[1][0] - r[0][1]];
    let s = ((v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) * 0.25).sqrt();
    let c = ((r[0][0] + r[1][1] + r[2][2] - 1.0) * 0.5).clamp(-1.0, 1.0);
    let theta = c.acos();
    if s >= 1e-5 {
        let k = theta / (2.0 * s);
        return v.map(|x| x * k);
    }
    if c > 0.0 {
        return [0.0; 3];
    }
    // A half turn: the axis from the diagonal, signs from the off-diagonal entries.
    let axis = |d: f64| ((d + 1.0) * 0.5).max(0.0).sqrt();
    v[0] = axis(r[0][0]);
    v[1] = axis(r[1][1]) * if r[0][1] < 0.0 { -1.0 } else { 1.0 };
    v[2] = axis(r[2][2]) * if r[0][2] < 0.0 { -1.0 } else { 1.0 };
    if v[0].abs() < v[1].abs() && v[0].abs() < v[2].abs() && (r[1][2] > 0.0) != (v[1] * v[2] > 0.0)
    {
        v[2] = -v[2];
    }
    let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    v.map(|x| x * theta / n)
}

/// The rotation matrix of an axis-angle vector (`cv2.Rodrigues`' other direction).
pub fn rotation_matrix(rvec: &[f64; 3]) -> Mat3 {
    let theta = (rvec[0] * rvec[0] + rvec[1] * rvec[1] + rvec[2] * rvec[2]).sqrt();
    if theta < 1e-300 {
        return [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    }
    let k = rvec.map(|x| x / theta);
    let (s, c) = theta.sin_cos();
    let mut r = [[0.0; 3]; 3];
    let cross = [[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]];
    for i in 0..3 {
        for j in 0..3 {
            r[i][j] = c * (i == j) as u8 as f64 + (1.0 - c) * k[i] * k[j] + s * cross[i][j];
        }
    }
    r
}

/// Where the point `p` of the marker's frame appears in the image (pixels, pixel centres at
/// whole coordinates, the lens's distortion applied): `cv2.projectPoints` for one point. None for
/// a point at or behind the camera.
pub fn project_point(pose: &Pose, calibration: &Calibration, p: [f64; 3]) -> Option<[f64; 2]> {
    let r = rotation_matrix(&pose.rvec);
    let q = [0, 1, 2].map(|i| r[i][0] * p[0] + r[i][1] * p[1] + r[i][2] * p[2] + pose.tvec[i]);
    if q[2].is_nan() || q[2] <= 0.0 {
        return None;
    }
    let c = calibration;
    let pixel = c.distort_pixel(q[0] / q[2] * c.fx + c.cx, q[1] / q[2] * c.fy + c.cy);
    pixel.iter().all(|v| v.is_finite()).then_some(pixel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(c: &Calibration, r: &Mat3, t: &[f64; 3], p: [f64; 2]) -> [f64; 2] {
        let q = [0, 1, 2].map(|i| r[i][0] * p[0] + r[i][1] * p[1] + t[i]);
        c.distort_pixel(q[0] / q[2] * c.fx + c.cx, q[1] / q[2] * c.fy + c.cy)
    }

    #[test]
    fn recovers_an_exact_pose() {
        let c = Calibration {
            fx: 900.0,
            fy: 910.0,
            cx: 640.0,
            cy: 360.0,
            dist: [0.0; 5],
        };
        let rvec = [2.8, 0.4, -0.3];
        let t = [0.05, -0.02, 0.6];
        let r = rotation_matrix(&rvec);
        let l = 0.1;
        let corners = [
            [-l / 2.0, l / 2.0],
            [l / 2.0, l / 2.0],
            [l / 2.0, -l / 2.0],
            [-l / 2.0, -l / 2.0],
        ]
        .map(|p| project(&c, &r, &t, p));
        let pose = estimate_pose(&corners, l, &c).unwrap();
        for k in 0..3 {
            assert!((pose.rvec[k] - rvec[k]).abs() < 1e-9, "{pose:?}");
            assert!((pose.tvec[k] - t[k]).abs() < 1e-9, "{pose:?}");
        }
        assert!(pose.reprojection_error < 1e-20);
        let back = rodrigues(&rotation_matrix(&[0.0, 3.0, 0.5]));
        assert!((back[1] - 3.0).abs() < 1e-9 && (back[2] - 0.5).abs() < 1e-9);
        assert!(estimate_pose(&corners, 0.0, &c).is_err());
    }

    #[test]
    fn projects_the_marker_frame_back_onto_its_corners() {
        let c = Calibration {
            fx: 800.0,
            fy: 800.0,
            cx: 320.0,
            cy: 240.0,
            dist: [-0.1, 0.01, 0.001, -0.002, 0.0],
        };
        let pose = Pose {
            rvec: [2.9, 0.2, 0.1],
            tvec: [0.02, 0.01, 0.5],
            reprojection_error: 0.0,
        };
        let r = rotation_matrix(&pose.rvec);
        for p in [[-0.05, 0.05], [0.05, -0.05]] {
            let want = project(&c, &r, &pose.tvec, p);
            let got = project_point(&pose, &c, [p[0], p[1], 0.0]).unwrap();
            assert!((got[0] - want[0]).abs() < 1e-9 && (got[1] - want[1]).abs() < 1e-9);
        }
        let behind = Pose {
            tvec: [0.0, 0.0, -0.5],
            ..pose
        };
        assert_eq!(project_point(&behind, &c, [0.0, 0.0, 0.0]), None);
    }
}
