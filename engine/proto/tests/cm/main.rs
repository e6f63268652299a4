//! The Communication Manager: the MAD codec byte by byte, the IP CM
//! header, and the agent driven MAD by MAD (every transition, lost,
//! duplicated and reordered MADs, REJ, MRA, timeouts, timewait, caps,
//! garbage), then many connections over a seeded lossy channel.

mod support;

mod codec;
mod demux;
mod disconnect;
mod failures;
mod flood;
mod garbage;
mod handshake;
mod ip;
mod sidr;
mod simulation;
mod tshark;
