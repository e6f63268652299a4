//! The TCP side of the connection exchange (engine::oob::perftest): line
//! reads with a length limit and a deadline, a non-blocking line poll for
//! use between completion polls, and connect/accept with errors a user can
//! act on.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use engine::oob::perftest::{Control, Hello, MAX_LINE};

use crate::errors::{classify_connect, UserError};

/// A line-oriented connection to the peer.
#[derive(Debug)]
pub struct LineConn {
    stream: TcpStream,
    buf: Vec<u8>,
    peer: String,
}

impl LineConn {
    pub fn new(stream: TcpStream) -> LineConn {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "peer".into());
        let _ = stream.set_nodelay(true);
        LineConn {
            stream,
            buf: Vec::new(),
            peer,
        }
    }

    /// The peer's address, for messages.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Connects to `host:port` within `timeout`.
    pub fn connect(
        host: &str,
        port: u16,
        timeout: Duration,
        tool: &str,
    ) -> anyhow::Result<LineConn> {
        let text = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let addrs: Vec<SocketAddr> = text
            .to_socket_addrs()
            .map_err(|e| UserError::PeerUnreachable {
                addr: text.clone(),
                detail: format!("cannot resolve: {e}"),
            })?
            .collect();
        let mut last = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => return Ok(LineConn::new(s)),
                Err(e) => last = Some(e),
            }
        }
        Err(classify_connect(
            last.unwrap_or_else(|| io::ErrorKind::AddrNotAvailable.into()),
            &text,
            tool,
        ))
    }

    /// Takes a complete line out of the buffer, if there is one.
    fn take_line(&mut self) -> anyhow::Result<Option<String>> {
        if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            return Ok(Some(String::from_utf8_lossy(&line).trim_end().to_string()));
        }
        if self.buf.len() > MAX_LINE {
            bail!(
                "{} sent a line longer than {MAX_LINE} bytes: not a roce-xdp peer?",
                self.peer
            );
        }
        Ok(None)
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 1024];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    /// Reads one line, waiting at most `timeout`.
    pub fn read_line(&mut self, timeout: Duration) -> anyhow::Result<String> {
        let deadline = Instant::now() + timeout;
        self.stream.set_nonblocking(false)?;
        loop {
            if let Some(l) = self.take_line()? {
                return Ok(l);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "{} did not answer within {:.0} s",
                    self.peer,
                    timeout.as_secs_f64()
                );
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.fill() {
                Ok(0) => bail!("{} closed the connection", self.peer),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e).with_context(|| format!("reading from {}", self.peer)),
            }
        }
    }

    /// Returns a line if one has arrived, without waiting. A closed
    /// connection is an error.
    pub fn poll_line(&mut self) -> anyhow::Result<Option<String>> {
        if let Some(l) = self.take_line()? {
            return Ok(Some(l));
        }
        self.stream.set_nonblocking(true)?;
        let r = self.fill();
        self.stream.set_nonblocking(false)?;
        match r {
            Ok(0) => bail!("{} closed the connection", self.peer),
            Ok(_) => self.take_line(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading from {}", self.peer)),
        }
    }

    /// Sends a line (with its newline).
    pub fn send(&mut self, line: &str) -> anyhow::Result<()> {
        self.stream
            .write_all(line.as_bytes())
            .with_context(|| format!("writing to {}", self.peer))
    }

    pub fn send_hello(&mut self, h: &Hello) -> anyhow::Result<()> {
        self.send(&h.encode())
    }

    pub fn read_hello(&mut self, timeout: Duration) -> anyhow::Result<Hello> {
        let l = self.read_line(timeout)?;
        if let Some(e) = l.strip_prefix("ERROR ") {
            // The server explains a mismatch the user can fix (other test,
            // sizes too large for its region).
            return Err(
                UserError::Usage(format!("{} refused the connection: {e}", self.peer)).into(),
            );
        }
        Ok(Hello::decode(&l)?)
    }

    pub fn send_control(&mut self, c: &Control) -> anyhow::Result<()> {
        self.send(&c.encode())
    }

    pub fn read_control(&mut self, timeout: Duration) -> anyhow::Result<Control> {
        let l = self.read_line(timeout)?;
        match Control::decode(&l)? {
            Control::Error(e) => bail!("{}: {e}", self.peer),
            c => Ok(c),
        }
    }
}

/// Listens on `port` on every address (IPv6 and IPv4 when possible).
pub fn listen(port: u16) -> anyhow::Result<TcpListener> {
    let l = TcpListener::bind(("::", port)).or_else(|_| TcpListener::bind(("0.0.0.0", port)));
    l.map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            UserError::Usage(format!(
                "TCP port {port} is already in use (another roce-xdp server?): stop it or pick another with -p"
            ))
            .into()
        } else {
            anyhow::Error::new(e).context(format!("listening on TCP port {port}"))
        }
    })
}
