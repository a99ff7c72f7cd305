//! CPU mirrors of the rules the GPU kernels use to connect segments of adjacent rows, so the
//! rules themselves are tested against the oracle in CI (which has no GPU):
//! - `merges_8`: HA8's bit rule on 32-bit mask words (`merge_rows8_w` in kernels/ha4.cu);
//! - `touching_runs`: FLSL's run range from edge counts (`up_run_range` in kernels/flsl.cu).

use crate::ccl::Connectivity;

/// The merges HA8 issues between row `y` (`cur`) and row `y - 1` (`up`), as pairs of segment
/// head x-coordinates (cur head, up head), computed word by word with the kernel's bit
/// operations. `cur` and `up` are bit-packed rows (bit x % 32 of word x / 32, zero padding).
pub fn merges_8(cur: &[u32], up: &[u32]) -> Vec<(u32, u32)> {
    let heads_of = |row: &[u32]| -> Vec<u32> {
        // heads[w]: segment starts in word w (what WordWalker::heads holds).
        let mut prev_top = 0u32;
        row.iter()
            .map(|&m| {
                let h = m & !((m << 1) | prev_top);
                prev_top = m >> 31;
                h
            })
            .collect()
    };
    let (cur_heads, up_heads) = (heads_of(cur), heads_of(up));
    // Head x of the segment through pixel x of a row (a plain scan: the walker's max-scan).
    let head_through = |row: &[u32], heads: &[u32], x: u32| -> u32 {
        let mut x = x;
        loop {
            let (w, b) = ((x / 32) as usize, x % 32);
            debug_assert!(row[w] >> b & 1 == 1);
            if heads[w] >> b & 1 == 1 {
                return x;
            }
            x -= 1;
        }
    };
    let mut merges = Vec::new();
    for w in 0..cur.len() {
        let (mc, mu) = (cur[w], up[w]);
        let up_prev_top = if w > 0 { up[w - 1] >> 31 } else { 0 };
        let up_next = if w + 1 < up.len() { up[w + 1] } else { 0 };
        let up_left = (mu << 1) | up_prev_top;
        let up_right = (mu >> 1) | (up_next << 31);
        let v = cur_heads[w] & mu;
        let dl = cur_heads[w] & !mu & up_left;
        let dr = mc & !mu & up_right;
        let x0 = w as u32 * 32;
        for b in bits(v) {
            merges.push((x0 + b, head_through(up, &up_heads, x0 + b)));
        }
        for b in bits(dl) {
            merges.push((x0 + b, head_through(up, &up_heads, x0 + b - 1)));
        }
        for b in bits(dr) {
            merges.push((head_through(cur, &cur_heads, x0 + b), x0 + b + 1));
        }
    }
    merges
}

fn bits(mut m: u32) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let b = m.trailing_zeros();
            m &= m - 1;
            b
        })
    })
}

/// The runs of the row above that touch the run [a0, a1) of the current row, as a range of
/// run indices j0..j1 of that row, from `edges_upto(x)` = the number of edges (pixels that
/// differ from their left neighbour; pixel -1 is background) at positions <= x in the row
/// above: run j has its start edge at index 2j and its end edge at 2j + 1. The touching
/// pixels of the row above are lo..=hi = [a0 - d, a1 - 1 + d] clipped to the row
/// (d = 1 for 8-connectivity, 0 for 4).
pub fn touching_runs(
    edges_upto: impl Fn(u32) -> u32,
    a0: u32,
    a1: u32,
    width: u32,
    connectivity: Connectivity,
) -> (u32, u32) {
    let d = u32::from(connectivity == Connectivity::Eight);
    let lo = a0.saturating_sub(d);
    let hi = (a1 - 1 + d).min(width - 1);
    // Runs ending before lo: floor(E(lo - 1 .. ) / 2); a run through lo is counted as touching.
    let j0 = edges_upto(lo) / 2;
    // Runs starting at or before hi: ceil(E(hi) / 2).
    let j1 = edges_upto(hi).div_ceil(2);
    (j0, j1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::cpu::oracle::flood_fill;
    use crate::ccl::partition::same_partition;
    use crate::frame::image::{BinaryImage, LabelImage, PackedBinary};
    use crate::frame::random_image::{generate, RandomImageSpec};

    fn find(p: &mut [u32], mut x: u32) -> u32 {
        while p[x as usize] != x {
            x = p[x as usize];
        }
        x
    }

    fn union(p: &mut [u32], a: u32, b: u32) {
        let (a, b) = (find(p, a), find(p, b));
        p[a.max(b) as usize] = a.min(b);
    }

    fn images() -> Vec<BinaryImage> {
        let mut v = Vec::new();
        for &(w, h) in &[
            (1, 1),
            (1, 9),
            (9, 1),
            (31, 5),
            (32, 6),
            (33, 7),
            (64, 5),
            (97, 13),
        ] {
            for &d in &[0.3, 0.5, 0.7, 1.0] {
                for &g in &[1, 2, 4] {
                    let spec = RandomImageSpec {
                        width: w,
                        height: h,
                        density: d,
                        granularity: g,
                        seed: w * 1000 + h + g,
                    };
                    v.push(generate(&spec).unwrap());
                }
            }
        }
        v.push(BinaryImage::from_fn(70, 9, |x, y| (x + y) % 2 == 0).unwrap());
        v.push(BinaryImage::from_fn(70, 9, |x, y| (x + 2 * y) % 3 == 0).unwrap());
        v
    }

    /// Labels by union-find over per-pixel parents, merging pixels of a row's segments and the
    /// merges of `row_merges`, and writes root + 1 to every foreground pixel.
    fn label_with(img: &BinaryImage, row_merges: impl Fn(u32, &mut [u32])) -> LabelImage {
        let (w, h) = (img.width, img.height);
        let mut p: Vec<u32> = (0..w * h).collect();
        for y in 0..h {
            for x in 1..w {
                if img.get(x, y) && img.get(x - 1, y) {
                    union(&mut p, y * w + x, y * w + x - 1);
                }
            }
        }
        for y in 1..h {
            row_merges(y, &mut p);
        }
        let mut out = LabelImage::zeros(w, h);
        for i in 0..w * h {
            if img.data[i as usize] != 0 {
                out.data[i as usize] = find(&mut p, i) + 1;
            }
        }
        out
    }

    #[test]
    fn ha8_rule_matches_the_oracle() {
        for img in images() {
            let packed = PackedBinary::from_binary(&img);
            let wpr = packed.words_per_row;
            let w = img.width;
            let labels = label_with(&img, |y, p| {
                let cur = &packed.words[y as usize * wpr..][..wpr];
                let up = &packed.words[(y as usize - 1) * wpr..][..wpr];
                let merges = merges_8(cur, up);
                // One merge per touching pair of segments: no pair twice.
                let mut sorted = merges.clone();
                sorted.sort();
                sorted.dedup();
                assert_eq!(sorted.len(), merges.len(), "duplicate merge in row {y}");
                for (xc, xu) in merges {
                    assert!(img.get(xc, y) && img.get(xu, y - 1));
                    union(p, y * w + xc, (y - 1) * w + xu);
                }
            });
            let (oracle, _) = flood_fill(&img, Connectivity::Eight);
            if let Err(e) = same_partition(&oracle, &labels) {
                panic!("{}x{}: {e}", img.width, img.height);
            }
        }
    }

    #[test]
    fn run_range_rule_matches_the_oracle() {
        for img in images() {
            for conn in [Connectivity::Four, Connectivity::Eight] {
                let w = img.width;
                let labels = label_with(&img, |y, p| {
                    let up_edges: Vec<u32> = (0..w)
                        .filter(|&x| img.get(x, y - 1) != (x > 0 && img.get(x - 1, y - 1)))
                        .collect();
                    let edges_upto = |x: u32| up_edges.iter().filter(|&&e| e <= x).count() as u32;
                    let mut x = 0;
                    while x < w {
                        if !img.get(x, y) {
                            x += 1;
                            continue;
                        }
                        let a0 = x;
                        while x < w && img.get(x, y) {
                            x += 1;
                        }
                        let (j0, j1) = touching_runs(edges_upto, a0, x, w, conn);
                        for j in j0..j1 {
                            union(p, y * w + a0, (y - 1) * w + up_edges[2 * j as usize]);
                        }
                    }
                });
                let (oracle, _) = flood_fill(&img, conn);
                if let Err(e) = same_partition(&oracle, &labels) {
                    panic!("{}x{} {conn}: {e}", img.width, img.height);
                }
            }
        }
    }
}
