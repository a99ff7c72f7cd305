//! The GPU marker detector's throughput on one stream and on several: each thread has a
//! detector on a CUDA stream of its own and takes every k-th frame, so the kernels of
//! different frames can run side by side. A 1080p frame leaves most of the GPU idle (many
//! small launches, outlines traced by a few blocks); this measures how much of that the
//! streams win back. The frames are the benchmark's markers scene (16 markers, clutter, blur,
//! noise, a light gradient), rendered once.
//!
//! cargo build --profile ci --no-default-features --features cuda --example marker_streams
//! marker_streams [frames] [threads,threads,...] [WIDTHxHEIGHT] [markers]

use markerscope::ccl::Backends;
use markerscope::fiducial::gpu::GpuDetector;
use markerscope::fiducial::render::{render_scene, SceneSpec};
use markerscope::fiducial::{DetectorParams, Dictionary};
use markerscope::frame::image::GrayImage;
use std::sync::Arc;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = |k: usize| std::env::args().nth(k);
    let frames: usize = arg(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let threads: Vec<usize> = arg(2)
        .unwrap_or_else(|| "1,2,3,4".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let (width, height) = arg(3)
        .and_then(|s| {
            let (w, h) = s.split_once('x')?;
            Some((w.parse().ok()?, h.parse().ok()?))
        })
        .unwrap_or((1920u32, 1080u32));
    let markers: usize = arg(4).and_then(|s| s.parse().ok()).unwrap_or(16);
    let backends = Backends::detect_tuned(&markerscope::tuning::Tuning::from_env()?);
    let gpu = backends.gpu()?.clone();
    println!("{}", gpu.description());
    let dict = Dictionary::predefined("DICT_4X4_50")?;
    let images: Vec<GrayImage> = (0..8)
        .map(|seed| {
            let spec = SceneSpec {
                width,
                height,
                markers,
                seed: seed + 1,
                ..SceneSpec::default()
            };
            render_scene(&dict, &spec).map(|s| s.image)
        })
        .collect::<Result<_, _>>()?;
    let images = Arc::new(images);
    let dict = Arc::new(dict);
    // The markers each frame should give: one detector on the engine's stream.
    let mut reference = GpuDetector::new(gpu.clone(), DetectorParams::default())?;
    let want: Vec<usize> = images
        .iter()
        .map(|g| reference.detect(g, &[&dict]).map(|d| d.markers.len()))
        .collect::<Result<_, _>>()?;
    let t = Instant::now();
    for i in 0..frames {
        reference.detect(&images[i % images.len()], &[&dict])?;
    }
    let engine_stream = frames as f64 / t.elapsed().as_secs_f64();
    println!("engine stream, 1 thread: {engine_stream:8.1} frames/s ({frames} frames)");
    drop(reference);
    for &n in &threads {
        let mut detectors = Vec::new();
        for _ in 0..n {
            let own = Arc::new(gpu.with_own_stream()?);
            let mut d = GpuDetector::new(own, DetectorParams::default())?;
            d.detect(&images[0], &[&dict])?; // buffers made before the clock starts
            detectors.push(d);
        }
        let start = Arc::new(std::sync::Barrier::new(n));
        let t = Instant::now();
        let handles: Vec<_> = detectors
            .into_iter()
            .enumerate()
            .map(|(k, mut d)| {
                let (images, dict, start, want) =
                    (images.clone(), dict.clone(), start.clone(), want.clone());
                std::thread::spawn(move || -> Result<usize, String> {
                    start.wait();
                    let mut wrong = 0;
                    for i in (k..frames).step_by(n) {
                        let found = d
                            .detect(&images[i % images.len()], &[&dict])
                            .map_err(|e| e.to_string())?;
                        wrong += usize::from(found.markers.len() != want[i % images.len()]);
                    }
                    Ok(wrong)
                })
            })
            .collect();
        let mut wrong = 0;
        for h in handles {
            wrong += h.join().map_err(|_| "a thread panicked")??;
        }
        let rate = frames as f64 / t.elapsed().as_secs_f64();
        println!(
            "own streams, {n} thread(s): {rate:8.1} frames/s ({frames} frames, {wrong} with other markers)"
        );
    }
    // As the pipeline's worker hands frames to its lanes: frame k is sent, then frame k − d + 1
    // waited for (d frames in flight), with the engine's own labeling of each frame (Otsu,
    // statistics) on the engine's stream between.
    for &n in &threads {
        for label in [false, true] {
            let (jobs, queue) =
                crossbeam_channel::unbounded::<(usize, crossbeam_channel::Sender<f64>)>();
            let mut lanes = Vec::new();
            for _ in 0..n {
                let own = Arc::new(gpu.with_own_stream()?);
                let mut d = GpuDetector::new(own, DetectorParams::default())?;
                d.detect(&images[0], &[&dict])?;
                let (queue, images, dict) = (queue.clone(), images.clone(), dict.clone());
                lanes.push(std::thread::spawn(move || {
                    while let Ok((i, reply)) = queue.recv() {
                        let t = Instant::now();
                        let _ = d.detect(&images[i % images.len()], &[&dict]);
                        let _ = reply.send(t.elapsed().as_secs_f64() * 1e3);
                    }
                }));
            }
            let mut labeler = backends.create("ha8", markerscope::ccl::Connectivity::Eight)?;
            let masks: Vec<markerscope::frame::image::BinaryImage> = images
                .iter()
                .map(|g| {
                    markerscope::frame::image::BinaryImage::from_fn(g.width, g.height, |x, y| {
                        g.data[(y * g.width + x) as usize] < 100
                    })
                })
                .collect::<Result<_, _>>()?;
            let mut waiting = std::collections::VecDeque::new();
            let (mut lane_ms, mut label_ms) = (0.0, 0.0);
            let t = Instant::now();
            for i in 0..frames {
                let (reply, replies) = crossbeam_channel::bounded(1);
                jobs.send((i, reply))?;
                waiting.push_back(replies);
                if label {
                    let l = Instant::now();
                    labeler.label_mask(markerscope::ccl::LabelRequest::new(
                        markerscope::ccl::Mask::Bytes(&masks[i % masks.len()]),
                        markerscope::ccl::Connectivity::Eight,
                        markerscope::ccl::Want::Stats,
                    ))?;
                    label_ms += l.elapsed().as_secs_f64() * 1e3;
                }
                while waiting.len() >= n.max(2) {
                    lane_ms += waiting
                        .pop_front()
                        .map(|r| r.recv())
                        .transpose()?
                        .unwrap_or(0.0);
                }
            }
            for r in waiting {
                lane_ms += r.recv()?;
            }
            let rate = frames as f64 / t.elapsed().as_secs_f64();
            drop(jobs);
            for l in lanes {
                let _ = l.join();
            }
            println!(
                "lanes as the worker uses them, {n} lane(s){}: {rate:8.1} frames/s, lane {:.3} ms, label {:.3} ms a frame",
                if label { " + the engine's labeling" } else { "" },
                lane_ms / frames as f64,
                label_ms / frames as f64,
            );
        }
    }
    Ok(())
}
