//! Where in its registered regions an engine stream puts each message, and
//! how many it keeps in flight.
//!
//! The layout decides the stream's memory working set, and with it how much
//! of each copy the CPU caches serve, so it is part of what a goodput
//! figure means. [`SourceLayout::Perftest`] is the one the sweep and the
//! targets use: the same as perftest's `ib_write_bw` / `ib_read_bw` /
//! `ib_send_bw`, which a user compares these figures with on RDMA NICs.
//! [`SourceLayout::Spread`] gives every message in flight a range of its
//! own (the harness's layout before it matched perftest), a working set of
//! about [`window`] x size per side: the paired step
//! measures it once at 64 KiB, for information, to show what a working set
//! beyond the L2 cache costs.

/// How a stream addresses its messages (the local and the remote range
/// get the same offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceLayout {
    /// As perftest (`increase_loc_addr` / `increase_rem_addr` in its
    /// `run_iter_bw`): messages up to half a page step through one 4 KiB
    /// page in cache-line-rounded steps; larger messages all use the
    /// buffer at offset 0.
    #[default]
    Perftest,
    /// Message k of a stream with `window` in flight uses slot
    /// `k mod slots`, `slots = min(region / size, window)`: every message
    /// in flight has its own range.
    Spread,
}

/// Bytes a stream keeps in flight per QP (messages of at least this size:
/// 4 in flight).
pub const BYTES_IN_FLIGHT: u64 = 2 << 20;
/// Most messages a stream keeps in flight per QP.
pub const MAX_WINDOW: u64 = 512;

/// Messages in flight per QP for `size`-byte messages: the engine's
/// streams keep this many posted, and the baselines lay out their
/// payloads for the same window.
pub fn window(size: u64) -> u64 {
    (BYTES_IN_FLIGHT / size.max(1)).clamp(4, MAX_WINDOW)
}

/// Size of each side's registered region per QP in the engine's streams,
/// and of the region the baselines' senders take their payloads from.
pub const REGION: u64 = 4 << 20;

/// The bytes the streams' source regions hold (byte i = i * 31 mod 251:
/// not constant, so a misplaced copy shows).
pub fn region_pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

/// perftest's cycle buffer: one page.
const CYCLE_BUFFER: u64 = 4096;
/// perftest rounds each step up to the cache line.
const CACHE_LINE: u64 = 64;

impl SourceLayout {
    /// Offset of message `k` (counted from 0) of `size` bytes in a stream
    /// keeping `window` messages in flight in regions of `region` bytes.
    pub fn offset(self, size: u64, k: u64, window: u64, region: u64) -> u64 {
        match self {
            SourceLayout::Perftest => {
                if size == 0 || size > CYCLE_BUFFER / 2 {
                    return 0;
                }
                let step = size.div_ceil(CACHE_LINE) * CACHE_LINE;
                (k % (CYCLE_BUFFER / step)) * step
            }
            SourceLayout::Spread => {
                let slots = (region / size.max(1)).clamp(1, window.max(1));
                (k % slots) * size
            }
        }
    }

    /// For reports: how the layout places messages.
    pub fn describe(self) -> &'static str {
        match self {
            SourceLayout::Perftest => {
                "as perftest's ib_write_bw: messages up to 2 KiB step through one 4 KiB page, larger ones all use the same buffer"
            }
            SourceLayout::Spread => "every message in flight in a range of its own",
        }
    }
}

/// Where each packet of a stream of `size`-byte messages, cut into
/// packets of at most `chunk` payload bytes, takes its payload from: the
/// message's range as the layout places it, then `chunk` bytes further per
/// packet. The baselines' senders read their payloads this way, so they
/// move the same bytes from the same places as the engine's stream, and a
/// ratio engine / baseline counts the protocol's work, not a smaller
/// working set (a 64 KiB message is read from 64 KiB of memory, not from
/// one frame sent over and over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketSource {
    layout: SourceLayout,
    size: u64,
    chunk: u64,
    window: u64,
    region: u64,
}

impl PacketSource {
    /// `size`-byte messages (at least 1) in `chunk`-byte packets (at least
    /// 1), `window` messages in flight, placed in a `region`-byte region.
    pub fn new(layout: SourceLayout, size: u64, chunk: u64, window: u64, region: u64) -> Self {
        PacketSource {
            layout,
            size: size.max(1),
            chunk: chunk.max(1),
            window,
            region,
        }
    }

    /// Packets each message is cut into.
    pub fn packets_per_message(&self) -> u64 {
        self.size.div_ceil(self.chunk)
    }

    /// The region bytes the messages use: at least `region`, and at least
    /// one message.
    pub fn region_len(&self) -> usize {
        self.region.max(self.size) as usize
    }

    /// (offset, length) of the payload of packet `p` (counted from 0 over
    /// the whole stream) in the region.
    pub fn packet(&self, p: u64) -> (usize, usize) {
        let per = self.packets_per_message();
        let (k, j) = (p / per, p % per);
        let start = j * self.chunk;
        let len = self.chunk.min(self.size - start);
        let at = self.layout.offset(self.size, k, self.window, self.region) + start;
        (at as usize, len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_small_messages_cycle_through_one_page_in_cache_line_steps() {
        let offs: Vec<u64> = (0..70)
            .map(|k| SourceLayout::Perftest.offset(64, k, 512, REGION))
            .collect();
        assert_eq!(offs[0], 0);
        assert_eq!(offs[1], 64);
        assert_eq!(offs[63], 4032);
        assert_eq!(offs[64], 0, "wraps after one page");
        // 100 B rounds up to 128 B steps: 32 per page.
        assert_eq!(
            SourceLayout::Perftest.offset(100, 31, 512, REGION),
            31 * 128
        );
        assert_eq!(SourceLayout::Perftest.offset(100, 32, 512, REGION), 0);
        // 1 KiB: four per page; 2 KiB: two.
        assert_eq!(SourceLayout::Perftest.offset(1024, 3, 512, REGION), 3072);
        assert_eq!(SourceLayout::Perftest.offset(1024, 4, 512, REGION), 0);
        assert_eq!(SourceLayout::Perftest.offset(2048, 1, 512, REGION), 2048);
    }

    #[test]
    fn perftest_large_messages_reuse_one_buffer() {
        for size in [2049, 4096, 65536, 1 << 20] {
            for k in [0, 1, 7, 1000] {
                assert_eq!(SourceLayout::Perftest.offset(size, k, 32, REGION), 0);
            }
        }
    }

    #[test]
    fn spread_gives_each_message_in_flight_its_own_range_inside_the_region() {
        // 64 KiB, 32 in flight: 32 slots, 2 MiB.
        let offs: Vec<u64> = (0..33)
            .map(|k| SourceLayout::Spread.offset(65536, k, 32, REGION))
            .collect();
        assert_eq!(offs[31], 31 * 65536);
        assert_eq!(offs[32], 0);
        // 1 MiB, 4 in flight, 4 MiB region: all four fit.
        assert_eq!(SourceLayout::Spread.offset(1 << 20, 3, 4, REGION), 3 << 20);
        // More in flight than the region holds: bounded by the region.
        for k in 0..100 {
            let o = SourceLayout::Spread.offset(1 << 20, k, 8, REGION);
            assert!(o + (1 << 20) <= REGION);
        }
    }

    #[test]
    fn packets_walk_each_message_in_chunks_from_where_the_layout_puts_it() {
        // 64 KiB messages in 4 KiB packets, perftest: 16 packets reading
        // the one buffer at offset 0 in order, then the same again.
        let s = PacketSource::new(SourceLayout::Perftest, 65536, 4096, 32, REGION);
        assert_eq!(s.packets_per_message(), 16);
        let offs: Vec<(usize, usize)> = (0..17).map(|p| s.packet(p)).collect();
        assert_eq!(offs[0], (0, 4096));
        assert_eq!(offs[15], (15 * 4096, 4096));
        assert_eq!(offs[16], (0, 4096));
        // Spread: message k in slot k mod 32.
        let s = PacketSource::new(SourceLayout::Spread, 65536, 4096, 32, REGION);
        assert_eq!(s.packet(16 + 3), (65536 + 3 * 4096, 4096));
        assert_eq!(s.packet(32 * 16), (0, 4096));
        // Small messages: one packet each, stepping through one page.
        let s = PacketSource::new(SourceLayout::Perftest, 64, 4096, 512, REGION);
        assert_eq!(s.packets_per_message(), 1);
        assert_eq!(s.packet(1), (64, 64));
        assert_eq!(s.packet(64), (0, 64));
        // A message that is not a whole number of chunks: a short last one.
        let s = PacketSource::new(SourceLayout::Perftest, 10_000, 4172, 32, REGION);
        assert_eq!(s.packets_per_message(), 3);
        assert_eq!(s.packet(2), (8344, 10_000 - 8344));
        // Every packet stays inside the region, for every layout.
        for layout in [SourceLayout::Perftest, SourceLayout::Spread] {
            for size in [64, 1024, 65536, 1 << 20, 4 << 20] {
                let s = PacketSource::new(layout, size, 4096, 32, REGION);
                for p in 0..2000 {
                    let (at, len) = s.packet(p);
                    assert!(at + len <= s.region_len(), "{layout:?} {size} {p}");
                }
            }
        }
    }
}
