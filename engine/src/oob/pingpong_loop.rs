//! The ping-pong schedule of `ibv_rc_pingpong`, sans-IO.
//!
//! Both sides post `rx_depth` receives up front. The client posts the first
//! SEND right after connecting. From then on, each side posts its next SEND
//! only once both its previous SEND and the matching RECV have completed, so
//! exactly one message is in flight per direction and the two sides
//! alternate: client SEND -> server RECV -> server SEND -> client RECV -> ...
//! Each side sends `iters` messages and receives `iters` messages. When the
//! outstanding receives drop to one or fewer, the side tops them back up to
//! `rx_depth` (read from `parse_single_wc` in rc_pingpong.c).
//!
//! The caller owns the QP: it posts what the returned [`Actions`] ask for and
//! feeds every successful completion back. A failed completion ends the run
//! (rc_pingpong prints `Failed status ...` and exits 1).

/// Which side of the exchange this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Has the server's address; posts the first SEND.
    Client,
    /// Listens; answers each RECV with a SEND.
    Server,
}

/// Which work request completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// A SEND completed (the peer acknowledged it).
    Send,
    /// A RECV completed (a message arrived).
    Recv,
}

/// What the caller must post next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Actions {
    /// Receives to post (each a buffer of the message size).
    pub post_recvs: u32,
    /// Whether to post one SEND of the message size.
    pub post_send: bool,
}

/// Why the schedule cannot continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingPongError {
    /// A completion arrived that the schedule did not ask for (e.g. a second
    /// SEND completion with no SEND outstanding).
    Unexpected(Completion),
    /// Receives ran out: a RECV completed with no receive outstanding.
    NoReceivePosted,
}

const PENDING_RECV: u8 = 1;
const PENDING_SEND: u8 = 2;

/// The `ibv_rc_pingpong` schedule for one side.
#[derive(Debug, Clone)]
pub struct PingPong {
    iters: u32,
    rx_depth: u32,
    /// Receives posted and not yet completed (`routs`).
    posted_recvs: u32,
    sends_done: u32,
    recvs_done: u32,
    /// Bit set of PENDING_RECV / PENDING_SEND (`ctx->pending`).
    pending: u8,
}

impl PingPong {
    /// A schedule for `iters` exchanges with `rx_depth` receives kept posted.
    /// `rx_depth` is at least 1.
    pub fn new(iters: u32, rx_depth: u32) -> PingPong {
        PingPong {
            iters,
            rx_depth: rx_depth.max(1),
            posted_recvs: 0,
            sends_done: 0,
            recvs_done: 0,
            pending: 0,
        }
    }

    /// What to post before the QP is connected: `rx_depth` receives.
    pub fn initial_actions(&mut self) -> Actions {
        self.posted_recvs = self.rx_depth;
        Actions {
            post_recvs: self.rx_depth,
            post_send: false,
        }
    }

    /// What to post once connected: the client posts the first SEND, the
    /// server waits for a RECV. Call once, after [`Self::initial_actions`].
    pub fn start(&mut self, role: Role) -> Actions {
        self.pending = PENDING_RECV;
        let post_send = role == Role::Client && self.iters > 0;
        if post_send {
            self.pending |= PENDING_SEND;
        }
        Actions {
            post_recvs: 0,
            post_send,
        }
    }

    /// Feed one successful completion; returns what to post next.
    pub fn on_completion(&mut self, completion: Completion) -> Result<Actions, PingPongError> {
        let mut actions = Actions::default();
        match completion {
            Completion::Send => {
                if self.pending & PENDING_SEND == 0 {
                    return Err(PingPongError::Unexpected(completion));
                }
                self.sends_done += 1;
                self.pending &= !PENDING_SEND;
            }
            Completion::Recv => {
                if self.posted_recvs == 0 {
                    return Err(PingPongError::NoReceivePosted);
                }
                self.posted_recvs -= 1;
                if self.posted_recvs <= 1 {
                    actions.post_recvs = self.rx_depth - self.posted_recvs;
                    self.posted_recvs = self.rx_depth;
                }
                self.recvs_done += 1;
                self.pending &= !PENDING_RECV;
            }
        }
        if self.sends_done < self.iters && self.pending == 0 {
            actions.post_send = true;
            self.pending = PENDING_RECV | PENDING_SEND;
        }
        Ok(actions)
    }

    /// True once `iters` SENDs and `iters` RECVs have completed.
    pub fn is_finished(&self) -> bool {
        self.sends_done >= self.iters && self.recvs_done >= self.iters
    }

    /// SENDs completed so far.
    pub fn sends_done(&self) -> u32 {
        self.sends_done
    }

    /// RECVs completed so far.
    pub fn recvs_done(&self) -> u32 {
        self.recvs_done
    }

    /// Receives currently posted and not completed.
    pub fn posted_recvs(&self) -> u32 {
        self.posted_recvs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a client and a server schedule against each other over a
    /// lossless in-order "wire" and returns the order of deliveries.
    fn run_pair(iters: u32, rx_depth: u32) -> (PingPong, PingPong, Vec<Role>) {
        let mut client = PingPong::new(iters, rx_depth);
        let mut server = PingPong::new(iters, rx_depth);
        assert_eq!(client.initial_actions().post_recvs, rx_depth.max(1));
        server.initial_actions();
        assert!(!server.start(Role::Server).post_send);
        let mut in_flight: Vec<Role> = Vec::new(); // sender of each message
        if client.start(Role::Client).post_send {
            in_flight.push(Role::Client);
        }
        let mut order = Vec::new();
        while let Some(sender) = in_flight.pop() {
            order.push(sender);
            // The receiver gets a RECV, the sender a SEND completion (ACK).
            let (rx, tx) = match sender {
                Role::Client => (&mut server, &mut client),
                Role::Server => (&mut client, &mut server),
            };
            let a = rx.on_completion(Completion::Recv).unwrap();
            if a.post_send {
                in_flight.push(if sender == Role::Client {
                    Role::Server
                } else {
                    Role::Client
                });
            }
            let b = tx.on_completion(Completion::Send).unwrap();
            if b.post_send {
                in_flight.push(sender);
            }
            assert!(in_flight.len() <= 1, "one message in flight at a time");
        }
        (client, server, order)
    }

    #[test]
    fn alternates_and_finishes() {
        let (client, server, order) = run_pair(5, 500);
        assert!(client.is_finished() && server.is_finished());
        assert_eq!((client.sends_done(), client.recvs_done()), (5, 5));
        assert_eq!((server.sends_done(), server.recvs_done()), (5, 5));
        let expected: Vec<Role> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    Role::Client
                } else {
                    Role::Server
                }
            })
            .collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn client_waits_for_both_send_and_recv() {
        let mut c = PingPong::new(3, 10);
        c.initial_actions();
        assert!(c.start(Role::Client).post_send);
        // The reply arrives before the ACK of our SEND: no new SEND yet.
        assert!(!c.on_completion(Completion::Recv).unwrap().post_send);
        assert!(c.on_completion(Completion::Send).unwrap().post_send);
    }

    #[test]
    fn reposts_receives_when_down_to_one() {
        let (client, server, _) = run_pair(10, 3);
        assert!(client.is_finished() && server.is_finished());
        let mut s = PingPong::new(10, 3);
        s.initial_actions();
        s.start(Role::Server);
        assert_eq!(s.on_completion(Completion::Recv).unwrap().post_recvs, 0);
        s.on_completion(Completion::Send).unwrap();
        // Second RECV leaves one posted: top back up to 3.
        assert_eq!(s.on_completion(Completion::Recv).unwrap().post_recvs, 2);
        assert_eq!(s.posted_recvs(), 3);
    }

    #[test]
    fn unexpected_completions_are_errors() {
        let mut s = PingPong::new(1, 1);
        s.initial_actions();
        s.start(Role::Server);
        assert_eq!(
            s.on_completion(Completion::Send),
            Err(PingPongError::Unexpected(Completion::Send))
        );
        let mut none = PingPong::new(1, 1);
        none.start(Role::Server);
        assert_eq!(
            none.on_completion(Completion::Recv),
            Err(PingPongError::NoReceivePosted)
        );
    }

    #[test]
    fn server_stops_sending_after_iters() {
        let mut s = PingPong::new(2, 500);
        s.initial_actions();
        s.start(Role::Server);
        for _ in 0..2 {
            assert!(s.on_completion(Completion::Recv).unwrap().post_send);
            s.on_completion(Completion::Send).unwrap();
        }
        assert!(s.is_finished());
    }
}
