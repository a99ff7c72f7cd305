//! `markerscope bench --conflicts`: the number of feature updates and the estimated number of
//! conflicting updates of each CCA scheme, on the benchmark's random images (Lemaitre et al.
//! 2021, §4.1 and Fig. 5). No GPU is needed: the updates follow from the image alone.
//!
//! If U_l is the number of atomic updates of component l, the estimated conflicts are
//! (Σ_l U_l²) / (Σ_l U_l): the probability that two updates picked at random go to the same
//! address, times the number of updates. One update = one set of feature atomics of a
//! component. The schemes, as the paper defines them:
//! - naive: one update per foreground pixel;
//! - HA: one per sub-run (a run cut at the 32-pixel blocks a warp step covers);
//! - FLSL: one per full run;
//! - HA+CD: one per component per 32-pixel block (the lanes of one component reduce first);
//! - FLSL+CD: one per component per group of 32 consecutive runs of a row (one thread per run).
//!
//! OTF is left out: its updates depend on the order in which merges happen on the GPU.
//! Our `ha4w`/`ha8` aggregate further (per lane over a 32-bit word, then per warp when few
//! components share a row), so they do fewer updates than "HA" here.

use crate::ccl::cpu::lsl::Lsl;
use crate::ccl::{Connectivity, Labeler, Want};
use crate::error::{Error, Result};
use crate::frame::image::LabelImage;
use crate::frame::random_image::image_seed;
use crate::frame::random_image::{generate, RandomImageSpec};

/// Pixels per warp block in the HA schemes, and runs per warp in FLSL+CD.
const WARP: u32 = 32;

pub const SCHEMES: [&str; 5] = ["naive", "HA", "FLSL", "HA+CD", "FLSL+CD"];

/// Updates and estimated conflicts of each scheme (in `SCHEMES` order) on one image.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conflicts {
    pub updates: [u64; 5],
    pub conflicts: [f64; 5],
}

/// Counts the updates of every scheme over a label image numbered 1..=`count`.
pub fn count(labels: &LabelImage, count: u32) -> Conflicts {
    let n = count as usize + 1;
    // Per component: updates of each scheme, and the last (row, block) and (row, run group)
    // it was counted in for the CD schemes (rows and blocks are visited in increasing order).
    let mut u = vec![[0u64; 5]; n];
    let mut last_block = vec![u64::MAX; n];
    let mut last_group = vec![u64::MAX; n];
    let w = labels.width as usize;
    for (y, row) in labels.data.chunks_exact(w.max(1)).enumerate() {
        let blocks_per_row = (w as u64).div_ceil(WARP as u64);
        let mut run_index = 0u64;
        let mut x = 0usize;
        while x < w {
            let l = row[x];
            let x0 = x;
            while x < w && row[x] == l {
                x += 1;
            }
            if l == 0 || l as usize >= n {
                continue;
            }
            let ul = &mut u[l as usize];
            let (b0, b1) = ((x0 as u64) / WARP as u64, (x as u64 - 1) / WARP as u64);
            ul[0] += (x - x0) as u64;
            ul[1] += b1 - b0 + 1;
            ul[2] += 1;
            let row_blocks = y as u64 * blocks_per_row;
            for b in b0..=b1 {
                if last_block[l as usize] != row_blocks + b {
                    last_block[l as usize] = row_blocks + b;
                    ul[3] += 1;
                }
            }
            // Groups of 32 runs per row; a row has fewer than 2^32 runs.
            let group = ((y as u64) << 32) | (run_index / WARP as u64);
            if last_group[l as usize] != group {
                last_group[l as usize] = group;
                ul[4] += 1;
            }
            run_index += 1;
        }
    }
    let mut out = Conflicts::default();
    let mut squares = [0f64; 5];
    for ul in &u[1..] {
        for s in 0..5 {
            out.updates[s] += ul[s];
            squares[s] += (ul[s] as f64) * (ul[s] as f64);
        }
    }
    for ((c, &sq), &n) in out.conflicts.iter_mut().zip(&squares).zip(&out.updates) {
        *c = if n == 0 { 0.0 } else { sq / n as f64 };
    }
    out
}

/// The conflict table for every (size, granularity, connectivity, density) of the plan's
/// flags, as text: one block per (size, g, connectivity), one row per density, and a mean row.
pub fn run(
    sizes: &[(u32, u32)],
    granularities: &[u32],
    connectivities: &[Connectivity],
    densities: &[f64],
    seed: u32,
    mut progress: impl FnMut(&str),
) -> Result<String> {
    let mut lsl = Lsl::new();
    let mut text = String::new();
    text.push_str(
        "Estimated conflicting updates, (Σ U²)/(Σ U) per image (U = updates of a component), \
         and in brackets the updates, in millions\n",
    );
    for &(w, h) in sizes {
        for &g in granularities {
            for &conn in connectivities {
                text.push_str(&format!(
                    "\n{w}x{h}, g = {g}, {conn}-connectivity\n{:>6}",
                    "d"
                ));
                for s in SCHEMES {
                    text.push_str(&format!(" {s:>22}"));
                }
                text.push('\n');
                let mut sum = Conflicts::default();
                for &d in densities {
                    progress(&format!("{w}x{h} g={g} {conn}-conn d={d:.2}"));
                    let image = generate(&RandomImageSpec {
                        width: w,
                        height: h,
                        density: d,
                        granularity: g,
                        seed: image_seed(seed, d, g),
                    })?;
                    let out = lsl.label(&image, conn, Want::Both)?;
                    let labels = out
                        .labels
                        .ok_or_else(|| Error::Invalid("lsl returned no label image".into()))?;
                    let c = count(&labels, out.count);
                    text.push_str(&format!("{d:>6.2}"));
                    for s in 0..5 {
                        text.push_str(&format!(" {}", cell(c.conflicts[s], c.updates[s] as f64)));
                        sum.updates[s] += c.updates[s];
                        sum.conflicts[s] += c.conflicts[s];
                    }
                    text.push('\n');
                }
                let k = densities.len().max(1) as f64;
                text.push_str(&format!("{:>6}", "mean"));
                for s in 0..5 {
                    let cell = cell(sum.conflicts[s] / k, sum.updates[s] as f64 / k);
                    text.push_str(&format!(" {cell}"));
                }
                text.push('\n');
            }
        }
    }
    Ok(text)
}

/// "conflicts (updates in millions)", 22 characters wide.
fn cell(conflicts: f64, updates: f64) -> String {
    format!("{:>22}", format!("{conflicts:.3e} ({:.2})", updates / 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(width: u32, rows: &[&[u32]]) -> LabelImage {
        LabelImage {
            width,
            height: rows.len() as u32,
            data: rows.iter().flat_map(|r| r.iter().copied()).collect(),
        }
    }

    #[test]
    fn counts_follow_each_scheme() {
        // Row 0: component 1 covers x = 30..=33 (crosses the 32-pixel block border); component 2
        // is one pixel at x = 35. Row 1: component 1 again at x = 0..=1.
        let mut r0 = vec![0u32; 40];
        r0[30..34].fill(1);
        r0[35] = 2;
        let mut r1 = vec![0u32; 40];
        r1[0..2].fill(1);
        let c = count(&labels(40, &[&r0, &r1]), 2);
        // naive: pixels; HA: sub-runs (1 is cut in two in row 0); FLSL: runs;
        // HA+CD: (row, block) pairs per component; FLSL+CD: (row, run group) pairs.
        assert_eq!(c.updates, [7, 4, 3, 4, 3]);
        // naive: U = (6, 1): (36 + 1) / 7.
        assert!((c.conflicts[0] - 37.0 / 7.0).abs() < 1e-12);
        // FLSL: U = (2, 1): 5 / 3.
        assert!((c.conflicts[2] - 5.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn cd_counts_one_update_per_component_per_warp() {
        // One row of 64 alternating pixels of one component (8-connectivity would join them; here
        // the labels say so): 32 runs, 2 blocks.
        let row: Vec<u32> = (0..64).map(|x| (x % 2 == 0) as u32).collect();
        let c = count(&labels(64, &[&row]), 1);
        assert_eq!(c.updates, [32, 32, 32, 2, 1]);
        // One component: every update conflicts with every other, conflicts = updates.
        for s in 0..5 {
            assert_eq!(c.conflicts[s], c.updates[s] as f64);
        }
    }

    #[test]
    fn the_table_covers_every_density_and_a_mean() {
        let text = run(
            &[(64, 48)],
            &[1],
            &[Connectivity::Eight],
            &[0.0, 0.5, 1.0],
            1,
            |_| {},
        )
        .unwrap();
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with(['0', '1', 'm']))
            .collect();
        assert_eq!(rows.len(), 4, "{text}");
        // d = 1: one component, one run per row: naive = area, FLSL = rows.
        assert!(rows[2].contains("3.072e3 (0.00)"), "{text}");
        assert!(rows[2].contains("4.800e1 (0.00)"), "{text}");
    }
}
