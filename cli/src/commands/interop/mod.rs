//! `roce-xdp interop ...`: the helpers of the interoperability tests
//! (`interop/run.sh`) against rdma-core's tools and `interop/peer/rdma_target`
//! on Linux Soft-RoCE (rxe). Not user commands: each one is the engine's
//! side of one exchange that a libibverbs program on the other end speaks.

mod rdma_client;
mod rdma_target;

use clap::Subcommand;

/// The interoperability helpers.
#[derive(Debug, Subcommand)]
pub enum InteropCommand {
    /// RDMA WRITE/READ against interop/peer/rdma_target on a libibverbs device (rxe).
    RdmaClient(rdma_client::RdmaClientArgs),
    /// Be the target of RDMA WRITE/READ from interop/peer/rdma_target -c (rxe).
    RdmaTarget(rdma_target::RdmaTargetArgs),
}

/// Runs an interoperability helper.
pub fn run(command: InteropCommand) -> anyhow::Result<()> {
    match command {
        InteropCommand::RdmaClient(a) => rdma_client::run(a),
        InteropCommand::RdmaTarget(a) => rdma_target::run(a),
    }
}
