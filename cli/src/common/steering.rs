//! Queue coverage from the command line (`docs/queue-coverage.md`): the
//! `--steer` value and the calls that install steering, or refuse, before a
//! command opens the datapath.

use clap::ValueEnum;
use engine::nic::{QueueOption, SteerMode, SteerRequest, Steering};

/// `--steer`: how RoCE reaches the served queues when the interface has
/// more RX queues (`docs/queue-coverage.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum SteerArg {
    /// ntuple rules (into an RSS context over the served queues) where
    /// the NIC has them; refuse to start where it does not (unless --force).
    #[default]
    Auto,
    /// As auto, but failing to install them is an error even with --force.
    Ntuple,
    /// Install nothing; refuse to start with uncovered queues (unless --force).
    Off,
}

impl From<SteerArg> for SteerMode {
    fn from(s: SteerArg) -> SteerMode {
        match s {
            SteerArg::Auto => SteerMode::Auto,
            SteerArg::Ntuple => SteerMode::Ntuple,
            SteerArg::Off => SteerMode::Off,
        }
    }
}

fn steer_request(
    iface: &str,
    served: u32,
    mode: SteerArg,
    force: bool,
    ipv6: bool,
    queue_option: QueueOption,
) -> SteerRequest {
    SteerRequest {
        mode: mode.into(),
        force,
        ipv6,
        queue_option,
        ..SteerRequest::new(iface, served)
    }
}

/// Settles queue coverage for queues `0..served` of `iface` (in this
/// thread's network namespace): installs steering or refuses
/// ([`engine::nic::SteerError::Uncovered`], exit status 2). Prints what a
/// crashed run left and was removed, and the warning of `--force`.
pub fn steer(
    iface: &str,
    served: u32,
    mode: SteerArg,
    force: bool,
    ipv6: bool,
    queue_option: QueueOption,
) -> anyhow::Result<Steering> {
    let req = steer_request(iface, served, mode, force, ipv6, queue_option);
    let s = Steering::establish_on_nic(&req)?;
    for n in s.notes() {
        eprintln!("roce-xdp: warning: {n}");
    }
    tracing::info!(iface, steering = %s.status().summary(), "queue coverage");
    Ok(s)
}

/// What [`steer`] would refuse, without installing anything (a one-shot
/// server checks before it waits for its client).
pub fn check_steer(
    iface: &str,
    served: u32,
    mode: SteerArg,
    force: bool,
    queue_option: QueueOption,
) -> anyhow::Result<()> {
    Steering::check_on_nic(&steer_request(
        iface,
        served,
        mode,
        force,
        false,
        queue_option,
    ))?;
    Ok(())
}
