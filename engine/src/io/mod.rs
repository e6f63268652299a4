//! AF_XDP datapath: UMEM, fill/completion/RX/TX rings, batching,
//! need_wakeup, copy and zero-copy binding, multi-buffer frames; the
//! ethtool requests of queue coverage ([`ethtool`]); and the rtnetlink
//! reads of interface facts and neighbours ([`netlink`]).
//!
//! This is the only module of the engine that uses `unsafe` (system calls,
//! shared-memory rings, the UMEM, the SIMD one-pass copy + CRC of
//! [`copy_crc`], the prefetch hint of [`prefetch`], and the huge-page
//! mappings of the global allocator [`HugePageAlloc`]); each unsafe item carries a `# Safety` note and each
//! unsafe block a `SAFETY:` comment. Everything it exports is safe to use.

pub mod copy_crc;
mod cpu;
pub mod ethtool;
pub mod fd_passing;
pub mod frame_ring;
mod huge_alloc;
pub mod netlink;
mod port;
mod prefetch;
mod ring;
mod socket;
mod sys;
mod threads;
mod umem;
mod waker;

pub mod region;
pub mod udp;

pub use cpu::{process_cpu_time, thread_cpu_time, CpuSet};
pub use huge_alloc::{HugePageAlloc, HUGE_ALLOC_MIN};
pub use port::FramePort;
pub use prefetch::{prefetch, prefetch_range};
pub use region::{RegisteredRegion, SharedRegion};
pub use socket::{
    InPlace, Lookahead, Rx, XskConfig, XskCounters, XskError, XskSocket, XskStatistics, ZeroCopy,
    DEFAULT_BUSY_WAIT, MAX_PACKET,
};
pub use sys::{
    if_index, int_sockopt, set_thread_netns, wait_readable_any, wait_readable_many, MAX_WAIT_FDS,
};
pub use threads::spawn_without_signals;
pub use umem::{FrameAccounting, Umem, UmemConfig};
pub use waker::Waker;
