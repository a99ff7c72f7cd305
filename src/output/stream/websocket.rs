//! The WebSocket server of a `ws://HOST:PORT` stream: markerscope listens, up to
//! `StreamSpec::max_clients` clients connect (more are let go at once), and each gets every
//! frame's JSON as a text message through its own dropping queue and thread, so a slow client
//! loses old frames and slows nobody else. What clients send is read only while no frame is
//! waiting (close and ping frames). A handshake has `CLIENT_TIMEOUT` in all, however slowly
//! its bytes come, and closing the server takes at most about `CLOSE_GRACE` more than that:
//! clients that have not said goodbye by then are cut off.

use super::queue::{DropQueue, Popped};
use super::spec::{stream_error, StreamSpec};
use crate::error::Result;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tungstenite::{Message, Utf8Bytes};

/// Frames a client may fall behind before its oldest is dropped.
const CLIENT_QUEUE: usize = 4;
/// How long a client has to complete the handshake, and a blocked write may take, before it
/// is let go.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the accepting thread looks at the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// How long closing waits for the clients to take their close message before cutting them off.
const CLOSE_GRACE: Duration = Duration::from_millis(300);

struct Client {
    queue: Arc<DropQueue<Utf8Bytes>>,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// A second handle to the connection, to cut it off at closing. The client's thread lets
    /// it go when it ends: the connection closes only once every handle to it is gone.
    socket: Arc<Mutex<Option<TcpStream>>>,
}

pub struct WebSocketServer {
    local: SocketAddr,
    clients: Arc<Mutex<Vec<Client>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl WebSocketServer {
    /// Listens on the spec's address; an address in use or not of this machine is an error.
    pub fn bind(spec: &StreamSpec) -> Result<WebSocketServer> {
        let addr = spec.resolve()?;
        let listener = TcpListener::bind(addr).map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "the port is in use by another program; choose another port"
                }
                std::io::ErrorKind::AddrNotAvailable => {
                    "the address is not one of this machine's; use 127.0.0.1 or 0.0.0.0"
                }
                _ => "check the address",
            };
            stream_error(&spec.url, format!("cannot listen on {addr}: {e}; {hint}"))
        })?;
        let local = listener
            .local_addr()
            .map_err(|e| stream_error(&spec.url, e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| stream_error(&spec.url, e.to_string()))?;
        let clients: Arc<Mutex<Vec<Client>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let max_clients = spec.max_clients;
        let accept = {
            let (clients, stop) = (clients.clone(), stop.clone());
            std::thread::Builder::new()
                .name("markerscope-ws-accept".into())
                .spawn(move || accept_loop(&listener, &clients, &stop, max_clients))
                .map_err(|e| stream_error(&spec.url, format!("cannot start a thread: {e}")))?
        };
        Ok(WebSocketServer {
            local,
            clients,
            stop,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Queues `text` for every connected client; forgets the clients that went away.
    pub fn broadcast(&self, text: &Utf8Bytes) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain_mut(|c| {
            if c.done.load(Ordering::Relaxed) {
                if let Some(t) = c.thread.take() {
                    let _ = t.join();
                }
                return false;
            }
            c.queue.push(text.clone());
            true
        });
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .iter()
            .filter(|c| !c.done.load(Ordering::Relaxed))
            .count()
    }
}

impl Drop for WebSocketServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        for c in clients.iter() {
            c.queue.close();
        }
        // A client that does not read (or is still in its handshake) is cut off, so that its
        // thread ends now rather than when its write or read times out.
        let until = std::time::Instant::now() + CLOSE_GRACE;
        while std::time::Instant::now() < until
            && clients.iter().any(|c| !c.done.load(Ordering::Relaxed))
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        for c in clients.iter_mut() {
            let socket = c.socket.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(socket) = socket.as_ref() {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
            drop(socket);
            if let Some(t) = c.thread.take() {
                let _ = t.join();
            }
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    clients: &Mutex<Vec<Client>>,
    stop: &AtomicBool,
    max_clients: usize,
) {
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) => {
                // WouldBlock (nobody waiting), or a connection that failed before it was
                // accepted: look again shortly.
                std::thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        let mut clients = clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain_mut(|c| {
            let done = c.done.load(Ordering::Relaxed);
            if let (true, Some(t)) = (done, c.thread.take()) {
                let _ = t.join();
            }
            !done
        });
        // Over the limit, or no handle to cut it off with: the connection is closed at once.
        let socket = match stream.try_clone() {
            Ok(socket) if clients.len() < max_clients => Arc::new(Mutex::new(Some(socket))),
            _ => continue,
        };
        let queue = Arc::new(DropQueue::new(CLIENT_QUEUE));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queue, done, socket) = (queue.clone(), done.clone(), socket.clone());
            std::thread::Builder::new()
                .name("markerscope-ws-client".into())
                .spawn(move || {
                    serve_client(stream, &queue);
                    // The other handle gone too, the connection closes now (a client cut off
                    // in its handshake learns it at once), not when the list is next pruned.
                    socket.lock().unwrap_or_else(|e| e.into_inner()).take();
                    done.store(true, Ordering::Relaxed);
                })
        };
        // Without a thread the connection is simply dropped (closed).
        if let Ok(thread) = thread {
            clients.push(Client {
                queue,
                done,
                thread: Some(thread),
                socket,
            });
        }
    }
}

/// One client: the handshake, then its queue's messages until it goes away or the stream
/// closes.
fn serve_client(stream: TcpStream, queue: &DropQueue<Utf8Bytes>) {
    let setup = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(CLIENT_TIMEOUT)))
        .and_then(|()| stream.set_write_timeout(Some(CLIENT_TIMEOUT)))
        .and_then(|()| stream.set_nodelay(true));
    if setup.is_err() {
        return;
    }
    let stream = Deadline {
        stream,
        until: Some(std::time::Instant::now() + CLIENT_TIMEOUT),
    };
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    // No deadline after the handshake: a blocked write has `CLIENT_TIMEOUT`, and reads only
    // poll.
    ws.get_mut().until = None;
    let socket = &ws.get_ref().stream;
    let setup = socket
        .set_write_timeout(Some(CLIENT_TIMEOUT))
        .and_then(|()| socket.set_read_timeout(Some(Duration::from_millis(1))));
    if setup.is_err() {
        return;
    }
    loop {
        match queue.pop(Duration::from_millis(100)) {
            Popped::Item(text) => {
                if ws.send(Message::Text(text)).is_err() {
                    return;
                }
            }
            Popped::Empty => match ws.read() {
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return,
            },
            Popped::Closed => {
                let _ = ws.close(None);
                let _ = ws.flush();
                return;
            }
        }
    }
}

/// A connection with a deadline for everything read or written until it is lifted: a
/// handshake whose bytes trickle in never outlasts it.
struct Deadline {
    stream: TcpStream,
    until: Option<std::time::Instant>,
}

impl Deadline {
    /// Before each read or write: the time left as the socket's timeout, or an error once
    /// there is none left.
    fn check(&self) -> std::io::Result<()> {
        let Some(until) = self.until else {
            return Ok(());
        };
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))
    }
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.check()?;
        self.stream.read(buf)
    }
}

impl Write for Deadline {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.check()?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}
