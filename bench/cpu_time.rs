//! CPU time of the whole process, for the cost examples (`track_10k`, `track_clutter`,
//! `parquet_cost`).

/// CPU time of the process (ms), every thread's (the tracker spreads large frames over the
/// rayon pool): unlike wall time, it does not count time spent waiting for a core, so it stays
/// meaningful on a busy machine. With RAYON_NUM_THREADS=1 it is the cost on one core.
#[cfg(target_os = "linux")]
pub fn process_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
}

#[cfg(not(target_os = "linux"))]
pub fn process_cpu_ms() -> f64 {
    f64::NAN
}
