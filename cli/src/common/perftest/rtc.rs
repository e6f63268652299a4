//! How the latency tools (`send-lat`, `write-lat`, `read-lat`,
//! `atomic-lat`) run their measurement loop: run-to-completion by default,
//! as perftest's latency tools busy-poll their CQ in the thread that
//! posts, or through the engine threads with `--threaded`.
//!
//! Run-to-completion here is [`Device::run_to_completion`]: for one size,
//! the thread of the loop takes its queue's engine from the engine thread
//! and every poll of the queue's completions runs one engine iteration on
//! that thread (no thread hop, no wake-up on a round trip). Between sizes
//! (the TCP exchange) the engine thread has the queue back, so ACKs and
//! retransmissions are served while nobody polls. In `serve`, a latency
//! session drives its queue the same way while it runs a size, and routes
//! the completions of the other sessions on that queue to them
//! ([`set_router`]); a second latency session on a queue another one
//! drives already runs through the engine thread.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use engine::rc::WorkCompletion;
use engine::verbs::{Device, DrivenQueue};

use super::kind::Kind;

/// `--threaded`: latency loops go through the engine threads.
static THREADED: AtomicBool = AtomicBool::new(false);

/// Where the completions of a queue a `serve` session drives go (the
/// session owning each QP), per queue.
type Router = Arc<dyn Fn(&WorkCompletion) + Send + Sync>;
static ROUTERS: Mutex<Vec<Option<Router>>> = Mutex::new(Vec::new());

/// Checks the tool's mode options and records them for the loops:
/// `--threaded` only means something for a latency tool, and
/// run-to-completion drives one queue. The error is a usage message.
pub fn configure(kind: Kind, threaded: bool, queues: u32) -> Result<(), String> {
    if threaded && !kind.is_latency() {
        return Err(format!(
            "--threaded: {} has no threaded path of its own (the bandwidth tools always run through the engine threads); drop --threaded, or use a latency tool (send-lat, write-lat, read-lat, atomic-lat)",
            kind.name()
        ));
    }
    if kind.is_latency() && !threaded && queues > 1 {
        return Err(format!(
            "{}: run-to-completion (the default of the latency tools) drives one queue, not {queues}: use --queues 0 (one queue), or add --threaded to run through the engine threads of every queue",
            kind.name()
        ));
    }
    THREADED.store(threaded, Ordering::Relaxed);
    Ok(())
}

/// Whether latency loops run through the engine threads (`--threaded`).
pub fn threaded() -> bool {
    THREADED.load(Ordering::Relaxed)
}

/// Makes the completions of queue `q` that a `serve` session's loop takes
/// while it drives the queue go through `route` (to the session owning
/// each QP); `None` removes it.
pub fn set_router(q: u32, route: Option<Router>) {
    let mut r = ROUTERS.lock().unwrap_or_else(|e| e.into_inner());
    if r.len() <= q as usize {
        r.resize(q as usize + 1, None);
    }
    r[q as usize] = route;
}

fn router(q: u32) -> Option<Router> {
    let r = ROUTERS.lock().unwrap_or_else(|e| e.into_inner());
    r.get(q as usize).cloned().flatten()
}

/// What this thread drives, for [`pump`]: the device, the queue, and where
/// its completions go.
struct Pump {
    dev: Arc<Device>,
    q: u32,
    route: Router,
    wcs: [WorkCompletion; 64],
}

thread_local! {
    static PUMP: RefCell<Option<Pump>> = const { RefCell::new(None) };
}

/// The queue a latency loop drives for one size (dropped: the engine
/// thread has it back).
pub struct Claim {
    pumping: bool,
    _driven: DrivenQueue,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.pumping {
            PUMP.with(|p| p.borrow_mut().take());
        }
    }
}

/// For a latency test in run-to-completion mode: the calling thread takes
/// queue `q`'s engine for as long as the returned [`Claim`] lives (then
/// its polls of queue `q` drive the engine). `None` for other tests, with
/// `--threaded`, or when another thread drives the queue already (then the
/// engine thread, or that thread, serves it).
pub fn claim(kind: Kind, dev: &Arc<Device>, q: u32) -> Option<Claim> {
    if !kind.is_latency() || threaded() {
        return None;
    }
    let driven = dev.run_to_completion(q).ok()?;
    // A WRITE ping-pong answers what lands in memory: the ACK of the
    // peer's WRITE leaves with our WRITE, in one kick.
    driven.hold_acks(kind == Kind::WriteLat);
    let pumping = match router(q) {
        Some(route) => {
            PUMP.with(|p| {
                *p.borrow_mut() = Some(Pump {
                    dev: dev.clone(),
                    q,
                    route,
                    wcs: [WorkCompletion::default(); 64],
                })
            });
            true
        }
        None => false,
    };
    Some(Claim {
        pumping,
        _driven: driven,
    })
}

/// In a `serve` session that drives its queue: one engine iteration, and
/// every completion it took routed to the session owning its QP (this
/// one's included, through its own channel). Nothing otherwise.
pub fn pump() {
    PUMP.with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            let n = p.dev.poll_cq(p.q, &mut p.wcs);
            for wc in &p.wcs[..n] {
                (p.route)(wc);
            }
        }
    });
}
