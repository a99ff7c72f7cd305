//! FFmpeg's own log: kept off stderr (every problem comes back as an error value or a flagged
//! frame, said with the file and frame) unless `set_verbose`, and its error lines counted per
//! thread: a decoder that conceals damage without flagging the frame (MJPEG) still logs it,
//! on the thread that calls it when the decoder has no frame threads of its own. They are
//! counted over all threads too: a frame-threaded decoder logs on its own threads, at times
//! that vary from run to run (`decode`: the sign to decode on one thread).

use ffmpeg_next as ff;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Error lines FFmpeg logged on any thread.
static ERRORS_ANYWHERE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Error lines FFmpeg logged on this thread.
    static ERRORS: Cell<u64> = const { Cell::new(0) };
}

/// Whether FFmpeg's own lines (warnings and errors) go to stderr.
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// Installs the log callback (once, from `file::init`).
pub(super) fn install() {
    // SAFETY: a callback that is valid for the life of the process.
    unsafe { ff::ffi::av_log_set_callback(Some(on_log)) };
}

/// `f`'s result, and how many error lines FFmpeg logged on this thread while it ran.
pub(super) fn errors_during<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ERRORS.with(Cell::get);
    let result = f();
    (result, ERRORS.with(Cell::get) - before)
}

/// Error lines FFmpeg logged so far on any thread (any decoder or file of the process).
pub(super) fn errors_anywhere() -> u64 {
    ERRORS_ANYWHERE.load(Ordering::SeqCst)
}

unsafe extern "C" fn on_log(
    avcl: *mut c_void,
    level: c_int,
    fmt: *const c_char,
    args: *mut ff::ffi::__va_list_tag,
) {
    // The low byte is the level; colour flags may sit above it.
    let level = level & 0xff;
    if level <= ff::ffi::AV_LOG_ERROR as c_int {
        ERRORS.with(|c| c.set(c.get() + 1));
        ERRORS_ANYWHERE.fetch_add(1, Ordering::SeqCst);
    }
    if !VERBOSE.load(Ordering::Relaxed) || level > ff::ffi::AV_LOG_WARNING as c_int {
        return;
    }
    let mut line = [0 as c_char; 1024];
    let mut prefix: c_int = 1;
    // SAFETY: FFmpeg's own formatter on the arguments it passed; the line is NUL-terminated
    // within its size.
    let text = unsafe {
        ff::ffi::av_log_format_line2(
            avcl,
            level,
            fmt,
            args,
            line.as_mut_ptr(),
            line.len() as c_int,
            &mut prefix,
        );
        std::ffi::CStr::from_ptr(line.as_ptr())
    };
    eprint!("{}", text.to_string_lossy());
}
