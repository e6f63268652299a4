//! The stats snapshot for Prometheus: [`render`] writes a [`Snapshot`] in
//! the text exposition format 0.0.4, and [`MetricsServer`] answers
//! `GET /metrics` with it over HTTP/1.1 (`roce-xdp serve --metrics
//! ADDR:PORT`; docs/usage.md lists the metrics).
//!
//! Metric names are `roce_xdp_` and the snapshot's names in snake case;
//! every counter ends in `_total`, gauges never do. Labels: `iface` on
//! every sample, `queue` on per-queue ones, `pid` and `command` on
//! per-process ones (a shared engine's attached processes).
//!
//! The server is std only: one thread accepts, one thread per connection
//! (at most [`Limits::connections`] at once; beyond that a client gets 503
//! at once) reads one request head of at most [`Limits::request_bytes`]
//! within [`Limits::timeout`], answers it and closes. A client that sends
//! nothing, too slowly or too much cannot hold the server or its memory.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::io::Waker;

use super::Snapshot;

/// The `Content-Type` of the text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The path the server answers.
pub const METRICS_PATH: &str = "/metrics";

// ---------------------------------------------------------------------
// The exposition format
// ---------------------------------------------------------------------

/// A metric name from `prefix` and a snapshot's counter name: lower case,
/// every character outside `[a-z0-9_]` made `_` (the format allows `:`,
/// but it is reserved for recording rules), `_total` appended to
/// counters that do not end in it.
fn metric_name(prefix: &str, raw: &str, counter: bool) -> String {
    let mut n = String::with_capacity(prefix.len() + raw.len() + 6);
    n.push_str(prefix);
    n.extend(raw.chars().map(|c| match c.to_ascii_lowercase() {
        c @ ('a'..='z' | '0'..='9' | '_') => c,
        _ => '_',
    }));
    if counter && !n.ends_with("_total") {
        n.push_str("_total");
    }
    n
}

/// A label value, escaped as the format says: `\` `"` and line feed.
fn label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A sample's value: integers as such, floats as Go's ParseFloat reads
/// them (`NaN`, `+Inf`, `-Inf`).
enum Value {
    Int(u64),
    Float(f64),
}

fn write_value(out: &mut String, v: Value) {
    match v {
        Value::Int(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Float(x) if x.is_nan() => out.push_str("NaN"),
        Value::Float(x) if x.is_infinite() => out.push_str(if x > 0.0 { "+Inf" } else { "-Inf" }),
        Value::Float(x) => {
            let _ = write!(out, "{x}");
        }
    }
}

/// The `# HELP` and `# TYPE` lines of a family (HELP escapes `\` and line
/// feed).
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = write!(out, "# HELP {name} ");
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    let _ = writeln!(out, "\n# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], v: Value) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"");
            label_value(out, val);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    write_value(out, v);
    out.push('\n');
}

/// A gauge family's name and help.
struct Gauge<'a> {
    name: &'a str,
    help: &'a str,
}

/// A gauge family with one sample per `(labels, value)`; nothing at all
/// when there is no sample.
fn gauge<L: AsRef<[(&'static str, String)]>>(
    out: &mut String,
    g: Gauge<'_>,
    samples: impl IntoIterator<Item = (L, Value)>,
) {
    let mut header = false;
    for (labels, v) in samples {
        if !header {
            family(out, g.name, "gauge", g.help);
            header = true;
        }
        let l: Vec<(&str, &str)> = labels
            .as_ref()
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        sample(out, g.name, &l, v);
    }
}

/// Labels (name, value).
type Labels = Vec<(&'static str, String)>;

/// An item's labels and its named counters.
type Labelled<'a> = (Labels, &'a [(String, u64)]);

/// Counter families out of named counters that several items (queues,
/// processes) each carry: one family per metric name, in order of first
/// appearance, a sample per item that has the counter. Two raw names that
/// make the same metric name (`a-b`, `a_b`) are added together, so no
/// family is written twice.
fn counter_families(
    out: &mut String,
    prefix: &str,
    help: impl Fn(&str) -> String,
    items: &[Labelled<'_>],
) {
    let mut order: Vec<(String, &str)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let named: Vec<Vec<(usize, u64)>> = items
        .iter()
        .map(|(_, counters)| {
            counters
                .iter()
                .map(|(raw, v)| {
                    let name = metric_name(prefix, raw, true);
                    let i = *index.entry(name.clone()).or_insert_with(|| {
                        order.push((name, raw.as_str()));
                        order.len() - 1
                    });
                    (i, *v)
                })
                .collect()
        })
        .collect();
    for (f, (name, raw)) in order.iter().enumerate() {
        family(out, name, "counter", &help(raw));
        for ((labels, _), counters) in items.iter().zip(&named) {
            let mut sum = None;
            for (i, v) in counters {
                if *i == f {
                    sum = Some(sum.unwrap_or(0u64).wrapping_add(*v));
                }
            }
            if let Some(v) = sum {
                let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                sample(out, name, &l, Value::Int(v));
            }
        }
    }
}

/// `snapshot` in the text exposition format 0.0.4. Families without a
/// sample (no queue, no CM, no attached process) are left out.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::with_capacity(4096);
    let iface = || ("iface", s.iface.clone());
    gauge(
        &mut out,
        Gauge {
            name: "roce_xdp_info",
            help: "The engine serving the interface: its process, XDP attach mode and whether every queue is zero-copy (always 1).",
        },
        [(
            [
                iface(),
                ("pid", s.pid.to_string()),
                ("xdp_mode", s.xdp_mode.clone()),
                ("zero_copy", s.zero_copy.to_string()),
            ],
            Value::Int(1),
        )],
    );
    gauge(
        &mut out,
        Gauge {
            name: "roce_xdp_uptime_seconds",
            help: "Seconds since the engines started.",
        },
        [([iface()], Value::Float(s.uptime_ns as f64 / 1e9))],
    );
    let queue = |q: u32| [iface(), ("queue", q.to_string())];
    gauge(
        &mut out,
        Gauge {
            name: "roce_xdp_queue_zero_copy",
            help: "1 when the queue's AF_XDP socket is bound in zero-copy mode, 0 in copy mode.",
        },
        s.queues
            .iter()
            .map(|q| (queue(q.queue), Value::Int(q.zero_copy.into()))),
    );
    let queues: Vec<_> = s
        .queues
        .iter()
        .map(|q| (queue(q.queue).to_vec(), q.counters.as_slice()))
        .collect();
    counter_families(
        &mut out,
        "roce_xdp_queue_",
        |raw| format!("Queue counter {raw} (roce-xdp stats), per queue."),
        &queues,
    );
    gauge(
        &mut out,
        Gauge {
            name: "roce_xdp_qp_rate_bits_per_second",
            help: "Current DCQCN rate of each QP in bit/s (the line rate while not limited).",
        },
        s.queues.iter().flat_map(|q| {
            q.qp_rates.iter().map(move |(qpn, bps)| {
                (
                    [
                        iface(),
                        ("queue", q.queue.to_string()),
                        ("qpn", qpn.to_string()),
                    ],
                    Value::Float(*bps),
                )
            })
        }),
    );
    counter_families(
        &mut out,
        "roce_xdp_xdp_",
        |raw| format!("XDP program counter {raw}, summed over CPUs."),
        &[(vec![iface()], s.xdp.as_slice())],
    );
    if let Some(st) = &s.steering {
        gauge(
            &mut out,
            Gauge {
                name: "roce_xdp_steering_info",
                help:
                    "How RoCE traffic reaches the served queues (docs/queue-coverage.md; always 1).",
            },
            [(
                [
                    iface(),
                    ("state", st.state.name().to_string()),
                    ("mode", st.mode.name().to_string()),
                ],
                Value::Int(1),
            )],
        );
        gauge(
            &mut out,
            Gauge {
                name: "roce_xdp_steering_uncovered_queues",
                help: "Receive queues RoCE traffic may reach that no engine serves.",
            },
            [([iface()], Value::Int(st.uncovered().len() as u64))],
        );
    }
    if let Some(cm) = &s.cm {
        counter_families(
            &mut out,
            "roce_xdp_cm_",
            |raw| format!("RDMA CM agent counter {raw}."),
            &[(vec![iface()], cm.as_slice())],
        );
    }
    gauge(
        &mut out,
        Gauge {
            name: "roce_xdp_processes",
            help: "Processes attached to the shared engine (roce-xdp service); 0 for an engine inside one process.",
        },
        [([iface()], Value::Int(s.processes.len() as u64))],
    );
    let process = |p: &super::ProcessSnapshot| {
        [
            iface(),
            ("pid", p.pid.to_string()),
            ("command", p.command.clone()),
        ]
    };
    gauge(
        &mut out,
        Gauge {
            name: "roce_xdp_process_info",
            help: "An attached process: its user and its block of QP numbers (always 1).",
        },
        s.processes.iter().map(|p| {
            let mut l = process(p).to_vec();
            l.push(("uid", p.uid.to_string()));
            l.push(("qpn_first", p.qpn_first.to_string()));
            l.push(("qpn_last", p.qpn_last.to_string()));
            (l, Value::Int(1))
        }),
    );
    type Field = fn(&super::ProcessSnapshot) -> Value;
    let fields: [(&str, &str, Field); 5] = [
        (
            "roce_xdp_process_attached_seconds",
            "Seconds since the process attached.",
            |p| Value::Float(p.attached_ns as f64 / 1e9),
        ),
        (
            "roce_xdp_process_qps",
            "QPs the process holds, as it reports them.",
            |p| Value::Int(p.qps),
        ),
        (
            "roce_xdp_process_regions",
            "Memory regions the process holds, as it reports them.",
            |p| Value::Int(p.regions),
        ),
        (
            "roce_xdp_process_zero_copy_regions",
            "Of the process's regions, those reached without a copy.",
            |p| Value::Int(p.zero_copy_regions),
        ),
        (
            "roce_xdp_process_copied_regions",
            "Of the process's regions, those copied through the shared frame rings.",
            |p| Value::Int(p.copied_regions),
        ),
    ];
    for (name, help, f) in fields {
        gauge(
            &mut out,
            Gauge { name, help },
            s.processes.iter().map(|p| (process(p), f(p))),
        );
    }
    let processes: Vec<_> = s
        .processes
        .iter()
        .map(|p| (process(p).to_vec(), p.counters.as_slice()))
        .collect();
    counter_families(
        &mut out,
        "roce_xdp_process_",
        |raw| format!("Attached process counter {raw}, per process."),
        &processes,
    );
    out
}

// ---------------------------------------------------------------------
// The HTTP server
// ---------------------------------------------------------------------

/// What one client may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request head (request line and headers), bytes; beyond it
    /// the client gets 431 and is closed.
    pub request_bytes: usize,
    /// Time a client has to send its request head (then 408), and again
    /// to take the answer.
    pub timeout: Duration,
    /// Connections served at once; one more gets 503 at once.
    pub connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_bytes: 8192,
            timeout: Duration::from_secs(5),
            connections: 8,
        }
    }
}

/// How long a blocked read or write waits before the connection's thread
/// looks at its deadline and at the server's stop flag again: the bound on
/// how long dropping the server waits for a connection.
const SLICE: Duration = Duration::from_millis(100);

/// How long the accepting thread sleeps at most when no client comes (it
/// is woken by a client or by the drop; this only bounds a lost wake-up).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// Bytes read and thrown away after answering, so that closing with a
/// client's unread bytes does not reset the connection before it has read
/// the answer.
const LINGER_BYTES: usize = 64 * 1024;

/// Serves `GET /metrics` until dropped.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (port 0: any free port, see [`MetricsServer::local_addr`])
    /// and answers `GET /metrics` with [`render`] of `source()`, taken
    /// anew for each request, from background threads.
    pub fn start<F>(addr: SocketAddr, source: F) -> io::Result<MetricsServer>
    where
        F: Fn() -> Snapshot + Send + Sync + 'static,
    {
        Self::start_with(addr, source, Limits::default())
    }

    /// As [`MetricsServer::start`], with explicit limits.
    pub fn start_with<F>(addr: SocketAddr, source: F, limits: Limits) -> io::Result<MetricsServer>
    where
        F: Fn() -> Snapshot + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Waker::new()?);
        let (stop2, waker2) = (stop.clone(), waker.clone());
        let source = Arc::new(source);
        let thread = std::thread::Builder::new()
            .name("roce-xdp-metrics".into())
            .spawn(move || accept_loop(listener, &stop2, &waker2, source, limits))?;
        Ok(MetricsServer {
            addr,
            stop,
            waker,
            thread: Some(thread),
        })
    }

    /// The address bound (the port chosen when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts until `stop`; each connection gets a thread, up to
/// `limits.connections`. Joins them all before it returns, so that
/// nothing holds `source` once the server is dropped.
fn accept_loop<F>(
    listener: TcpListener,
    stop: &Arc<AtomicBool>,
    waker: &Waker,
    source: Arc<F>,
    limits: Limits,
) where
    F: Fn() -> Snapshot + Send + Sync + 'static,
{
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                conns.retain(|c| !c.is_finished());
                if conns.len() >= limits.connections {
                    busy(conn);
                    continue;
                }
                let (source, stop) = (source.clone(), stop.clone());
                // A thread that cannot start drops the connection with it.
                if let Ok(h) = std::thread::Builder::new()
                    .name("roce-xdp-metrics-conn".into())
                    .spawn(move || answer(conn, &*source, &stop, limits))
                {
                    conns.push(h);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if waker.wait_with(&listener, IDLE_WAIT).is_err() {
                    std::thread::sleep(IDLE_WAIT);
                }
            }
            // ECONNABORTED, EMFILE and the like: the next one may be fine.
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    for c in conns {
        let _ = c.join();
    }
}

/// 503 to a client beyond the limit, without waiting on it: a fresh
/// socket's send buffer takes these bytes at once, or they are lost.
fn busy(conn: TcpStream) {
    let _ = conn.set_nonblocking(true);
    let _ = (&conn).write(&response(503, "Service Unavailable", &[], b"busy\n"));
    let _ = conn.shutdown(Shutdown::Write);
    // What the client already sent (a little of it: this is the
    // accepting thread), read so that the close is no reset.
    let mut chunk = [0u8; 4096];
    for _ in 0..4 {
        if !matches!((&conn).read(&mut chunk), Ok(n) if n > 0) {
            break;
        }
    }
}

/// Why no request head was read.
#[derive(Debug, PartialEq)]
enum HeadError {
    TooLarge,
    TimedOut,
    /// The client closed, the connection failed, or the server stops.
    Gone,
}

/// Reads a request head (up to the blank line) of at most `limit` bytes
/// by `deadline`.
fn read_head(
    conn: &mut TcpStream,
    stop: &AtomicBool,
    deadline: Instant,
    limit: usize,
) -> Result<Vec<u8>, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&buf) {
            buf.truncate(end);
            return Ok(buf);
        }
        if buf.len() >= limit {
            return Err(HeadError::TooLarge);
        }
        if stop.load(Ordering::Relaxed) {
            return Err(HeadError::Gone);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::TimedOut);
        }
        let _ = conn.set_read_timeout(Some(left.min(SLICE)));
        // Never more than `limit` bytes held (plus the head's end).
        let room = (limit - buf.len()).min(chunk.len());
        match conn.read(&mut chunk[..room]) {
            Ok(0) => return Err(HeadError::Gone),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Err(HeadError::Gone),
        }
    }
}

/// Where the head ends (the blank line; a bare LF is read as CRLF, as
/// RFC 9112 2.2 allows).
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A whole response, `Connection: close`.
fn response(code: u16, reason: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {code} {reason}\r\n");
    for (k, v) in headers {
        let _ = write!(head, "{k}: {v}\r\n");
    }
    if !headers.iter().any(|(k, _)| *k == "Content-Type") {
        head.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    let _ = write!(
        head,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut r = head.into_bytes();
    r.extend_from_slice(body);
    r
}

/// The answer to a request head.
fn route<F: Fn() -> Snapshot>(head: &[u8], source: &F) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return response(400, "Bad Request", &[], b"bad request line\n");
    };
    if !version.starts_with("HTTP/1.") {
        return response(400, "Bad Request", &[], b"HTTP/1.x only\n");
    }
    let path = target.split('?').next().unwrap_or_default();
    if path != METRICS_PATH {
        return response(404, "Not Found", &[], b"not found: try /metrics\n");
    }
    match method {
        "GET" | "HEAD" => {
            let body = render(&source());
            let mut r = response(
                200,
                "OK",
                &[("Content-Type", CONTENT_TYPE)],
                body.as_bytes(),
            );
            if method == "HEAD" {
                r.truncate(r.len() - body.len());
            }
            r
        }
        _ => response(
            405,
            "Method Not Allowed",
            &[("Allow", "GET, HEAD")],
            b"GET or HEAD only\n",
        ),
    }
}

/// Writes `bytes` by `deadline` (or gives up), in slices that look at
/// `stop`.
fn write_by(conn: &mut TcpStream, mut bytes: &[u8], stop: &AtomicBool, deadline: Instant) {
    while !bytes.is_empty() && !stop.load(Ordering::Relaxed) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let _ = conn.set_write_timeout(Some(left.min(SLICE)));
        match conn.write(bytes) {
            Ok(0) => return,
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// Ends the connection after the answer: no more writes, then what the
/// client still sends (at most [`LINGER_BYTES`], for at most [`SLICE`]
/// times a few) is read and dropped, so that the close is a FIN and not a
/// reset that could destroy the answer in flight.
fn linger_close(mut conn: TcpStream, stop: &AtomicBool) {
    let _ = conn.shutdown(Shutdown::Write);
    let deadline = Instant::now() + 3 * SLICE;
    let mut chunk = [0u8; 4096];
    let mut taken = 0;
    while taken < LINGER_BYTES && !stop.load(Ordering::Relaxed) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let _ = conn.set_read_timeout(Some(left.min(SLICE)));
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => taken += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Serves one connection: one request, one answer, closed.
fn answer<F: Fn() -> Snapshot>(mut conn: TcpStream, source: &F, stop: &AtomicBool, limits: Limits) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_nodelay(true);
    let deadline = Instant::now() + limits.timeout;
    let reply = match read_head(&mut conn, stop, deadline, limits.request_bytes) {
        Ok(head) => route(&head, source),
        Err(HeadError::TooLarge) => response(
            431,
            "Request Header Fields Too Large",
            &[],
            b"request head too large\n",
        ),
        Err(HeadError::TimedOut) => response(408, "Request Timeout", &[], b"request timeout\n"),
        Err(HeadError::Gone) => return,
    };
    write_by(&mut conn, &reply, stop, Instant::now() + limits.timeout);
    linger_close(conn, stop);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{ProcessSnapshot, QueueSnapshot};

    fn snapshot() -> Snapshot {
        Snapshot {
            iface: "eth\"0".into(),
            pid: 42,
            uptime_ns: 2_500_000_000,
            xdp_mode: "native".into(),
            zero_copy: false,
            xdp: vec![("seen".into(), 10), ("redirected".into(), 9)],
            queues: vec![
                QueueSnapshot {
                    queue: 0,
                    core: Some(1),
                    zero_copy: true,
                    counters: vec![("sent_pkts".into(), 5), ("rcvd_pkts".into(), 1)],
                    qp_rates: vec![(17, 100e9)],
                },
                QueueSnapshot {
                    queue: 1,
                    core: None,
                    zero_copy: false,
                    counters: vec![("sent_pkts".into(), 7), ("loops_total".into(), 3)],
                    qp_rates: Vec::new(),
                },
            ],
            steering: None,
            cm: Some(vec![("malformed".into(), 4)]),
            processes: vec![ProcessSnapshot {
                pid: 1234,
                command: "ib_write\\bw\n\"x\"".into(),
                uid: 1000,
                attached_ns: 1_000_000_000,
                qpn_first: 0x100,
                qpn_last: 0x1ff,
                qps: 2,
                regions: 3,
                zero_copy_regions: 1,
                copied_regions: 2,
                counters: vec![
                    ("frames_in".into(), 11),
                    ("Frames-Out".into(), 12),
                    ("frames_in_dropped".into(), 1),
                ],
            }],
        }
    }

    #[test]
    fn renders_every_family_with_escaped_labels() {
        let text = render(&snapshot());
        let cmd = r#"command="ib_write\\bw\n\"x\"""#;
        let expected = [
            "# HELP roce_xdp_info The engine serving the interface: its process, XDP attach mode and whether every queue is zero-copy (always 1).",
            "# TYPE roce_xdp_info gauge",
            r#"roce_xdp_info{iface="eth\"0",pid="42",xdp_mode="native",zero_copy="false"} 1"#,
            "# HELP roce_xdp_uptime_seconds Seconds since the engines started.",
            "# TYPE roce_xdp_uptime_seconds gauge",
            r#"roce_xdp_uptime_seconds{iface="eth\"0"} 2.5"#,
            "# HELP roce_xdp_queue_zero_copy 1 when the queue's AF_XDP socket is bound in zero-copy mode, 0 in copy mode.",
            "# TYPE roce_xdp_queue_zero_copy gauge",
            r#"roce_xdp_queue_zero_copy{iface="eth\"0",queue="0"} 1"#,
            r#"roce_xdp_queue_zero_copy{iface="eth\"0",queue="1"} 0"#,
            "# HELP roce_xdp_queue_sent_pkts_total Queue counter sent_pkts (roce-xdp stats), per queue.",
            "# TYPE roce_xdp_queue_sent_pkts_total counter",
            r#"roce_xdp_queue_sent_pkts_total{iface="eth\"0",queue="0"} 5"#,
            r#"roce_xdp_queue_sent_pkts_total{iface="eth\"0",queue="1"} 7"#,
            "# HELP roce_xdp_queue_rcvd_pkts_total Queue counter rcvd_pkts (roce-xdp stats), per queue.",
            "# TYPE roce_xdp_queue_rcvd_pkts_total counter",
            r#"roce_xdp_queue_rcvd_pkts_total{iface="eth\"0",queue="0"} 1"#,
            "# HELP roce_xdp_queue_loops_total Queue counter loops_total (roce-xdp stats), per queue.",
            "# TYPE roce_xdp_queue_loops_total counter",
            r#"roce_xdp_queue_loops_total{iface="eth\"0",queue="1"} 3"#,
            "# HELP roce_xdp_qp_rate_bits_per_second Current DCQCN rate of each QP in bit/s (the line rate while not limited).",
            "# TYPE roce_xdp_qp_rate_bits_per_second gauge",
            r#"roce_xdp_qp_rate_bits_per_second{iface="eth\"0",queue="0",qpn="17"} 100000000000"#,
            "# HELP roce_xdp_xdp_seen_total XDP program counter seen, summed over CPUs.",
            "# TYPE roce_xdp_xdp_seen_total counter",
            r#"roce_xdp_xdp_seen_total{iface="eth\"0"} 10"#,
            "# HELP roce_xdp_xdp_redirected_total XDP program counter redirected, summed over CPUs.",
            "# TYPE roce_xdp_xdp_redirected_total counter",
            r#"roce_xdp_xdp_redirected_total{iface="eth\"0"} 9"#,
            "# HELP roce_xdp_cm_malformed_total RDMA CM agent counter malformed.",
            "# TYPE roce_xdp_cm_malformed_total counter",
            r#"roce_xdp_cm_malformed_total{iface="eth\"0"} 4"#,
            "# HELP roce_xdp_processes Processes attached to the shared engine (roce-xdp service); 0 for an engine inside one process.",
            "# TYPE roce_xdp_processes gauge",
            r#"roce_xdp_processes{iface="eth\"0"} 1"#,
            "# HELP roce_xdp_process_info An attached process: its user and its block of QP numbers (always 1).",
            "# TYPE roce_xdp_process_info gauge",
            &format!(r#"roce_xdp_process_info{{iface="eth\"0",pid="1234",{cmd},uid="1000",qpn_first="256",qpn_last="511"}} 1"#),
            "# HELP roce_xdp_process_attached_seconds Seconds since the process attached.",
            "# TYPE roce_xdp_process_attached_seconds gauge",
            &format!(r#"roce_xdp_process_attached_seconds{{iface="eth\"0",pid="1234",{cmd}}} 1"#),
            "# HELP roce_xdp_process_qps QPs the process holds, as it reports them.",
            "# TYPE roce_xdp_process_qps gauge",
            &format!(r#"roce_xdp_process_qps{{iface="eth\"0",pid="1234",{cmd}}} 2"#),
            "# HELP roce_xdp_process_regions Memory regions the process holds, as it reports them.",
            "# TYPE roce_xdp_process_regions gauge",
            &format!(r#"roce_xdp_process_regions{{iface="eth\"0",pid="1234",{cmd}}} 3"#),
            "# HELP roce_xdp_process_zero_copy_regions Of the process's regions, those reached without a copy.",
            "# TYPE roce_xdp_process_zero_copy_regions gauge",
            &format!(r#"roce_xdp_process_zero_copy_regions{{iface="eth\"0",pid="1234",{cmd}}} 1"#),
            "# HELP roce_xdp_process_copied_regions Of the process's regions, those copied through the shared frame rings.",
            "# TYPE roce_xdp_process_copied_regions gauge",
            &format!(r#"roce_xdp_process_copied_regions{{iface="eth\"0",pid="1234",{cmd}}} 2"#),
            "# HELP roce_xdp_process_frames_in_total Attached process counter frames_in, per process.",
            "# TYPE roce_xdp_process_frames_in_total counter",
            &format!(r#"roce_xdp_process_frames_in_total{{iface="eth\"0",pid="1234",{cmd}}} 11"#),
            "# HELP roce_xdp_process_frames_out_total Attached process counter Frames-Out, per process.",
            "# TYPE roce_xdp_process_frames_out_total counter",
            &format!(r#"roce_xdp_process_frames_out_total{{iface="eth\"0",pid="1234",{cmd}}} 12"#),
            "# HELP roce_xdp_process_frames_in_dropped_total Attached process counter frames_in_dropped, per process.",
            "# TYPE roce_xdp_process_frames_in_dropped_total counter",
            &format!(r#"roce_xdp_process_frames_in_dropped_total{{iface="eth\"0",pid="1234",{cmd}}} 1"#),
        ];
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, expected, "{text}");
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn an_in_process_engine_has_no_process_families() {
        let mut s = snapshot();
        s.processes.clear();
        s.cm = None;
        s.queues.clear();
        let text = render(&s);
        assert!(
            text.contains("\nroce_xdp_processes{iface=\"eth\\\"0\"} 0\n"),
            "{text}"
        );
        for absent in [
            "roce_xdp_process_",
            "roce_xdp_cm_",
            "roce_xdp_queue_",
            "qp_rate",
        ] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
    }

    #[test]
    fn names_values_and_help_are_escaped_as_the_format_says() {
        assert_eq!(metric_name("p_", "A-b.c", true), "p_a_b_c_total");
        assert_eq!(metric_name("p_", "x_total", true), "p_x_total");
        assert_eq!(metric_name("p_", "x", false), "p_x");
        let mut out = String::new();
        label_value(&mut out, "a\\b\"c\nd");
        assert_eq!(out, r#"a\\b\"c\nd"#);
        let mut out = String::new();
        family(&mut out, "m", "gauge", "x\\y\nz \"q\"");
        assert_eq!(out, "# HELP m x\\\\y\\nz \"q\"\n# TYPE m gauge\n");
        for (v, s) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (0.25, "0.25"),
        ] {
            let mut out = String::new();
            write_value(&mut out, Value::Float(v));
            assert_eq!(out, s);
        }
        // Two raw names of one metric name: one family, their sum.
        let mut out = String::new();
        counter_families(
            &mut out,
            "p_",
            |r| r.to_string(),
            &[(
                vec![("iface", "i".to_string())],
                &[("a-b".to_string(), 1), ("a_b".to_string(), 2)][..],
            )],
        );
        assert_eq!(
            out,
            "# HELP p_a_b_total a-b\n# TYPE p_a_b_total counter\np_a_b_total{iface=\"i\"} 3\n"
        );
    }

    /// One request on a fresh connection; the whole answer (the server
    /// closes).
    fn request(addr: SocketAddr, req: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(req).unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn local() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest() {
        let server = MetricsServer::start(local(), snapshot).unwrap();
        let addr = server.local_addr();
        assert_ne!(addr.port(), 0);
        let r = request(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(
            head.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())),
            "{head}"
        );
        assert_eq!(body, render(&snapshot()));
        // A query string is the same path; HEAD has the head only.
        let r = request(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        let r = request(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
        let r = request(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
        let r = request(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
        assert!(r.contains("\r\nAllow: GET, HEAD\r\n"), "{r}");
        let r = request(addr, b"nonsense\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{r}");
        let r = request(addr, b"GET /metrics SPDY/3\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{r}");
        // A bare LF ends the head too.
        let r = request(addr, b"GET /metrics HTTP/1.1\n\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    }

    #[test]
    fn an_oversized_request_is_refused() {
        let server = MetricsServer::start(local(), snapshot).unwrap();
        let mut req = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', 16 * 1024));
        req.extend_from_slice(b"\r\n\r\n");
        let r = request(server.local_addr(), &req);
        assert!(
            r.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{r}"
        );
        assert!(!r.contains("roce_xdp_"), "{r}");
        // A head that never ends is cut at the limit too.
        let mut c = TcpStream::connect(server.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let junk = [b'x'; 4096];
        let mut refused = false;
        for _ in 0..64 {
            if c.write_all(&junk).is_err() {
                refused = true; // reset once the server stopped reading
                break;
            }
        }
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        assert!(refused || out.starts_with("HTTP/1.1 431 "), "{out}");
        // And the server still answers.
        let r = request(server.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    }

    #[test]
    fn a_silent_client_blocks_nobody_and_is_timed_out() {
        let limits = Limits {
            timeout: Duration::from_millis(800),
            ..Limits::default()
        };
        let server = MetricsServer::start_with(local(), snapshot, limits).unwrap();
        let addr = server.local_addr();
        let t = Instant::now();
        let mut silent = TcpStream::connect(addr).unwrap();
        // Another client is answered while the silent one waits.
        let r = request(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(t.elapsed() < limits.timeout, "{:?}", t.elapsed());
        // The silent one gets 408 at its deadline, then the close.
        silent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut out = Vec::new();
        silent.read_to_end(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{out}");
        assert!(t.elapsed() >= limits.timeout, "{:?}", t.elapsed());
        // A client sending one byte at a time does not get more time.
        let t = Instant::now();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        for b in b"GET /m" {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        let mut out = Vec::new();
        let _ = slow.read_to_end(&mut out);
        assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 408 "));
        assert!(t.elapsed() < limits.timeout * 2, "{:?}", t.elapsed());
    }

    #[test]
    fn clients_beyond_the_limit_get_503_and_the_drop_ends_the_rest() {
        let limits = Limits {
            connections: 2,
            timeout: Duration::from_secs(30),
            ..Limits::default()
        };
        let server = MetricsServer::start_with(local(), snapshot, limits).unwrap();
        let addr = server.local_addr();
        let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        // Both are taken by the server before the next one comes.
        std::thread::sleep(Duration::from_millis(200));
        let mut third = TcpStream::connect(addr).unwrap();
        third
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut out = Vec::new();
        third.read_to_end(&mut out).unwrap();
        let r = String::from_utf8(out).unwrap();
        assert!(r.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{r}");
        // Dropping the server does not wait for the two silent clients'
        // 30 s: their threads see the stop within a slice.
        let t = Instant::now();
        drop(server);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        for mut c in held {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut out = Vec::new();
            assert_eq!(c.read_to_end(&mut out).unwrap_or(0), 0);
        }
        assert!(TcpStream::connect(addr).is_err(), "still listening");
    }
}
