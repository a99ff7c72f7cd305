//! Steps 3 and 4: numbering each strip's roots, then its statistics rows, the final label of
//! each of its provisional labels and its rows of the label image.

use super::Strip;
use crate::ccl::stats::ComponentStats;
#[cfg(target_arch = "x86_64")]
use crate::frame::cpu::has_v3;
use std::mem::MaybeUninit;

impl Strip {
    /// Step 3: numbers the roots (labels that are still their own parent) in label order.
    pub(super) fn number_roots(&mut self) {
        let base = self.base;
        self.num.clear();
        self.num.reserve(self.parent.len());
        let mut n = 0u32;
        for (l, &p) in self.parent.iter().enumerate() {
            self.num.push(n);
            n += (p == base + l as u32) as u32;
        }
        self.roots = n;
    }

    /// Step 4: the statistics rows of this strip's roots (`out` has exactly `roots` entries).
    pub(super) fn write_stats(&self, offset: u32, out: &mut [MaybeUninit<ComponentStats>]) {
        let base = self.base;
        let mut n = 0usize;
        for (l, &p) in self.parent.iter().enumerate() {
            if p == base + l as u32 {
                out[n].write(self.moments[l].to_stats(offset + n as u32 + 1));
                n += 1;
            }
        }
    }

    /// Step 4: final label of each of this strip's provisional labels.
    pub(super) fn final_labels(
        &self,
        k: usize,
        strips: &[Strip],
        offsets: &[u32],
        stride: u32,
        fin: &mut Vec<u32>,
    ) {
        let base = self.base;
        let off = offsets[k] + 1;
        fin.clear();
        fin.reserve(self.parent.len());
        for (l, &p) in self.parent.iter().enumerate() {
            let f = if p == base + l as u32 {
                off + self.num[l]
            } else if p >= base {
                // A smaller label of this strip: already done.
                fin[(p - base) as usize]
            } else {
                // Linked by the border merge to a label of an earlier strip (rare): follow the
                // chain to the root.
                let mut r = p;
                loop {
                    let o = &strips[(r / stride) as usize];
                    let q = o.parent[(r - o.base) as usize];
                    if q == r {
                        break;
                    }
                    r = q;
                }
                let ok = (r / stride) as usize;
                let o = &strips[ok];
                offsets[ok] + 1 + o.num[(r - o.base) as usize]
            };
            fin.push(f);
        }
    }

    /// Step 4: writes this strip's rows of the label image (every pixel), dispatched like `label`.
    pub(super) fn write_labels(&self, w: usize, fin: &[u32], out: &mut [MaybeUninit<u32>]) {
        #[cfg(target_arch = "x86_64")]
        if has_v3() {
            // SAFETY: the CPU supports every feature `write_labels_v3` is compiled for.
            unsafe { write_labels_v3(self, w, fin, out) };
            return;
        }
        self.write_labels_impl(w, fin, out)
    }

    /// Each row is a sequence of segments (gap, run, gap, run, …, gap) that start at the row's
    /// edges. Segments are written left to right in blocks of 8 that may run past the segment's
    /// end: the next segment starts exactly there and overwrites the excess. Blocks never cross
    /// the row's end (the last segment and segments ending within 7 pixels of it are exact), so
    /// strips never write into each other's rows.
    #[inline(always)]
    fn write_labels_impl(&self, w: usize, fin: &[u32], out: &mut [MaybeUninit<u32>]) {
        let base = self.base;
        // An opaque zero: with a literal 0, LLVM turns the short gap writes into memset calls.
        let zero = std::hint::black_box(0u32);
        for (r, row) in out.chunks_exact_mut(w).enumerate() {
            let (lo, hi) = (self.row_off[r] as usize, self.row_off[r + 1] as usize);
            let mut x = 0usize;
            for i in lo..hi {
                let s = self.edges[2 * i] as usize;
                let e = self.edges[2 * i + 1] as usize;
                let f = fin[(self.run_label[i] - base) as usize];
                put_segment(row, x, s, zero);
                put_segment(row, s, e, f);
                x = e;
            }
            fill(&mut row[x..], 0);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
unsafe fn write_labels_v3(s: &Strip, w: usize, fin: &[u32], out: &mut [MaybeUninit<u32>]) {
    s.write_labels_impl(w, fin, out)
}

/// Writes `v` over `row[a..b]`, possibly also over up to 7 pixels after `b` (see
/// `write_labels_impl`); exact when `b` is within 7 pixels of the row's end.
#[inline(always)]
fn put_segment(row: &mut [MaybeUninit<u32>], a: usize, b: usize, v: u32) {
    if b + 7 <= row.len() {
        let mut q = a;
        while q < b {
            // In bounds: q < b and b + 7 <= len, so q + 8 <= len.
            let block: &mut [MaybeUninit<u32>; 8] = (&mut row[q..q + 8]).try_into().expect("8");
            *block = [MaybeUninit::new(v); 8];
            q += 8;
        }
    } else {
        fill(&mut row[a..b], v);
    }
}

#[inline(always)]
fn fill(s: &mut [MaybeUninit<u32>], v: u32) {
    for p in s {
        p.write(v);
    }
}
