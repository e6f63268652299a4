//! The baselines the engine is compared with, each measured over the same
//! veth pair as the engine: the kernel's UDP path ([`kernel_udp`]) and the
//! bare AF_XDP floor ([`floor`]).

pub mod floor;
pub mod kernel_udp;
