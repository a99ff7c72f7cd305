//! The WebSocket server of a `ws://HOST:PORT` stream: markerscope listens, any number of
//! clients connect, and each gets every frame's JSON as a text message through its own
//! dropping queue and thread, so a slow client loses old frames and slows nobody else.
//! What clients send is read only while no frame is waiting (close and ping frames).

use super::queue::{DropQueue, Popped};
use super::spec::{stream_error, StreamSpec};
use crate::error::Result;
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

struct Client {
    queue: Arc<DropQueue<Utf8Bytes>>,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
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
        let accept = {
            let (clients, stop) = (clients.clone(), stop.clone());
            std::thread::Builder::new()
                .name("markerscope-ws-accept".into())
                .spawn(move || accept_loop(&listener, &clients, &stop))
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
        for c in clients.iter_mut() {
            if let Some(t) = c.thread.take() {
                let _ = t.join();
            }
        }
    }
}

fn accept_loop(listener: &TcpListener, clients: &Mutex<Vec<Client>>, stop: &AtomicBool) {
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
        let queue = Arc::new(DropQueue::new(CLIENT_QUEUE));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (queue, done) = (queue.clone(), done.clone());
            std::thread::Builder::new()
                .name("markerscope-ws-client".into())
                .spawn(move || {
                    serve_client(stream, &queue);
                    done.store(true, Ordering::Relaxed);
                })
        };
        // Without a thread the connection is simply dropped (closed).
        if let Ok(thread) = thread {
            clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Client {
                    queue,
                    done,
                    thread: Some(thread),
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
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    // Reads only poll from now on.
    if ws
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(1)))
        .is_err()
    {
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
