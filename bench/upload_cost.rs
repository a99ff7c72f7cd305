//! What it costs to get a grey frame from pageable host memory (a decoded or rendered frame's
//! `Vec`) into device memory, per way of doing it: the wall time from the start of the call to
//! the end of the copy (the stream waited for), best and median of --repeat runs.
//!
//! - `pageable`: one `cuMemcpyHtoDAsync` from the frame itself (the driver stages it);
//! - `staged`: `threshold::DeviceGrey::upload` as the frame path does it;
//! - `copy into pinned` / `DMA from pinned`: its two halves apart;
//! - `chunked N KiB`: the frame copied into page-locked memory N KiB at a time (one thread),
//!   each chunk's DMA queued as soon as it is copied, so the copies and the DMAs overlap;
//! - `chunked parallel N KiB`: the same with each chunk copied on all cores;
//! - `registered`: a DMA straight from the frame's memory, page-locked once beforehand
//!   (`cuMemHostRegister`: what a pool of recycled frame buffers would allow).
//!
//! cargo run --profile ci --no-default-features --features cuda --example upload_cost -- [WxH ...] [--repeat K]

use markerscope::frame::image::GrayImage;
use markerscope::gpu::staging::PinnedBuffer;
use markerscope::gpu::Gpu;
use markerscope::threshold::gpu::DeviceGrey;
use rayon::prelude::*;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes = Vec::new();
    let mut repeat = 50usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--repeat" {
            repeat = it.next().map(|v| v.parse()).transpose()?.unwrap_or(50);
        } else if let Some((w, h)) = a.split_once('x') {
            sizes.push((w.parse::<u32>()?, h.parse::<u32>()?));
        }
    }
    if sizes.is_empty() {
        sizes = vec![(1280, 720), (1920, 1080), (3840, 2160)];
    }
    let gpu = Gpu::open(0, &markerscope::tuning::Tuning::from_env()?.gpu)?;
    println!(
        "{} — wall µs from call to copy done: best / median of {repeat}",
        gpu.name
    );
    for (w, h) in sizes {
        let n = w as usize * h as usize;
        let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let grey = GrayImage::new(w, h, data.clone())?;
        // SAFETY: every variant writes the first n bytes before they are read back below.
        let mut dst = unsafe { gpu.stream.alloc::<u8>(n) }?;
        let mut results: Vec<(String, f64, f64)> = Vec::new();
        // `f` returns the µs it measured itself, or None to be timed whole.
        let mut time = |name: String,
                        f: &mut dyn FnMut() -> anyhow::Result<Option<f64>>|
         -> anyhow::Result<()> {
            f()?;
            let mut t = Vec::with_capacity(repeat);
            for _ in 0..repeat {
                let s = Instant::now();
                let own = f()?;
                t.push(own.unwrap_or(s.elapsed().as_secs_f64() * 1e6));
            }
            t.sort_by(f64::total_cmp);
            results.push((name, t[0], t[t.len() / 2]));
            Ok(())
        };
        let stream = gpu.stream.clone();
        time("pageable".into(), &mut || {
            stream.memcpy_htod(&data, &mut dst)?;
            stream.synchronize()?;
            Ok(None)
        })?;
        let mut device_grey = DeviceGrey::default();
        time("staged (frame path)".into(), &mut || {
            device_grey.upload(&gpu, &grey)?;
            stream.synchronize()?;
            Ok(None)
        })?;
        let mut pinned = PinnedBuffer::<u8>::alloc(&gpu, n, true)?;
        time("copy into pinned".into(), &mut || {
            pinned
                .as_mut_slice()
                .par_chunks_mut(256 << 10)
                .zip(data.par_chunks(256 << 10))
                .for_each(|(to, from)| to.copy_from_slice(from));
            Ok(None)
        })?;
        time("DMA from pinned".into(), &mut || {
            stream.memcpy_htod(pinned.as_slice(), &mut dst)?;
            stream.synchronize()?;
            Ok(None)
        })?;
        let mut plain = PinnedBuffer::<u8>::alloc(&gpu, n, false)?;
        for (name, wc, parallel) in [
            ("copy WC, 1 thread, idle", true, false),
            ("copy WC, all cores, idle", true, true),
            ("copy plain, 1 thread, idle", false, false),
            ("copy plain, all cores, idle", false, true),
        ] {
            let to = if wc { &mut pinned } else { &mut plain };
            time(name.into(), &mut || {
                // Between frames the copying threads sleep, as in a pipeline at low rate.
                std::thread::sleep(std::time::Duration::from_millis(2));
                let s = Instant::now();
                if parallel {
                    to.as_mut_slice()
                        .par_chunks_mut(256 << 10)
                        .zip(data.par_chunks(256 << 10))
                        .for_each(|(t, f)| t.copy_from_slice(f));
                } else {
                    to.as_mut_slice().copy_from_slice(&data);
                }
                Ok(Some(s.elapsed().as_secs_f64() * 1e6))
            })?;
        }
        time("DMA from plain pinned".into(), &mut || {
            stream.memcpy_htod(plain.as_slice(), &mut dst)?;
            stream.synchronize()?;
            Ok(None)
        })?;
        for kib in [128usize, 256, 512] {
            let chunk = kib << 10;
            time(format!("chunked {kib} KiB"), &mut || {
                for (i, from) in data.chunks(chunk).enumerate() {
                    let at = i * chunk;
                    let to = &mut pinned.as_mut_slice()[at..at + from.len()];
                    to.copy_from_slice(from);
                    stream.memcpy_htod(&*to, &mut dst.slice_mut(at..at + from.len()))?;
                }
                stream.synchronize()?;
                Ok(None)
            })?;
        }
        for kib in [256usize, 512, 1024] {
            let chunk = kib << 10;
            time(format!("chunked parallel {kib} KiB"), &mut || {
                for (i, from) in data.chunks(chunk).enumerate() {
                    let at = i * chunk;
                    let to = &mut pinned.as_mut_slice()[at..at + from.len()];
                    to.par_chunks_mut(64 << 10)
                        .zip(from.par_chunks(64 << 10))
                        .for_each(|(t, f)| t.copy_from_slice(f));
                    stream.memcpy_htod(&*to, &mut dst.slice_mut(at..at + from.len()))?;
                }
                stream.synchronize()?;
                Ok(None)
            })?;
        }
        let mut fresh: Vec<Vec<u8>> = (0..repeat + 1).map(|_| data.clone()).collect();
        time("register + DMA + unregister".into(), &mut || {
            // A frame not registered before, as each new frame of a source is.
            let mut frame = fresh.pop().unwrap_or_else(|| data.clone());
            let s = Instant::now();
            // SAFETY: `frame` outlives its registration, undone below after the copy.
            unsafe {
                cudarc::driver::sys::cuMemHostRegister_v2(frame.as_mut_ptr().cast(), n, 0)
                    .result()?;
            }
            let registered = s.elapsed().as_secs_f64() * 1e6;
            stream.memcpy_htod(&frame, &mut dst)?;
            stream.synchronize()?;
            // SAFETY: registered above; the copy is done.
            unsafe {
                cudarc::driver::sys::cuMemHostUnregister(frame.as_mut_ptr().cast()).result()?
            };
            let total = s.elapsed().as_secs_f64() * 1e6;
            if fresh.len() % 10 == 0 {
                eprintln!("  register {registered:.1} µs of {total:.1}");
            }
            Ok(Some(total))
        })?;
        let mut frame = data.clone();
        // SAFETY: `frame` outlives the registration, which is undone below.
        unsafe {
            cudarc::driver::sys::cuMemHostRegister_v2(frame.as_mut_ptr().cast(), n, 0).result()?;
        }
        time("registered".into(), &mut || {
            stream.memcpy_htod(&frame, &mut dst)?;
            stream.synchronize()?;
            Ok(None)
        })?;
        // SAFETY: registered above.
        unsafe { cudarc::driver::sys::cuMemHostUnregister(frame.as_mut_ptr().cast()).result()? };
        let back = stream.clone_dtoh(&dst)?;
        anyhow::ensure!(back == data, "the device copy differs from the frame");
        println!("{w}x{h} ({:.1} MB)", n as f64 / 1e6);
        for (name, best, median) in results {
            println!("  {name:<26} {best:8.1} {median:8.1}");
        }
    }
    Ok(())
}
