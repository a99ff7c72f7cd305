//! Step 1: runs, provisional labels, union-find and features of one strip (see the module
//! comment of `lsl`).

use super::Strip;
use crate::ccl::stats::Moments;
use crate::ccl::Connectivity;
#[cfg(target_arch = "x86_64")]
use crate::frame::cpu::has_v3;

impl Strip {
    /// Step 1 for one strip, dispatched to a build for the CPU's instruction set (popcnt, BMI,
    /// AVX2 when the CPU has them; the x86-64 baseline otherwise).
    pub(super) fn label(&mut self, data: &[u8], w: usize, conn: Connectivity, stats: bool) {
        #[cfg(target_arch = "x86_64")]
        if has_v3() {
            // SAFETY: the CPU supports every feature `label_v3` is compiled for (checked above).
            unsafe {
                match (conn, stats) {
                    (Connectivity::Four, true) => label_v3::<0, true>(self, data, w),
                    (Connectivity::Four, false) => label_v3::<0, false>(self, data, w),
                    (Connectivity::Eight, true) => label_v3::<1, true>(self, data, w),
                    (Connectivity::Eight, false) => label_v3::<1, false>(self, data, w),
                }
            }
            return;
        }
        match (conn, stats) {
            (Connectivity::Four, true) => self.label_impl::<0, true>(data, w),
            (Connectivity::Four, false) => self.label_impl::<0, false>(data, w),
            (Connectivity::Eight, true) => self.label_impl::<1, true>(data, w),
            (Connectivity::Eight, false) => self.label_impl::<1, false>(data, w),
        }
    }

    /// Step 1: runs, provisional labels, union-find and features of one strip. `D` is 0 for
    /// 4-connectivity and 1 for 8-connectivity: a run [s, e) touches the runs of the row above
    /// that have a pixel in [s - D, e - 1 + D].
    ///
    /// Those runs are found without a sweep: with `er(x)` the number of edges of the row above at
    /// positions ≤ x (its "edge rank", a prefix popcount over the row's 64-bit edge masks), the
    /// touched runs are `er(s - D) / 2 .. (er(e - 1 + D) + 1) / 2`.
    #[inline(always)]
    fn label_impl<const D: u32, const STATS: bool>(&mut self, data: &[u8], w: usize) {
        self.edges.clear();
        self.row_off.clear();
        self.run_label.clear();
        self.parent.clear();
        self.moments.clear();
        self.row_off.push(0);
        let nw = w.div_ceil(64);
        // Edge masks and edge counts before each word, of the row above and of this row. The row
        // above the strip's first row is empty.
        let [em_prev, em_cur] = &mut self.em;
        let [pc_prev, pc_cur] = &mut self.pc;
        em_prev.clear();
        em_prev.resize(nw, 0);
        pc_prev.clear();
        pc_prev.resize(nw, 0);
        em_cur.clear();
        em_cur.resize(nw, 0);
        pc_cur.clear();
        pc_cur.resize(nw, 0);
        let base = self.base;
        let last = w as u32 - 1;
        let mut prev_lo = 0usize;
        for y in self.y0..self.y1 {
            let row = &data[y * w..(y + 1) * w];
            let cur_lo = self.edges.len() / 2;
            extract_runs(row, &mut self.edges, em_cur, pc_cur);
            let cur_hi = self.edges.len() / 2;
            let n_cur = cur_hi - cur_lo;
            self.run_label.reserve(n_cur);
            self.parent.reserve(n_cur);
            if STATS {
                self.moments.reserve(n_cur);
            }
            // SAFETY: see `label_row`; the three vectors have room for `n_cur` more entries,
            // `run_label` holds one label per run before this row, and the edge masks and counts
            // describe the row above (`prev_lo..cur_lo`).
            unsafe {
                let nlab = label_row::<D, STATS>(
                    RowCtx {
                        edges: self.edges.as_ptr(),
                        run_label: self.run_label.as_mut_ptr(),
                        parent: self.parent.as_mut_ptr(),
                        moments: self.moments.as_mut_ptr(),
                        em: em_prev.as_ptr(),
                        pc: pc_prev.as_ptr(),
                        base,
                        y: y as u32,
                        last,
                    },
                    prev_lo,
                    cur_lo,
                    cur_hi,
                    self.parent.len(),
                );
                self.run_label.set_len(cur_hi);
                self.parent.set_len(nlab);
                if STATS {
                    self.moments.set_len(nlab);
                }
            }
            self.row_off.push(cur_hi as u32);
            prev_lo = cur_lo;
            std::mem::swap(em_prev, em_cur);
            std::mem::swap(pc_prev, pc_cur);
        }
        // Point every label at its strip root (parents are smaller, hence already flattened).
        for l in 0..self.parent.len() {
            let p = self.parent[l];
            if p != base + l as u32 {
                self.parent[l] = self.parent[(p - base) as usize];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn label_v3<const D: u32, const STATS: bool>(s: &mut Strip, data: &[u8], w: usize) {
    s.label_impl::<D, STATS>(data, w)
}

#[inline(always)]
fn run_moments(y: u32, s: u32, e: u32) -> Moments {
    let n = (e - s) as u64;
    Moments {
        area: n,
        sum_x: (n * (s as u64 + e as u64 - 1)) >> 1,
        sum_y: n * y as u64,
        min_x: s,
        min_y: y,
        max_x: e - 1,
        max_y: y,
    }
}

/// Raw views of a strip's buffers for `label_row` (no bounds checks, no reloads through `self`).
struct RowCtx {
    edges: *const u32,
    run_label: *mut u32,
    parent: *mut u32,
    moments: *mut Moments,
    em: *const u64,
    pc: *const u32,
    base: u32,
    y: u32,
    last: u32,
}

/// Labels the runs `cur_lo..cur_hi` of one row against the runs `prev_lo..cur_lo` of the row
/// above (see `Strip::label_impl`); `nlab` labels exist before the row; returns the new count.
///
/// # Safety
/// `edges` holds the edges of runs `..cur_hi`; `run_label` holds the labels of runs `..cur_lo`
/// and has room up to `cur_hi`; `parent` (and `moments` when `STATS`) hold `nlab` labels and
/// have room for `cur_hi - cur_lo` more; `em`/`pc` are the edge masks and prefix counts of the
/// row above (the row runs `prev_lo..cur_lo`), covering pixels `0..=last`. Then every index
/// below is in bounds: an edge rank of the row above is at most its edge count, so the touched
/// runs `a..b` lie in `prev_lo..cur_lo`; every stored label is `base + (0..nlab)`.
#[inline(always)]
unsafe fn label_row<const D: u32, const STATS: bool>(
    c: RowCtx,
    prev_lo: usize,
    cur_lo: usize,
    cur_hi: usize,
    mut nlab: usize,
) -> usize {
    let RowCtx {
        edges,
        run_label,
        parent,
        moments,
        em,
        pc,
        base,
        y,
        last,
    } = c;
    // Edges of the row above at positions <= x.
    let er = |x: u32| -> u32 {
        let wi = (x >> 6) as usize;
        *pc.add(wi) + (*em.add(wi) & (!0u64 >> (63 - (x & 63)))).count_ones()
    };
    let find = |mut x: u32| -> u32 {
        loop {
            let p = *parent.add((x - base) as usize);
            if p == x {
                return x;
            }
            let gp = *parent.add((p - base) as usize);
            *parent.add((x - base) as usize) = gp;
            x = gp;
        }
    };
    for i in cur_lo..cur_hi {
        let s = *edges.add(2 * i);
        let e = *edges.add(2 * i + 1);
        let xa = if D == 1 { s.saturating_sub(1) } else { s };
        let xb = if D == 1 { e.min(last) } else { e - 1 };
        let a = prev_lo + (er(xa) >> 1) as usize;
        let b = prev_lo + ((er(xb) + 1) >> 1) as usize;
        debug_assert!(a <= b && b <= cur_lo);
        let lab = if a < b {
            let mut lab = find(*run_label.add(a));
            for k in a + 1..b {
                let r = find(*run_label.add(k));
                if r != lab {
                    let (lo, hi) = if r < lab { (r, lab) } else { (lab, r) };
                    *parent.add((hi - base) as usize) = lo;
                    if STATS {
                        let m = *moments.add((hi - base) as usize);
                        (*moments.add((lo - base) as usize)).merge(&m);
                    }
                    lab = lo;
                }
            }
            if STATS {
                let m = &mut *moments.add((lab - base) as usize);
                let n = (e - s) as u64;
                m.area += n;
                m.sum_x += (n * (s as u64 + e as u64 - 1)) >> 1;
                m.sum_y += n * y as u64;
                m.min_x = m.min_x.min(s);
                m.max_x = m.max_x.max(e - 1);
                // Rows are labeled top to bottom: this run's row is the lowest so far.
                m.max_y = y;
            }
            lab
        } else {
            let lab = base + nlab as u32;
            *parent.add(nlab) = lab;
            if STATS {
                moments.add(nlab).write(run_moments(y, s, e));
            }
            nlab += 1;
            lab
        };
        *run_label.add(i) = lab;
    }
    nlab
}

/// Appends the edges of one row (positions where a pixel differs from its left neighbour, the
/// pixel left of the row being background) to `out`; an odd count is closed with `row.len()`.
/// The appended list is the row's run list: run i = [edge 2i, edge 2i + 1). Also stores the
/// row's edge mask of each 64-pixel word in `em` and the number of edges before it in `pc`.
#[inline(always)]
pub(super) fn extract_runs(row: &[u8], out: &mut Vec<u32>, em: &mut [u64], pc: &mut [u32]) {
    let w = row.len();
    // At most w + 1 edges per row.
    out.reserve(w + 1);
    let start = out.len();
    let spare = &mut out.spare_capacity_mut()[..w + 1];
    let mut n = 0usize;
    let mut carry = 0u64;
    let mut x0 = 0u32;
    let mut chunks = row.chunks_exact(64);
    let mut wi = 0usize;
    for c in &mut chunks {
        let m = mask64(c.try_into().expect("64 bytes"));
        let mut e = m ^ ((m << 1) | carry);
        carry = m >> 63;
        em[wi] = e;
        pc[wi] = n as u32;
        wi += 1;
        while e != 0 {
            // n < w + 1: every edge is a distinct position in 0..=w.
            spare[n].write(x0 + e.trailing_zeros());
            n += 1;
            e &= e - 1;
        }
        x0 += 64;
    }
    let rem = chunks.remainder();
    if !rem.is_empty() {
        let mut m = 0u64;
        for (i, &b) in rem.iter().enumerate() {
            m |= ((b != 0) as u64) << i;
        }
        // Bits past the row are 0, so a run reaching the end gets its closing edge here.
        let mut e = m ^ ((m << 1) | carry);
        em[wi] = e;
        pc[wi] = n as u32;
        while e != 0 {
            spare[n].write(x0 + e.trailing_zeros());
            n += 1;
            e &= e - 1;
        }
    } else if n & 1 == 1 {
        spare[n].write(w as u32);
        n += 1;
    }
    debug_assert!(n % 2 == 0);
    // SAFETY: the first n spare slots were written above.
    unsafe { out.set_len(start + n) };
}

/// Bit i set when byte i is non-zero.
#[inline(always)]
fn mask64(c: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the loads read 4 × 16 bytes of `c`.
        unsafe {
            let z = _mm_setzero_si128();
            let p = c.as_ptr() as *const __m128i;
            let a = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p), z)) as u32 as u64;
            let b = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(1)), z)) as u32 as u64;
            let cc = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(2)), z)) as u32 as u64;
            let d = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(3)), z)) as u32 as u64;
            !(a | (b << 16) | (cc << 32) | (d << 48))
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u64;
        for (i, &b) in c.iter().enumerate() {
            m |= ((b != 0) as u64) << i;
        }
        m
    }
}
