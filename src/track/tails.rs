//! Trajectory tails of confirmed tracks: one ring of `len` points per tail, all in one buffer
//! whose rings are handed to new tails as tracks end. A tentative track has none, so the
//! thousands of noise tracks a cluttered frame starts cost no tail storage at all.

use super::TailPoint;

/// No ring (a tentative track, or tails turned off).
pub(crate) const NO_TAIL: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct Tails {
    /// Points per ring (`TrackerConfig::tail_len`).
    len: usize,
    /// Ring r is `points[r * len..(r + 1) * len]`.
    points: Vec<TailPoint>,
    /// Per ring: the slot of its oldest point and the points it holds.
    rings: Vec<(u32, u32)>,
    /// Rings no track holds.
    free: Vec<u32>,
}

impl Tails {
    pub(crate) fn new(len: usize) -> Self {
        Self {
            len,
            ..Self::default()
        }
    }

    /// Appends `p` to the ring `*ring`, taking a ring first if it has none; the oldest point
    /// goes when the ring is full.
    pub(crate) fn push(&mut self, ring: &mut u32, p: TailPoint) {
        if self.len == 0 {
            return;
        }
        if *ring == NO_TAIL {
            *ring = match self.free.pop() {
                Some(r) => r,
                None => {
                    self.points.resize(self.points.len() + self.len, p);
                    self.rings.push((0, 0));
                    (self.rings.len() - 1) as u32
                }
            };
            self.rings[*ring as usize] = (0, 0);
        }
        let r = *ring as usize;
        let (oldest, count) = &mut self.rings[r];
        let (oldest_at, held) = (*oldest as usize, *count as usize);
        // oldest + held < 2·len: a subtraction wraps it (no division).
        let mut at = oldest_at + held;
        if at >= self.len {
            at -= self.len;
        }
        self.points[r * self.len + at] = p;
        if held < self.len {
            *count += 1;
        } else {
            *oldest = if oldest_at + 1 == self.len {
                0
            } else {
                *oldest + 1
            };
        }
    }

    /// Gives `ring` back (its track ended).
    pub(crate) fn release(&mut self, ring: u32) {
        if ring != NO_TAIL {
            self.free.push(ring);
        }
    }

    /// Forgets every ring (every track ended); the storage stays for the next ones.
    pub(crate) fn clear(&mut self) {
        self.free.clear();
        self.free.extend((0..self.rings.len() as u32).rev());
    }

    /// The points of `ring`, oldest first (none for `NO_TAIL`).
    pub(crate) fn points(&self, ring: u32) -> impl Iterator<Item = TailPoint> + '_ {
        let (oldest, count) = match self.rings.get(ring as usize) {
            Some(&(oldest, count)) if ring != NO_TAIL => (oldest as usize, count as usize),
            _ => (0, 0),
        };
        let base = ring as usize * self.len;
        (0..count).map(move |k| self.points[base + (oldest + k) % self.len])
    }

    /// Rings held and free (for tests of the storage bound).
    #[cfg(test)]
    pub(crate) fn rings(&self) -> (usize, usize) {
        (self.rings.len() - self.free.len(), self.free.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(frame: u64) -> TailPoint {
        TailPoint {
            frame,
            x: frame as f64,
            y: 0.0,
        }
    }

    #[test]
    fn rings_keep_the_newest_points_and_are_reused() {
        let mut tails = Tails::new(3);
        let (mut a, mut b) = (NO_TAIL, NO_TAIL);
        assert_eq!(tails.points(a).count(), 0);
        for f in 0..5 {
            tails.push(&mut a, p(f));
        }
        tails.push(&mut b, p(10));
        let frames = |tails: &Tails, r| tails.points(r).map(|q| q.frame).collect::<Vec<_>>();
        assert_eq!(frames(&tails, a), [2, 3, 4]);
        assert_eq!(frames(&tails, b), [10]);
        tails.release(a);
        let mut c = NO_TAIL;
        tails.push(&mut c, p(20));
        assert_eq!(c, a, "the freed ring is reused");
        assert_eq!(frames(&tails, c), [20]);
        assert_eq!(tails.rings(), (2, 0));
        tails.clear();
        assert_eq!(tails.rings(), (0, 2));
        // Tails off: nothing is stored.
        let mut off = Tails::new(0);
        let mut r = NO_TAIL;
        off.push(&mut r, p(1));
        assert_eq!((r, off.points(r).count()), (NO_TAIL, 0));
    }
}
