//! The capture thread's output buffers, reused from frame to frame: a frame's mask is written
//! into a buffer that no one else holds any more, and handed to the worker as an `Arc`. When the
//! worker and every consumer have dropped their copies, the buffer is free again. A buffer of
//! another size is resized in place (its memory kept when it shrinks).

use std::sync::Arc;

pub(super) struct BufferRing<T> {
    slots: Vec<Arc<T>>,
    /// Most buffers kept; past it, a busy buffer is left to its holders and replaced.
    capacity: usize,
    /// The slot `claim` handed out last, which `share` hands over.
    claimed: usize,
    /// Where the search for a free slot starts (the one after the last claimed).
    next: usize,
}

impl<T> BufferRing<T> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            slots: Vec::with_capacity(capacity.max(1)),
            capacity: capacity.max(1),
            claimed: 0,
            next: 0,
        }
    }

    /// A buffer that only this ring holds, to fill for the next frame: the next free one, else a
    /// new one from `make` (added while the ring is below capacity, else in place of a busy one).
    pub(super) fn claim(&mut self, make: impl FnOnce() -> T) -> &mut T {
        let n = self.slots.len();
        let free = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| Arc::strong_count(&self.slots[i]) == 1);
        let i = match free {
            Some(i) => i,
            None => {
                if n < self.capacity {
                    self.slots.push(Arc::new(make()));
                    n
                } else {
                    self.slots[self.next] = Arc::new(make());
                    self.next
                }
            }
        };
        self.claimed = i;
        self.next = (i + 1) % self.slots.len();
        // No Weak is ever made, and the strong count is 1: only this ring holds the buffer.
        Arc::get_mut(&mut self.slots[i]).expect("a free buffer is held by the ring alone")
    }

    /// The buffer `claim` handed out, shared with the worker.
    pub(super) fn share(&self) -> Arc<T> {
        self.slots[self.claimed].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn buffers_come_back_when_every_holder_has_dropped_them() {
        let mut ring = BufferRing::new(3);
        let made = Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            Vec::<u8>::with_capacity(16)
        };
        ring.claim(make).push(1);
        let a = ring.share();
        ring.claim(make).push(2);
        let b = ring.share();
        assert_eq!(
            (made.get(), a.as_slice(), b.as_slice()),
            (2, &[1][..], &[2][..])
        );
        drop(a);
        // The first buffer is free again: reused, with its contents (the caller overwrites them).
        let v = ring.claim(make);
        assert_eq!(*v, vec![1]);
        v.clear();
        v.push(3);
        let c = ring.share();
        assert_eq!((made.get(), c.as_slice()), (2, &[3][..]));
        // Both busy (b, c held): a third buffer; then, at capacity, a busy one is replaced and
        // its holder keeps the old contents.
        ring.claim(make).push(4);
        let d = ring.share();
        ring.claim(make).push(5);
        let e = ring.share();
        assert_eq!(made.get(), 4);
        let contents: Vec<&[u8]> = [&b, &c, &d, &e].iter().map(|v| v.as_slice()).collect();
        assert_eq!(contents, [[2], [3], [4], [5]]);
        // Everything dropped: the ring's buffers serve again without new ones.
        drop((b, c, d, e));
        for _ in 0..10 {
            ring.claim(make);
            let _ = ring.share();
        }
        assert_eq!(made.get(), 4);
    }
}
