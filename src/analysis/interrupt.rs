//! SIGINT, SIGTERM and SIGHUP during an analysis: the handler only notes the signal; the analysis
//! loop sees it, stops, and its temporary output files are removed as it returns, so an
//! interrupted run leaves nothing behind. The handler is installed for one signal at a time
//! (`SA_RESETHAND`): a second Ctrl-C ends the process at once even if the loop is stuck. A
//! signal the process was started ignoring (`nohup`) stays ignored.

use std::sync::atomic::{AtomicI32, Ordering};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Installs the handlers (the `markerscope` binary does, before `analyze` starts). Library
/// users that have their own handling leave it out; `requested` then stays None.
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
