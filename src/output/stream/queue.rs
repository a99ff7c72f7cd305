//! A bounded queue that drops its oldest item when full: a slow consumer (a network client)
//! loses old frames instead of holding up the one that fills the queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub struct DropQueue<T> {
    state: Mutex<State<T>>,
    changed: Condvar,
    capacity: usize,
    dropped: AtomicU64,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

/// What `pop` found.
pub enum Popped<T> {
    Item(T),
    /// Nothing arrived within the timeout.
    Empty,
    /// The queue was closed and is drained.
    Closed,
}

impl<T> DropQueue<T> {
    pub fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity),
                closed: false,
            }),
            changed: Condvar::new(),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `item`, dropping the oldest one when the queue is full. Never waits.
    pub fn push(&self, item: T) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        // Only an empty queue can have its consumer waiting: no wake-up (a system call) else.
        let was_empty = state.items.is_empty();
        if state.items.len() >= self.capacity {
            state.items.pop_front();
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        state.items.push_back(item);
        drop(state);
        if was_empty {
            self.changed.notify_one();
        }
    }

    /// The oldest item, waiting up to `timeout` for one.
    pub fn pop(&self, timeout: Duration) -> Popped<T> {
        let mut state = self.lock();
        if state.items.is_empty() && !state.closed {
            state = self
                .changed
                .wait_timeout(state, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        match state.items.pop_front() {
            Some(item) => Popped::Item(item),
            None if state.closed => Popped::Closed,
            None => Popped::Empty,
        }
    }

    /// No more pushes; `pop` hands out what is left, then `Closed`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Items dropped because the consumer was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts_it() {
        let q = DropQueue::new(2);
        for i in 0..5 {
            q.push(i);
        }
        assert_eq!(q.dropped(), 3);
        let mut got = Vec::new();
        while let Popped::Item(i) = q.pop(Duration::ZERO) {
            got.push(i);
        }
        assert_eq!(got, [3, 4]);
        q.close();
        assert!(matches!(q.pop(Duration::ZERO), Popped::Closed));
    }
}
