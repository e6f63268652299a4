//! Scenarios run on the simulator: endpoints, QPs and traffic set up on a
//! [`Simulator`](super::Simulator), driven to the end, and every byte and
//! completion verified. They sit inside `sim` because they are made of its
//! models (nodes, links, the switch) and nothing else, while the models
//! know nothing of them; the folder keeps the two apart.
//!
//! - [`run_workload`]: verified traffic between two endpoints over a lossy
//!   link (`roce-xdp sim` and the simulation tests);
//! - [`run_incast`]: verified WRITE streams from several senders through a
//!   congested switch queue, the DCQCN scenario (`roce-xdp sim` with
//!   `--senders`, `--bottleneck-gbps`, `--ce` or `--dcqcn`).
//!
//! Each runs in three steps: setup (a struct holding the scenario's
//! state), drive (the loop that posts, moves frames and polls), verify
//! (the checks left for the end, and the report).

mod incast;
mod workload;

pub use self::incast::{
    jain_index, run as run_incast, FlowReport, IncastConfig, IncastReport, TraceSample,
};
pub use self::workload::{run as run_workload, Op, WorkloadConfig, WorkloadReport};
