//! Mutations of valid files (bytes flipped, runs overwritten, inserted or cut off) and a guard
//! that runs one case: shared by the fuzzing of the inputs and of the window's settings file.

use proptest::prelude::*;
use std::sync::mpsc;
use std::time::Duration;

/// One case may take this long (decoding a damaged clip included).
pub const CASE_LIMIT: Duration = Duration::from_secs(20);

/// A change to a valid file.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// XOR a byte at a position (a fraction of the length) with a mask.
    Flip(f64, u8),
    /// Overwrite a run of bytes with one value.
    Fill(f64, usize, u8),
    /// Insert bytes.
    Insert(f64, Vec<u8>),
    /// Cut the file at a fraction of its length.
    Truncate(f64),
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (0.0..1.0f64, 1u8..=255).prop_map(|(p, m)| Mutation::Flip(p, m)),
        2 => (0.0..1.0f64, 1usize..256, any::<u8>()).prop_map(|(p, n, v)| Mutation::Fill(p, n, v)),
        1 => (0.0..1.0f64, prop::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => (0.0..1.0f64).prop_map(Mutation::Truncate),
    ]
}

pub fn mutate(bytes: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for m in mutations {
        if out.is_empty() {
            break;
        }
        let at = |p: f64, len: usize| ((p * len as f64) as usize).min(len - 1);
        match m {
            Mutation::Flip(p, mask) => {
                let i = at(*p, out.len());
                out[i] ^= mask;
            }
            Mutation::Fill(p, n, v) => {
                let i = at(*p, out.len());
                let end = (i + n).min(out.len());
                out[i..end].fill(*v);
            }
            Mutation::Insert(p, b) => {
                let i = at(*p, out.len());
                out.splice(i..i, b.iter().copied());
            }
            Mutation::Truncate(p) => {
                let n = at(*p, out.len());
                out.truncate(n);
            }
        }
    }
    out
}

/// Runs `f` on its own thread: Err when it panics or does not end in CASE_LIMIT.
pub fn ends_without_panic<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(outcome);
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(format!("{what}: panicked")),
        Err(_) => Err(format!("{what}: no answer in {CASE_LIMIT:?}")),
    }
}
