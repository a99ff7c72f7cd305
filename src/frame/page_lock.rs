//! Frame memory page-locked for the GPU's DMA.
//!
//! A frame in pageable memory reaches the GPU through a copy into page-locked memory (ours or
//! the driver's) before the DMA: at 1920×1080 the copy takes three times as long as the DMA
//! (H100 host: 150–200 µs against 47 µs). A source that writes its frames into buffers it
//! reuses registers each buffer with the driver once (`PageLocker`), and the GPU stages upload
//! straight from the frame. The registration lives in the image (`GrayImage::lock`,
//! `PackedBinary::lock`) and ends when the image is dropped, before its memory is freed, or
//! when the image is resized (`GrayImage::set_size`), before its memory can move.

use std::fmt;

/// Registers host memory with the GPU driver (a build or machine without a GPU has none).
pub trait PageLocker: Send + Sync {
    /// Page-locks `len` bytes at `ptr` until the returned registration is dropped; None when
    /// the driver refuses (the frame is then copied as before).
    ///
    /// # Safety
    /// The memory must stay allocated, at the same address, until the registration is dropped.
    unsafe fn register(&self, ptr: *const u8, len: usize) -> Option<Box<dyn Send + Sync>>;
}

/// The page-locking of an image's pixel memory: none, or the range registered and the
/// registration that unregisters it when dropped. A clone of an image has new memory, so
/// cloning gives none; two images compare equal whatever their locking.
#[derive(Default)]
pub struct PageLock {
    locked: Option<Locked>,
}

struct Locked {
    start: usize,
    len: usize,
    _registration: Box<dyn Send + Sync>,
}

impl PageLock {
    /// Registers `bytes` (nothing for an empty slice).
    ///
    /// # Safety
    /// As `PageLocker::register`: `bytes` stays allocated at its address while this is held.
    pub unsafe fn register(locker: &dyn PageLocker, bytes: &[u8]) -> PageLock {
        if bytes.is_empty() {
            return PageLock::default();
        }
        // SAFETY: the caller's promise.
        let locked = unsafe { locker.register(bytes.as_ptr(), bytes.len()) }.map(|r| Locked {
            start: bytes.as_ptr() as usize,
            len: bytes.len(),
            _registration: r,
        });
        PageLock { locked }
    }

    /// Registers `bytes` unless they are registered already (a buffer written into again keeps
    /// its registration); an old registration ends first.
    ///
    /// # Safety
    /// As `register`.
    pub unsafe fn cover(&mut self, locker: &dyn PageLocker, bytes: &[u8]) {
        if !self.covers(bytes) {
            *self = PageLock::default();
            // SAFETY: the caller's promise.
            *self = unsafe { PageLock::register(locker, bytes) };
        }
    }

    /// Makes `values` `len` long, keeping their memory when the length is the same (a locked
    /// buffer stays locked); otherwise this lock ends before the resize can move the memory.
    pub fn resize<T: Clone + Default>(&mut self, values: &mut Vec<T>, len: usize) {
        if values.len() != len {
            *self = PageLock::default();
            values.resize(len, T::default());
        }
    }

    /// Whether all of `bytes` lies in the registered range.
    pub fn covers(&self, bytes: &[u8]) -> bool {
        self.locked.as_ref().is_some_and(|l| {
            let start = bytes.as_ptr() as usize;
            start >= l.start && start + bytes.len() <= l.start + l.len
        })
    }

    pub fn is_locked(&self) -> bool {
        self.locked.is_some()
    }
}

impl Clone for PageLock {
    fn clone(&self) -> Self {
        PageLock::default()
    }
}

impl PartialEq for PageLock {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PageLock {}

impl fmt::Debug for PageLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_locked() {
            "page-locked"
        } else {
            "pageable"
        })
    }
}

/// The bytes of a slice of plain values.
pub fn bytes_of<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: any initialised memory may be read as bytes; the length is the slice's size.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// A locker that registers nothing and counts, for tests of what holds locks.
#[cfg(test)]
pub(crate) mod testing {
    use super::PageLocker;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts the registrations made and those alive.
    #[derive(Default)]
    pub struct CountingLocker {
        pub alive: Arc<AtomicUsize>,
        pub made: Arc<AtomicUsize>,
    }

    struct Registration(Arc<AtomicUsize>);

    impl Drop for Registration {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl PageLocker for CountingLocker {
        unsafe fn register(&self, _: *const u8, _: usize) -> Option<Box<dyn Send + Sync>> {
            self.alive.fetch_add(1, Ordering::SeqCst);
            self.made.fetch_add(1, Ordering::SeqCst);
            Some(Box::new(Registration(self.alive.clone())))
        }
    }

    impl CountingLocker {
        pub fn alive(&self) -> usize {
            self.alive.load(Ordering::SeqCst)
        }

        pub fn made(&self) -> usize {
            self.made.load(Ordering::SeqCst)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::CountingLocker;
    use super::*;

    #[test]
    fn a_lock_covers_its_range_and_ends_when_dropped() {
        let locker = CountingLocker::default();
        let data = vec![0u8; 64];
        // SAFETY: `data` outlives the lock (dropped first below).
        let lock = unsafe { PageLock::register(&locker, &data) };
        assert!(lock.is_locked() && lock.covers(&data) && lock.covers(&data[8..16]));
        let other = vec![0u8; 64];
        assert!(!lock.covers(&other));
        assert!(!lock.clone().is_locked(), "a clone has memory of its own");
        assert_eq!(locker.alive(), 1);
        drop(lock);
        assert_eq!(locker.alive(), 0);
        // SAFETY: nothing is registered for an empty slice.
        assert!(!unsafe { PageLock::register(&locker, &[]) }.is_locked());
    }
}
