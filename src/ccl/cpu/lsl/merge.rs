//! Step 2: the border merge, uniting the components that touch across strip borders.
//!
//! In rounds, on the rayon pool: the first unites each pair of strips (0–1, 2–3, …) across the
//! border between them, the next each pair of those pairs (0–3, 4–7, …) across the border in
//! the middle, and so on. A round's groups of strips are disjoint and every union before it
//! stayed within one group, so a find from a group never leaves it: the groups of a round are
//! merged at once, each on its own strips. A component's root is its least label whatever
//! the order of the unions, and its moments are integer sums, so the result is the one a
//! single sweep over the borders gives (on a 16-core host 63 borders took ~0.2 ms one after
//! the other, a fifth of the labeling of a cluttered frame).

use super::{Lsl, Strip};
use rayon::prelude::*;

impl Lsl {
    /// Unites the components touching across each strip border (round by round, see the
    /// module's notes), then points every demoted root straight at its final root.
    pub(super) fn merge_borders(&mut self, stride: u32, d: u32, stats: bool) {
        let n = self.strips.len();
        for s in self.strips.iter_mut() {
            s.demoted.clear();
        }
        let mut group = 2;
        while group / 2 < n {
            let merge = |(g, strips): (usize, &mut [Strip])| {
                if strips.len() > group / 2 {
                    merge_border(strips, g * group, group / 2, stride, d, stats);
                }
            };
            if n >= MIN_PARALLEL_STRIPS {
                self.strips
                    .par_chunks_mut(group)
                    .enumerate()
                    .for_each(merge);
            } else {
                self.strips.chunks_mut(group).enumerate().for_each(merge);
            }
            group *= 2;
        }
        let strips = &mut self.strips[..];
        for k in 0..n {
            for j in 0..strips[k].demoted.len() {
                let dm = strips[k].demoted[j];
                let root = global_find(strips, 0, stride, dm);
                let s = &mut strips[(dm / stride) as usize];
                s.parent[(dm - s.base) as usize] = root;
            }
        }
    }
}

/// With fewer strips the rounds stay on the calling thread.
const MIN_PARALLEL_STRIPS: usize = 8;

/// Unites the components touching across the border above `strips[k]`; `strips` are the
/// strips `first..first + strips.len()` of the image, and every label a find reaches lies
/// in them. The demoted roots are listed in `strips[k].demoted`.
fn merge_border(strips: &mut [Strip], first: usize, k: usize, stride: u32, d: u32, stats: bool) {
    let local = |label: u32| (label / stride) as usize - first;
    let (top, bot) = (&strips[k - 1], &strips[k]);
    let rows_top = top.y1 - top.y0;
    let (p_lo, p_hi) = (
        top.row_off[rows_top - 1] as usize,
        top.row_off[rows_top] as usize,
    );
    let (c_lo, c_hi) = (0usize, bot.row_off[1] as usize);
    if p_lo == p_hi || c_lo == c_hi {
        return;
    }
    let mut j = p_lo;
    for i in c_lo..c_hi {
        let (s, e) = {
            let b = &strips[k];
            (b.edges[2 * i], b.edges[2 * i + 1])
        };
        let top = &strips[k - 1];
        while j < p_hi && top.edges[2 * j + 1] + d <= s {
            j += 1;
        }
        let mut q = j;
        let mut cur = global_find(strips, first, stride, strips[k].run_label[i]);
        while q < p_hi && strips[k - 1].edges[2 * q] < e + d {
            let r = global_find(strips, first, stride, strips[k - 1].run_label[q]);
            if r != cur {
                let (lo, hi) = if r < cur { (r, cur) } else { (cur, r) };
                let hs = &mut strips[local(hi)];
                let hidx = (hi - hs.base) as usize;
                hs.parent[hidx] = lo;
                if stats {
                    let m = hs.moments[hidx];
                    let ls = &mut strips[local(lo)];
                    let lidx = (lo - ls.base) as usize;
                    ls.moments[lidx].merge(&m);
                }
                strips[k].demoted.push(hi);
                cur = lo;
            }
            q += 1;
        }
        if q > j {
            j = q - 1;
        }
    }
}

/// Root of a global label id, following parents across strips (with path halving, so that
/// chains built by many border unions stay short); `strips` are the image's strips from
/// `first` on.
fn global_find(strips: &mut [Strip], first: usize, stride: u32, mut x: u32) -> u32 {
    let local = |label: u32| (label / stride) as usize - first;
    loop {
        let s = &strips[local(x)];
        let p = s.parent[(x - s.base) as usize];
        if p == x {
            return x;
        }
        let ps = &strips[local(p)];
        let gp = ps.parent[(p - ps.base) as usize];
        let s = &mut strips[local(x)];
        let i = (x - s.base) as usize;
        s.parent[i] = gp;
        x = gp;
    }
}
