//! What live streaming costs per frame at 1,000 components (1920×1080, every component tracked,
//! with sub-pixel centroids):
//!
//! - `publish`: what the consumer of the results pays (the window, `analyze`): queueing the
//!   frame on three streams at once (TUIO over OSC/UDP, JSON over UDP, a WebSocket server with
//!   one client); the target is at most 0.1 ms;
//! - per stream, the sending thread's own work: encoding and sending one frame to a loopback
//!   receiver (this runs beside the engine, on another core).
//!
//! cargo run --profile ci --example stream_cost [components] [frames]
//! (default 1000 components, 2000 frames)

use markerscope::ccl::stats::ComponentStats;
use markerscope::ccl::subpixel::SubpixelCentroid;
use markerscope::ccl::{Backend, Connectivity};
use markerscope::frame::image::GrayImage;
use markerscope::output::stream::{json, tuio, Streams};
use markerscope::pipeline::FrameResult;
use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn frame(index: u64, n: usize) -> FrameResult {
    let (w, h) = (1920u32, 1080u32);
    let components: Vec<ComponentStats> = (0..n as u32)
        .map(|i| {
            let (x, y) = ((i * 37) % (w - 8), (i * 53) % (h - 8));
            ComponentStats {
                label: i + 1,
                left: x,
                top: y,
                width: 5,
                height: 4,
                area: 17,
                sum_x: 17 * x as u64 + 34,
                sum_y: 17 * y as u64 + 25,
                centroid_x: x as f64 + 2.0,
                centroid_y: y as f64 + 1.470_588,
            }
        })
        .collect();
    let subpixel = components
        .iter()
        .map(|c| SubpixelCentroid {
            label: c.label,
            weight: 1234,
            sum_wx: 0,
            sum_wy: 0,
            x: c.centroid_x + 0.123_456_789,
            y: c.centroid_y - 0.087_654_321,
        })
        .collect();
    FrameResult {
        index,
        time_s: index as f64 / 60.0,
        name: String::new(),
        grey: GrayImage::new(w, h, vec![0; (w * h) as usize])
            .expect("frame size")
            .into(),
        binary: None,
        labels: None,
        components,
        track_ids: (1..=n as u64).collect(),
        ended_tracks: Vec::new(),
        subpixel,
        shapes: Vec::new(),
        world: Vec::new(),
        markers: Vec::new(),
        all_count: n as u32,
        timings: Default::default(),
        algorithm: "bench",
        backend: Backend::Cpu,
        connectivity: Connectivity::Eight,
    }
}

/// A loopback UDP receiver that reads and discards everything, on its own thread.
fn sink() -> Result<u16, Box<dyn std::error::Error>> {
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    let port = socket.local_addr()?.port();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 70_000];
        while socket.recv(&mut buf).is_ok() {}
    });
    Ok(port)
}

fn median(v: Vec<f64>) -> f64 {
    quantile(v, 0.5)
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q) as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|s| {
        s.parse::<usize>()
            .map_err(|_| format!("expected a count, got '{s}'"))
    });
    let n = args.next().transpose()?.unwrap_or(1000);
    let frames = args.next().transpose()?.unwrap_or(2000).max(10);
    let frames_data: Vec<Arc<FrameResult>> = (0..8).map(|i| Arc::new(frame(i, n))).collect();

    // The sending threads' own work, one stream kind at a time.
    let osc = UdpSocket::bind("127.0.0.1:0")?;
    osc.connect(("127.0.0.1", sink()?))?;
    let mut encoder = tuio::TuioEncoder::new();
    let mut tuio_ms = Vec::new();
    let mut tuio_bytes = 0;
    for i in 0..frames {
        let f = &frames_data[i % frames_data.len()];
        let t = Instant::now();
        tuio_bytes = 0;
        encoder.encode_each(f, &mut |d: &[u8]| {
            tuio_bytes += d.len();
            osc.send(d).map(drop)
        })?;
        tuio_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    udp.connect(("127.0.0.1", sink()?))?;
    let mut json_ms = Vec::new();
    let mut json_parts = 0;
    let mut json_bytes = 0;
    for i in 0..frames {
        let f = &frames_data[i % frames_data.len()];
        let t = Instant::now();
        let parts = json::encode_frame_parts(f, None, tuio::MAX_DATAGRAM);
        for p in &parts {
            udp.send(p)?;
        }
        json_ms.push(t.elapsed().as_secs_f64() * 1e3);
        json_parts = parts.len();
        json_bytes = parts.iter().map(Vec::len).sum();
    }

    // What the consumer pays: publishing to three streams at once, one frame per 1 ms.
    let ws_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let ws_url = format!("ws://127.0.0.1:{ws_port}");
    let streams = Streams::open_all(&[
        format!("osc://127.0.0.1:{}", sink()?),
        format!("udp://127.0.0.1:{}", sink()?),
        ws_url.clone(),
    ])?;
    let (mut client, _) = tungstenite::connect(&ws_url)?;
    std::thread::spawn(move || while client.read().is_ok() {});
    while streams.statuses()[2].clients != Some(1) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut publish_ms = Vec::new();
    for i in 0..frames {
        let f = &frames_data[i % frames_data.len()];
        let t = Instant::now();
        streams.publish(f);
        publish_ms.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(1));
    }
    let statuses = streams.close();

    println!("{n} components a frame, {frames} frames, 1920x1080");
    println!(
        "publish to 3 streams (the consumer's cost): median {:.4} ms, p99 {:.4} ms, max {:.4} ms",
        median(publish_ms.clone()),
        quantile(publish_ms.clone(), 0.99),
        publish_ms.iter().cloned().fold(0.0, f64::max)
    );
    println!(
        "TUIO encode + send (sending thread): median {:.3} ms ({tuio_bytes} bytes)",
        median(tuio_ms)
    );
    println!(
        "JSON encode + send over UDP (sending thread): median {:.3} ms ({json_bytes} bytes in {json_parts} datagram(s))",
        median(json_ms)
    );
    for s in statuses {
        println!(
            "  {}: {} sent, {} dropped, {} failed",
            s.url, s.sent, s.dropped, s.failed
        );
    }
    Ok(())
}
