//! SIGINT, SIGTERM and SIGHUP during an analysis: the handler only notes the signal; the analysis
//! loop (and the learning of a mask) sees it, stops, and its temporary output files are removed
//! as it returns, so an interrupted run leaves nothing behind. Where the process is blocked
//! outside those loops (an input that never opens, such as a FIFO with no writer; a stream that
//! will not close), a watcher thread ends it `GRACE` after the signal: the temporary files
//! registered here (`TempFile`) are removed and the process exits as a signal would have it
//! (128 + the signal). The handler is installed for one signal at a time (`SA_RESETHAND`): a
//! second Ctrl-C ends the process at once. A signal the process was started ignoring
//! (`nohup`) stays ignored.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// How long after a stop signal the watcher waits for the analysis to end on its own.
pub const GRACE: Duration = Duration::from_secs(2);

/// The temporary files to remove when the watcher ends the process: (id, path).
static TEMP_FILES: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());

/// A temporary file the watcher removes if it has to end the process; let go (dropped) once
/// the file is renamed into place or removed.
#[derive(Debug)]
pub struct TempFile(u64);

impl TempFile {
    pub fn register(path: PathBuf) -> TempFile {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        lock_temp_files().push((id, path));
        TempFile(id)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        lock_temp_files().retain(|(id, _)| *id != self.0);
    }
}

fn lock_temp_files() -> std::sync::MutexGuard<'static, Vec<(u64, PathBuf)>> {
    TEMP_FILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The watcher: after a stop signal and `GRACE`, removes the registered temporary files and
/// ends the process.
fn watch() {
    let signal = loop {
        if let Some(signal) = requested() {
            break signal;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(GRACE);
    for (_, path) in lock_temp_files().iter() {
        let _ = std::fs::remove_file(path);
    }
    eprintln!(
        "error: stopped by {}; the temporary output files were removed",
        signal_name(signal)
    );
    std::process::exit(128 + signal.clamp(1, 127));
}

/// Installs the handlers and the watcher (the `markerscope` binary does, before `analyze`
/// starts). Library users that have their own handling leave it out; `requested` then stays
/// None.
pub fn install() {
    #[cfg(target_os = "linux")]
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction with a zeroed struct filled in here; the handler only stores to an
        // atomic, which is async-signal-safe.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    static WATCHER: std::sync::Once = std::sync::Once::new();
    WATCHER.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("stop signal watcher".into())
            .spawn(watch);
    });
}

#[cfg(target_os = "linux")]
extern "C" fn handler(signal: libc::c_int) {
    SIGNAL.store(signal, Ordering::SeqCst);
}

/// The signal that asked the process to stop, if one came.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The conventional name of a stop signal.
pub fn signal_name(signal: i32) -> String {
    match signal {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}
