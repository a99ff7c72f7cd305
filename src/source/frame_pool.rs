//! The grey frame buffers a source draws or decodes into, reused once everyone else has let go
//! of them, and page-locked for the GPU's DMA when the source was given a `PageLocker`
//! (`FrameSource::set_page_locker`): each buffer is registered the first time it is reused, and
//! its frames then go up without a copy (`frame::page_lock`). A buffer used once is not
//! registered: when the consumers hold more frames than the pool keeps (a slow writer of
//! results), new buffers come and go, and registering each (0.3–0.7 ms at 1080p) would cost
//! more than copying it.

use crate::error::Result;
use crate::frame::image::GrayImage;
use crate::frame::page_lock::PageLocker;
use std::sync::Arc;

pub struct FramePool {
    /// Frames handed out lately; one no one else holds is written into again.
    buffers: Vec<Arc<GrayImage>>,
    /// Most buffers kept for reuse (frames queued, in flight and on screen, and a spare).
    keep: usize,
    locker: Option<Arc<dyn PageLocker>>,
}

impl FramePool {
    pub fn new(keep: usize, locker: Option<Arc<dyn PageLocker>>) -> FramePool {
        FramePool {
            buffers: Vec::new(),
            keep: keep.max(1),
            locker,
        }
    }

    /// A `width × height` frame written by `fill` into a buffer no one else holds (its old
    /// pixels are there to be overwritten); a reused buffer is page-locked when the pool has a
    /// locker.
    pub fn frame(
        &mut self,
        width: u32,
        height: u32,
        fill: impl FnOnce(&mut GrayImage) -> Result<()>,
    ) -> Result<Arc<GrayImage>> {
        let free = self.buffers.iter().position(|b| Arc::strong_count(b) == 1);
        let (mut buffer, reused) = match free {
            Some(i) => (self.buffers.remove(i), true),
            None => (Arc::new(GrayImage::empty()), false),
        };
        // No Weak is ever made, and the strong count is 1: only this pool holds the buffer.
        let image = Arc::get_mut(&mut buffer).expect("a free buffer is held by the pool alone");
        image.set_size(width, height);
        fill(image)?;
        if let (Some(locker), true) = (&self.locker, reused) {
            image.lock(locker.as_ref());
        }
        self.buffers.push(buffer.clone());
        if self.buffers.len() > self.keep {
            self.buffers.remove(0);
        }
        Ok(buffer)
    }

    /// Buffers kept now.
    pub fn kept(&self) -> usize {
        self.buffers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::page_lock::testing::CountingLocker;

    #[test]
    fn buffers_are_reused_and_registered_once() {
        let counting = Arc::new(CountingLocker::default());
        let locker: Arc<dyn PageLocker> = counting.clone();
        let mut pool = FramePool::new(2, Some(locker));
        let fill = |v: u8| {
            move |g: &mut GrayImage| {
                g.data.fill(v);
                Ok(())
            }
        };
        // Each frame is let go of before the next: one buffer, registered when first reused.
        for v in 0..5 {
            let f = pool.frame(8, 4, fill(v)).unwrap();
            assert_eq!(f.page_locked(), v > 0, "frame {v}");
            assert!(f.data.iter().all(|&p| p == v));
        }
        assert_eq!((counting.made(), pool.kept()), (1, 1));
        // Frames held elsewhere get buffers of their own, used once and not registered; the
        // pool keeps at most 2.
        let held: Vec<_> = (0..4).map(|v| pool.frame(8, 4, fill(v)).unwrap()).collect();
        assert_eq!(pool.kept(), 2);
        for (v, f) in held.iter().enumerate() {
            assert!(
                f.data.iter().all(|&p| p == v as u8),
                "frame {v} kept its pixels"
            );
        }
        let locked: Vec<bool> = held.iter().map(|f| f.page_locked()).collect();
        assert_eq!(locked, [true, false, false, false]);
        assert_eq!(counting.made(), 1);
        // A reused buffer of a new size: the old registration (if any) ends before the memory
        // moves, and the buffer is registered again.
        drop(held);
        let f = pool.frame(16, 16, fill(9)).unwrap();
        assert!(f.page_locked() && f.data.len() == 256);
        drop(f);
        drop(pool);
        assert_eq!(counting.alive(), 0, "every registration ended");
    }

    #[test]
    fn without_a_locker_frames_are_pageable() {
        let mut pool = FramePool::new(2, None);
        let f = pool.frame(4, 4, |_| Ok(())).unwrap();
        assert!(!f.page_locked() && f.data.len() == 16);
    }
}
