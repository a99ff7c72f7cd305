//! Live streams, recordings and masks. Streams and recordings are received and read back by
//! other code than ours: the TUIO/OSC
//! datagrams are decoded with `rosc`, the WebSocket messages read with `tungstenite`'s client,
//! the JSON with serde_json, and a recording is analysed again through FFmpeg's decoder.

use markerscope::analysis::{self, AnalyzeOptions, Output};
use markerscope::ccl::BackendChoice;
use markerscope::output::stream::Streams;
use markerscope::pipeline::FrameResult;
use markerscope::threshold::spec::ThresholdSpec;
use rosc::{OscPacket, OscType};
use std::collections::BTreeMap;
use std::net::{TcpListener, UdpSocket};
#[cfg(target_os = "linux")]
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WIDTH: u32 = 320;
const HEIGHT: u32 = 180;

fn demo(frames: u64, out: &Path) -> AnalyzeOptions {
    AnalyzeOptions {
        threshold: ThresholdSpec::Fixed(127),
        backend: BackendChoice::Cpu,
        max_frames: Some(frames),
        synthetic_size: Some((WIDTH, HEIGHT)),
        ..AnalyzeOptions::new("synthetic", Output::File(out.to_path_buf()))
    }
}

/// The CSV's rows as column → value maps.
fn read_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

/// A UDP socket on a free loopback port, collecting datagrams on a thread until `quiet` passes
/// without one.
/// A UDP receiver on a free local port that keeps every datagram until `stop` is called: it
/// waits as long as the sender runs (a loaded machine can pause a run for seconds), then takes
/// what is left in the socket's buffer.
struct UdpReceiver {
    port: u16,
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Vec<u8>>>,
}

impl UdpReceiver {
    fn start() -> UdpReceiver {
        use std::sync::atomic::{AtomicBool, Ordering};
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        // Room for a run's datagrams while this thread waits for a core on a loaded machine:
        // a full buffer drops what comes (the default 208 KB once lost one of 34).
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let bytes: libc::c_int = 8 << 20;
            // SAFETY: a valid socket and an int option of the size given. The kernel caps the
            // size at its limit (net.core.rmem_max) rather than fail.
            unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUF,
                    (&bytes as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
        let port = socket.local_addr().unwrap().port();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 70_000];
            loop {
                // Read before the flag: a datagram sent before `stop` is in the buffer by then.
                let finished = stop.load(Ordering::Acquire);
                match socket.recv(&mut buf) {
                    Ok(n) => got.push(buf[..n].to_vec()),
                    Err(_) if finished => break,
                    Err(_) => {}
                }
            }
            got
        });
        UdpReceiver { port, done, thread }
    }

    /// Every datagram received, once the sender has finished.
    fn stop(self) -> Vec<Vec<u8>> {
        self.done.store(true, std::sync::atomic::Ordering::Release);
        self.thread.join().unwrap()
    }
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `(command, arguments)` of each message in a TUIO bundle.
fn tuio_messages(datagram: &[u8]) -> Vec<(String, Vec<OscType>)> {
    let (_, packet) = rosc::decoder::decode_udp(datagram).unwrap();
    let OscPacket::Bundle(bundle) = packet else {
        panic!("TUIO sends bundles")
    };
    bundle
        .content
        .into_iter()
        .map(|p| match p {
            OscPacket::Message(m) => {
                assert_eq!(m.addr, "/tuio/2Dblb");
                let mut args = m.args.into_iter();
                let Some(OscType::String(cmd)) = args.next() else {
                    panic!("a TUIO message starts with its command")
                };
                (cmd, args.collect())
            }
            OscPacket::Bundle(_) => panic!("nested bundle"),
        })
        .collect()
}

/// `analyze synthetic --stream osc://... --stream udp://...`: every frame that arrives carries
/// the same components, track IDs and positions as the CSV's rows of that frame.
#[test]
fn tuio_and_json_over_udp_carry_the_csv_rows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let osc = UdpReceiver::start();
    let json = UdpReceiver::start();
    let (osc_port, json_port) = (osc.port, json.port);
    let opts = AnalyzeOptions {
        streams: vec![
            format!("osc://127.0.0.1:{osc_port}"),
            format!("udp://127.0.0.1:{json_port}"),
        ],
        ..demo(40, &out)
    };
    let summary = analysis::run(&opts, |_| {}).unwrap();
    assert_eq!(summary.frames, 40);
    assert_eq!(summary.streams.len(), 2);
    for s in &summary.streams {
        assert_eq!(s.sent + s.dropped, 40, "{s:?}");
        assert!(s.sent > 0, "{s:?}");
        assert_eq!(s.error, None);
    }
    let mut by_frame: BTreeMap<u64, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for row in read_rows(&out) {
        by_frame
            .entry(row["frame"].parse().unwrap())
            .or_default()
            .push(row);
    }

    let datagrams = osc.stop();
    assert_eq!(datagrams.len() as u64, summary.streams[0].sent);
    for d in &datagrams {
        let msgs = tuio_messages(d);
        let Some(("fseq", [OscType::Int(fseq)])) =
            msgs.last().map(|(c, a)| (c.as_str(), a.as_slice()))
        else {
            panic!("a bundle ends with fseq")
        };
        let rows = &by_frame[&(*fseq as u64)];
        let alive: Vec<i32> = rows.iter().map(|r| r["track"].parse().unwrap()).collect();
        assert_eq!(msgs[0].0, "source");
        assert_eq!(
            msgs[1],
            (
                "alive".to_string(),
                alive.iter().map(|&s| OscType::Int(s)).collect()
            )
        );
        let sets: Vec<_> = msgs.iter().filter(|m| m.0 == "set").collect();
        assert_eq!(sets.len(), rows.len());
        for (set, row) in sets.iter().zip(rows) {
            let f = |i: usize| match set.1[i] {
                OscType::Float(v) => v,
                ref other => panic!("{other:?}"),
            };
            assert_eq!(set.1[0], OscType::Int(row["track"].parse().unwrap()));
            let sx: f64 = row["subpixel_x"].parse().unwrap();
            let sy: f64 = row["subpixel_y"].parse().unwrap();
            assert_eq!(f(1), ((sx + 0.5) / WIDTH as f64) as f32);
            assert_eq!(f(2), ((sy + 0.5) / HEIGHT as f64) as f32);
            assert!((0.0..=1.0).contains(&f(1)) && (0.0..=1.0).contains(&f(2)));
            let w: f32 = row["width"].parse().unwrap();
            assert_eq!(f(4), w / WIDTH as f32);
        }
    }

    let objects = json.stop();
    assert_eq!(objects.len() as u64, summary.streams[1].sent);
    for d in &objects {
        let v: serde_json::Value = serde_json::from_slice(d).unwrap();
        let frame = v["frame"].as_u64().unwrap();
        assert_eq!(
            (v["width"].as_u64(), v["height"].as_u64()),
            (Some(320), Some(180))
        );
        let rows = &by_frame[&frame];
        let components = v["components"].as_array().unwrap();
        assert_eq!(components.len(), rows.len());
        for (c, row) in components.iter().zip(rows) {
            // Every CSV column, with the CSV's value.
            for (key, text) in row {
                let value = &c[key.as_str()];
                let same = match value {
                    serde_json::Value::String(s) => s == text,
                    serde_json::Value::Null => text.is_empty(),
                    n => n.as_f64() == text.parse::<f64>().ok(),
                };
                assert!(same, "frame {frame} {key}: {value} vs {text}");
            }
        }
    }
}

fn one_frame(index: u64, components: usize) -> Arc<FrameResult> {
    use markerscope::ccl::stats::ComponentStats;
    use markerscope::ccl::{Backend, Connectivity};
    use markerscope::frame::image::GrayImage;
    Arc::new(FrameResult {
        index,
        time_s: index as f64 / 60.0,
        name: String::new(),
        grey: GrayImage::new(64, 64, vec![0; 64 * 64]).unwrap().into(),
        binary: None,
        labels: None,
        components: (0..components as u32)
            .map(|i| ComponentStats {
                label: i + 1,
                left: i % 64,
                top: i / 64,
                width: 1,
                height: 1,
                area: 1,
                sum_x: (i % 64) as u64,
                sum_y: (i / 64) as u64,
                centroid_x: (i % 64) as f64,
                centroid_y: (i / 64) as f64,
            })
            .collect(),
        track_ids: (1..=components as u64).collect(),
        ended_tracks: Vec::new(),
        subpixel: Vec::new(),
        shapes: Vec::new(),
        world: Vec::new(),
        markers: Vec::new(),
        all_count: components as u32,
        timings: Default::default(),
        algorithm: "test",
        backend: Backend::Cpu,
        connectivity: Connectivity::Eight,
    })
}

/// `ws://`: markerscope listens; a client that connects gets one JSON text message per frame.
#[test]
fn a_websocket_client_receives_one_json_object_per_frame() {
    let port = free_tcp_port();
    let url = format!("ws://127.0.0.1:{port}");
    let streams = Streams::open_all(std::slice::from_ref(&url)).unwrap();
    let (mut client, _) = tungstenite::connect(&url).unwrap();
    // The server registers the client on its accepting thread; publish until it is there.
    let mut index = 0;
    while streams.statuses()[0].clients != Some(1) {
        std::thread::sleep(Duration::from_millis(10));
        index += 1;
        assert!(index < 500, "the client was never registered");
    }
    for i in 0..3 {
        streams.publish(&one_frame(100 + i, 5));
    }
    for i in 0..3 {
        let message = client.read().unwrap();
        let v: serde_json::Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
        assert_eq!(v["frame"], 100 + i);
        let components = v["components"].as_array().unwrap();
        assert_eq!(components.len(), 5);
        assert_eq!(components[4]["track"], 5);
        assert_eq!(components[4]["label"], 5);
        assert_eq!(components[4]["frame"], 100 + i);
    }
    let status = streams.close();
    assert_eq!(status[0].sent, 3);
    // The server closes the connection when the stream ends.
    loop {
        match client.read() {
            Ok(m) if m.is_close() => break,
            Ok(_) => continue,
            Err(_) => break,
        }
    }
}

/// A stalled client (connected, never reading) and a receiver that is not there slow nobody:
/// publishing returns at once and the frames beyond the queues are dropped.
#[test]
fn a_stalled_client_does_not_hold_up_publishing() {
    let port = free_tcp_port();
    let url = format!("ws://127.0.0.1:{port}");
    let streams = Streams::open_all(&[url.clone(), "osc://127.0.0.1:9".into()]).unwrap();
    let (_client, _) = tungstenite::connect(&url).unwrap();
    let big = one_frame(0, 4000);
    let start = std::time::Instant::now();
    for _ in 0..500 {
        streams.publish(&big);
    }
    let per_frame_ms = start.elapsed().as_secs_f64() * 1e3 / 500.0;
    assert!(per_frame_ms < 5.0, "{per_frame_ms} ms per publish");
    let status = streams.close();
    assert!(
        status.iter().all(|s| s.sent + s.dropped + s.failed == 500),
        "{status:?}"
    );
}

/// Closes `streams`, which must take less than a second.
fn close_within_a_second(streams: Streams) {
    let start = std::time::Instant::now();
    streams.close();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

/// A client whose handshake trickles in (a byte every 100 ms, never complete): cut off after
/// the handshake time, and closing the stream meanwhile is not held up by it.
#[test]
fn a_trickling_websocket_handshake_is_cut_off_in_bounded_time() {
    use std::io::Write;
    let trickle = |port: u16| {
        std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let start = std::time::Instant::now();
            let mut bytes = b"GET / HTTP/1.1\r\nX-Slow: "
                .iter()
                .chain(std::iter::repeat(&b'a'));
            while start.elapsed() < Duration::from_secs(15) {
                if s.write_all(&[*bytes.next().unwrap()]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            start.elapsed()
        })
    };
    // Left open: the server lets the handshake go by itself.
    let port = free_tcp_port();
    let streams = Streams::open_all(&[format!("ws://127.0.0.1:{port}")]).unwrap();
    let cut_after = trickle(port).join().unwrap();
    assert!(cut_after < Duration::from_secs(5), "{cut_after:?}");
    drop(streams);
    // Closed during the handshake: at once.
    let port = free_tcp_port();
    let streams = Streams::open_all(&[format!("ws://127.0.0.1:{port}")]).unwrap();
    let client = trickle(port);
    std::thread::sleep(Duration::from_millis(500));
    close_within_a_second(streams);
    assert!(client.join().unwrap() < Duration::from_secs(5));
}

/// `?max_clients=N`: a client beyond N is let go at once; clients that never read do not hold
/// up the closing.
#[test]
fn websocket_clients_are_capped_and_silent_ones_do_not_delay_the_end() {
    let port = free_tcp_port();
    let url = format!("ws://127.0.0.1:{port}");
    let streams = Streams::open_all(&[format!("{url}?max_clients=2")]).unwrap();
    let silent: Vec<_> = (0..2)
        .map(|_| tungstenite::connect(&url).unwrap())
        .collect();
    let mut waited = 0;
    while streams.statuses()[0].clients != Some(2) {
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
        assert!(waited < 500, "the clients were never registered");
    }
    assert!(
        tungstenite::connect(&url).is_err(),
        "a third client was served"
    );
    let big = one_frame(0, 4000);
    for _ in 0..200 {
        streams.publish(&big);
    }
    close_within_a_second(streams);
    drop(silent);
}

/// An address in use, an unknown scheme, a host that does not resolve: refused on opening,
/// naming the address and what to do.
#[test]
fn bad_addresses_are_refused_with_the_reason() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let url = format!("ws://127.0.0.1:{port}");
    let err = Streams::open_all(std::slice::from_ref(&url))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(&url) && err.contains("in use"), "{err}");
    let err = Streams::open_all(&["ftp://h:1".into()])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("unknown scheme 'ftp'"), "{err}");
    let err = Streams::open_all(&[
        "osc://127.0.0.1:39001".into(),
        "udp://127.0.0.1:39001".into(),
    ])
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("udp://127.0.0.1:39001") && err.contains("own port"),
        "{err}"
    );
    let err = Streams::open_all(&["osc://no-such-host.invalid:3333".into()])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("cannot resolve"), "{err}");
}

/// Nobody listening: the system refuses the datagrams; the stream says so once and the
/// analysis goes on to the end.
#[test]
fn an_unreachable_receiver_is_reported_and_the_analysis_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let opts = AnalyzeOptions {
        streams: vec![format!("udp://127.0.0.1:{port}")],
        ..demo(30, &out)
    };
    let mut notices = Vec::new();
    let summary = analysis::run(&opts, |m| notices.push(m.to_string())).unwrap();
    assert_eq!(summary.frames, 30);
    assert!(summary.streams[0].failed > 0, "{:?}", summary.streams);
    let errors: Vec<_> = notices
        .iter()
        .filter(|n| n.contains("cannot send"))
        .collect();
    assert_eq!(errors.len(), 1, "said once: {notices:?}");
    assert!(
        errors[0].contains(&format!("udp://127.0.0.1:{port}")),
        "{errors:?}"
    );
}

/// `--record`: the recording, analysed again, gives the same rows (times to the millisecond).
#[test]
fn a_recording_analysed_again_gives_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (first, again, video) = (
        dir.path().join("first.csv"),
        dir.path().join("again.csv"),
        dir.path().join("demo.mkv"),
    );
    let opts = AnalyzeOptions {
        record: Some(video.clone()),
        ..demo(45, &first)
    };
    let summary = analysis::run(&opts, |_| {}).unwrap();
    let recording = summary.recording.unwrap();
    assert_eq!((recording.frames, recording.ended_early), (45, None));
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 2, "no temporary file left");

    let opts = AnalyzeOptions {
        threshold: ThresholdSpec::Fixed(127),
        backend: BackendChoice::Cpu,
        ..AnalyzeOptions::new(video.to_str().unwrap(), Output::File(again.clone()))
    };
    assert_eq!(analysis::run(&opts, |_| {}).unwrap().frames, 45);
    let (a, b) = (read_rows(&first), read_rows(&again));
    assert!(a.len() > 45 * 10);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        for (key, value) in x {
            if key == "time_s" {
                let (t0, t1): (f64, f64) = (value.parse().unwrap(), y[key].parse().unwrap());
                assert!((t0 - t1).abs() <= 0.0005 + 1e-9, "{t0} vs {t1}");
            } else {
                assert_eq!(value, &y[key], "{key} of {x:?}");
            }
        }
    }
}

/// A recording that fails before a frame (a name without .mkv) is refused before any work.
#[test]
fn a_recording_must_be_mkv() {
    let dir = tempfile::tempdir().unwrap();
    let opts = AnalyzeOptions {
        record: Some(dir.path().join("x.mp4")),
        ..demo(2, &dir.path().join("o.csv"))
    };
    let err = analysis::run(&opts, |_| {}).unwrap_err().to_string();
    assert!(err.contains("x.mp4") && err.contains(".mkv"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Rows of `synthetic:reflection` that no marker explains (centroid farther than its radius +
/// 1 px from every visible marker's true centre).
fn unexplained(rows: &[BTreeMap<String, String>]) -> Vec<&BTreeMap<String, String>> {
    use markerscope::source::synthetic::{MarkerScene, DEFAULT_SEED};
    let scene = MarkerScene::new(WIDTH, HEIGHT, DEFAULT_SEED).unwrap();
    rows.iter()
        .filter(|r| {
            let f: u64 = r["frame"].parse().unwrap();
            let (x, y): (f64, f64) = (
                r["centroid_x"].parse().unwrap(),
                r["centroid_y"].parse().unwrap(),
            );
            !scene
                .truth(f)
                .iter()
                .any(|m| m.visible && (m.x - x).hypot(m.y - y) <= m.radius + 1.0)
        })
        .collect()
}

/// The demo with a bright static reflection: without a mask it is a component (and a track)
/// in every frame; with the mask learned from the first, empty frames it gives none, and every
/// component left is a marker.
#[test]
fn a_learned_static_mask_removes_the_reflection_and_its_track() {
    use markerscope::source::synthetic::REFLECTION_EMPTY_FRAMES;
    let dir = tempfile::tempdir().unwrap();
    let (plain, masked, mask_png) = (
        dir.path().join("plain.csv"),
        dir.path().join("masked.csv"),
        dir.path().join("mask.png"),
    );
    let scene_opts = |out: &Path| AnalyzeOptions {
        input: "synthetic:reflection".into(),
        ..demo(60, out)
    };
    analysis::run(&scene_opts(&plain), |_| {}).unwrap();
    let rows = read_rows(&plain);
    let glints = unexplained(&rows);
    assert!(
        glints.len() >= 60,
        "the reflection is a component in every frame: {}",
        glints.len()
    );
    let glint_tracks: std::collections::BTreeSet<&str> =
        glints.iter().map(|r| r["track"].as_str()).collect();
    assert!(!glint_tracks.is_empty());

    let opts = AnalyzeOptions {
        learn_mask: Some(REFLECTION_EMPTY_FRAMES),
        save_mask: Some(mask_png.clone()),
        ..scene_opts(&masked)
    };
    let mut notices = Vec::new();
    let summary = analysis::run(&opts, |m| notices.push(m.to_string())).unwrap();
    assert_eq!(summary.frames, 60);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("learned a static mask from 60 frame(s)")),
        "{notices:?}"
    );
    let rows = read_rows(&masked);
    let first: u64 = rows[0]["frame"].parse().unwrap();
    assert!(
        first >= REFLECTION_EMPTY_FRAMES,
        "the learning frames are not analysed"
    );
    assert!(
        rows.len() > 60 * 10,
        "the markers are still found: {} rows",
        rows.len()
    );
    assert!(unexplained(&rows).is_empty(), "{:?}", unexplained(&rows));

    // The saved mask, given as a file over all 120 frames: nothing in the empty frames, and
    // the same rows (track IDs included) after them.
    let again = dir.path().join("again.csv");
    let opts = AnalyzeOptions {
        masks: vec![mask_png],
        max_frames: Some(120),
        ..scene_opts(&again)
    };
    analysis::run(&opts, |_| {}).unwrap();
    assert_eq!(read_rows(&again), rows);
}

/// A region of interest as a TOML file: components outside it are gone; a mask PNG of another
/// size than the frames is scaled, with a notice that says so.
#[test]
fn a_roi_file_keeps_only_its_inside_and_a_wrong_size_mask_is_scaled_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let roi = dir.path().join("roi.toml");
    std::fs::write(&roi, "[roi]\nrect = [0, 0, 160, 180]\n").unwrap();
    let out = dir.path().join("rows.csv");
    let opts = AnalyzeOptions {
        masks: vec![roi],
        ..demo(30, &out)
    };
    analysis::run(&opts, |_| {}).unwrap();
    let rows = read_rows(&out);
    assert!(!rows.is_empty());
    for r in &rows {
        let right: u32 = r["left"].parse::<u32>().unwrap() + r["width"].parse::<u32>().unwrap();
        assert!(right <= 160, "{r:?}");
    }

    // The left half as a 32×18 PNG: scaled ×10 to the 320×180 frames, the same rows.
    let png = dir.path().join("half.png");
    let img = image::GrayImage::from_fn(32, 18, |x, _| image::Luma([if x < 16 { 255 } else { 0 }]));
    img.save(&png).unwrap();
    let scaled_out = dir.path().join("scaled.csv");
    let opts = AnalyzeOptions {
        masks: vec![png],
        ..demo(30, &scaled_out)
    };
    let mut notices = Vec::new();
    analysis::run(&opts, |m| notices.push(m.to_string())).unwrap();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("32x18") && n.contains("320x180") && n.contains("scaled")),
        "{notices:?}"
    );
    assert_eq!(read_rows(&scaled_out), rows);
}

/// A mask that keeps no pixel is said, not left to give 0 components silently.
#[test]
fn a_mask_that_keeps_nothing_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let mask = dir.path().join("black.png");
    image::GrayImage::new(WIDTH, HEIGHT).save(&mask).unwrap();
    let out = dir.path().join("rows.csv");
    let opts = AnalyzeOptions {
        masks: vec![mask],
        ..demo(2, &out)
    };
    let mut notices = Vec::new();
    let summary = analysis::run(&opts, |m| notices.push(m.to_string())).unwrap();
    assert_eq!(summary.components, 0);
    assert!(
        notices.iter().any(|n| n.contains("keeps no pixel")),
        "{notices:?}"
    );
}

/// `--record` as `--out`: a symlink is written through (the link stays), the file keeps its
/// mode, and a FIFO is refused rather than replaced.
#[cfg(target_os = "linux")]
#[test]
fn a_recording_keeps_links_and_modes_and_leaves_fifos_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.mkv");
    std::fs::write(&real, b"old").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("link.mkv");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = dir.path().join("rows.csv");
    let opts = AnalyzeOptions {
        record: Some(link.clone()),
        ..demo(5, &out)
    };
    analysis::run(&opts, |_| {}).unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let meta = std::fs::metadata(&real).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert!(meta.len() > 3, "the recording went through the link");

    let fifo = dir.path().join("fifo.mkv");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let opts = AnalyzeOptions {
        record: Some(fifo.clone()),
        ..demo(5, &out)
    };
    let err = analysis::run(&opts, |_| {}).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}
