//! Step 2: the border merge, uniting the components that touch across strip borders.

use super::{Lsl, Strip};

impl Lsl {
    /// Unites the components touching across each strip border (sequential; one row sweep per
    /// border), then points every demoted root straight at its final root.
    pub(super) fn merge_borders(&mut self, stride: u32, d: u32, stats: bool) {
        self.demoted.clear();
        let strips = &mut self.strips[..];
        for k in 1..strips.len() {
            let (top, bot) = (&strips[k - 1], &strips[k]);
            let rows_top = top.y1 - top.y0;
            let (p_lo, p_hi) = (
                top.row_off[rows_top - 1] as usize,
                top.row_off[rows_top] as usize,
            );
            let (c_lo, c_hi) = (0usize, bot.row_off[1] as usize);
            if p_lo == p_hi || c_lo == c_hi {
                continue;
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
                let mut cur = global_find(strips, stride, strips[k].run_label[i]);
                while q < p_hi && strips[k - 1].edges[2 * q] < e + d {
                    let r = global_find(strips, stride, strips[k - 1].run_label[q]);
                    if r != cur {
                        let (lo, hi) = if r < cur { (r, cur) } else { (cur, r) };
                        let hk = (hi / stride) as usize;
                        let lk = (lo / stride) as usize;
                        let hs = &mut strips[hk];
                        let hidx = (hi - hs.base) as usize;
                        hs.parent[hidx] = lo;
                        if stats {
                            let m = hs.moments[hidx];
                            let ls = &mut strips[lk];
                            let lidx = (lo - ls.base) as usize;
                            ls.moments[lidx].merge(&m);
                        }
                        self.demoted.push(hi);
                        cur = lo;
                    }
                    q += 1;
                }
                if q > j {
                    j = q - 1;
                }
            }
        }
        for &dm in &self.demoted {
            let root = global_find(strips, stride, dm);
            let k = (dm / stride) as usize;
            let s = &mut strips[k];
            s.parent[(dm - s.base) as usize] = root;
        }
    }
}

/// Root of a global label id, following parents across strips (with path halving, so that
/// chains built by many border unions stay short).
fn global_find(strips: &mut [Strip], stride: u32, mut x: u32) -> u32 {
    loop {
        let s = &strips[(x / stride) as usize];
        let p = s.parent[(x - s.base) as usize];
        if p == x {
            return x;
        }
        let ps = &strips[(p / stride) as usize];
        let gp = ps.parent[(p - ps.base) as usize];
        let s = &mut strips[(x / stride) as usize];
        let i = (x - s.base) as usize;
        s.parent[i] = gp;
        x = gp;
    }
}
