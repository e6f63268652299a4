//! Opening the datapath for a tool or `serve`: preflight checks, queue
//! coverage ([`Steering`], `docs/queue-coverage.md`), the verbs [`Device`],
//! the stats channel and, with `--pcap`, the capture writer. Closing it
//! stops the engines, detaches XDP, removes the steering and finishes the
//! pcap file.

use std::net::IpAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context as _;
use engine::driver::CaptureSink;
use engine::driver::PollMode;
use engine::driver::QueueStats;
use engine::driver::{capture_channel, PcapWriter};
use engine::nic::{QueueOption, Steering, SteeringStatus};
use engine::stats::{CaptureHub, Snapshot, StatsServer};
use engine::verbs::{Device, DeviceConfig};

use super::args::EngineArgs;
use super::preflight;
use super::steering::steer;

/// What to open.
#[derive(Debug, Clone)]
pub struct DatapathOpts {
    pub iface: String,
    /// Queues 0..queues.
    pub queues: u32,
    pub cores: Vec<usize>,
    /// Attach mode, zero-copy, --force, busy polling, --pcap.
    pub engine: EngineArgs,
    pub pmtu: u32,
    pub ipv6: bool,
    pub local_ip: Option<IpAddr>,
    /// How the command names its queues (for the coverage message).
    pub queue_option: QueueOption,
}

/// An open datapath.
pub struct Datapath {
    pub dev: Arc<Device>,
    pub iface: String,
    pub cores: Vec<usize>,
    pub started: Instant,
    stats: Option<StatsServer>,
    capture: Option<JoinHandle<std::io::Result<u64>>>,
    /// The `--pcap` sink (for its dropped-frame count).
    pcap_sink: Option<CaptureSink>,
    /// Queue coverage: removed after the engines stop.
    steering: Option<Steering>,
}

/// What [`Datapath::close`] reports.
#[derive(Debug)]
pub struct Closed {
    /// The last per-queue snapshot, taken just before the engines stopped.
    pub snapshot: Snapshot,
    /// The final totals over queues.
    pub totals: QueueStats,
    /// With `--pcap`: frames written and frames dropped.
    pub pcap: Option<(u64, u64)>,
}

/// The snapshot of `dev`'s queues and steering, taken at each call.
fn snapshot_source(
    dev: Arc<Device>,
    iface: &str,
    cores: &[usize],
    started: Instant,
    steering: Option<SteeringStatus>,
) -> impl Fn() -> Snapshot + Send + Sync + 'static {
    let (iface, cores) = (iface.to_string(), cores.to_vec());
    move || {
        let mut s = super::snapshot::of_device(&dev, &iface, &cores, started);
        s.steering = steering.clone();
        s
    }
}

/// Frames buffered between the engines and the pcap writer.
const CAPTURE_QUEUE: usize = 65536;

impl Datapath {
    /// Checks, opens, and starts the stats channel (and capture).
    pub fn open(o: &DatapathOpts, what: &str) -> anyhow::Result<Datapath> {
        // Attached to the interface's service, the service owns the
        // queues, their coverage and the stats channel (which lists this
        // process).
        let attached = engine::attach::attach_as(o.engine.attach.share.into(), &o.iface)
            .with_context(|| format!("attaching to the roce-xdp service of {}", o.iface))?;
        let steering = match attached {
            Some(_) => None,
            None => {
                let queues: Vec<u32> = (0..o.queues.max(1)).collect();
                preflight::check(&preflight::Plan {
                    what: what.to_string(),
                    iface: &o.iface,
                    queues: &queues,
                    pmtu: o.pmtu,
                    ipv6: o.ipv6,
                    force: o.engine.attach.force,
                })?;
                Some(steer(
                    &o.iface,
                    o.queues.max(1),
                    o.engine.attach.steer,
                    o.engine.attach.force,
                    o.ipv6,
                    o.queue_option,
                )?)
            }
        };
        let status = steering.as_ref().map(|s| s.status().clone());
        let mut cfg = DeviceConfig::new(&o.iface);
        cfg.queues = o.queues.max(1);
        cfg.cores = o.cores.clone();
        cfg.attach = o.engine.attach.mode.into();
        cfg.force = o.engine.attach.force;
        cfg.zero_copy = o.engine.attach.zero_copy.into();
        if o.engine.busy_poll {
            cfg.poll = PollMode::Busy;
        }
        cfg.ipv6 = o.ipv6;
        cfg.local_ip = o.local_ip;
        // PMTU 4096 frames exceed one 4 KiB UMEM frame: multi-buffer.
        cfg.multi_buffer = true;
        let mut capture = None;
        let mut pcap_sink = None;
        let mut hub = None;
        if let Some(path) = &o.engine.pcap {
            let (sink, rx) = capture_channel(CAPTURE_QUEUE);
            let mut w = PcapWriter::create(path)
                .with_context(|| format!("creating the capture file {}", path.display()))?;
            cfg.capture = Some(sink.clone());
            pcap_sink = Some(sink);
            capture = Some(std::thread::spawn(move || {
                let mut n = 0u64;
                // Ends when every sink (engine thread) is gone.
                while let Ok(f) = rx.recv() {
                    w.write(&f)?;
                    n += 1;
                }
                w.finish()?;
                Ok(n)
            }));
        } else {
            // On-demand capture (`roce-xdp capture`): paused until a
            // client asks through the stats channel.
            let (sink, frames) = capture_channel(CAPTURE_QUEUE);
            sink.set_enabled(false);
            cfg.capture = Some(sink.clone());
            hub = Some(CaptureHub { sink, frames });
        }
        // A queue a previous run just closed is waited for by the socket layer
        // (`XskConfig::busy_wait`).
        let is_attached = attached.is_some();
        let dev = Arc::new(Device::open_with(cfg, attached)?);
        tracing::info!(iface = %o.iface, mode = %dev.xdp_mode(), queues = dev.queues(), "datapath open");
        let started = Instant::now();
        let stats = if is_attached {
            None
        } else {
            let source = snapshot_source(dev.clone(), &o.iface, &o.cores, started, status);
            let server = match hub {
                Some(h) => StatsServer::start_with_capture(&o.iface, source, h),
                None => StatsServer::start(&o.iface, source),
            };
            match server {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!("stats channel unavailable: {e}");
                    None
                }
            }
        };
        Ok(Datapath {
            dev,
            iface: o.iface.clone(),
            cores: o.cores.clone(),
            started,
            stats,
            capture,
            pcap_sink,
            steering,
        })
    }

    /// The snapshot of [`Datapath::snapshot`] as a function another server
    /// can call (`serve --metrics`): what the stats channel serves when
    /// this process owns the interface; attached to a service, this
    /// device's own view (the service's channel serves the interface's).
    /// It holds the device: drop whatever holds it before [`Datapath::close`].
    pub fn snapshot_source(&self) -> impl Fn() -> Snapshot + Send + Sync + 'static {
        snapshot_source(
            self.dev.clone(),
            &self.iface,
            &self.cores,
            self.started,
            self.steering.as_ref().map(|st| st.status().clone()),
        )
    }

    /// A snapshot of the counters now.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = super::snapshot::of_device(&self.dev, &self.iface, &self.cores, self.started);
        s.steering = self.steering.as_ref().map(|st| st.status().clone());
        s
    }

    /// Stops the stats channel and the engines, detaches XDP and finishes
    /// the capture.
    pub fn close(mut self) -> anyhow::Result<Closed> {
        self.stats.take();
        let snap = self.snapshot();
        let dev = Arc::try_unwrap(self.dev)
            .map_err(|_| anyhow::anyhow!("the device is still in use by a session thread"))?;
        let totals = dev.close();
        if let Some(st) = self.steering.take() {
            if let Err(e) = st.remove() {
                eprintln!("roce-xdp: warning: {e}");
            }
        }
        let dropped = self.pcap_sink.take().map(|s| s.dropped()).unwrap_or(0);
        let frames = match self.capture.take() {
            Some(h) => Some((
                h.join()
                    .map_err(|_| anyhow::anyhow!("the capture writer panicked"))?
                    .context("writing the capture file")?,
                dropped,
            )),
            None => None,
        };
        Ok(Closed {
            snapshot: snap,
            totals,
            pcap: frames,
        })
    }
}
