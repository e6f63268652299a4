//! The capture reader (`proto::wire::pcap`) on any bytes. Invariants: no
//! panic; records stay inside the file and come in order; once the reader
//! reports an error it ends; the frames of a classic capture written back
//! with `write_classic` read back the same.

use proto::wire::parse_frame_view;
use proto::wire::pcap::{write_classic, Reader};

/// Records read from one input at most (inputs are small).
const MAX_RECORDS: usize = 10_000;

pub fn run(data: &[u8]) {
    let Ok(reader) = Reader::new(data) else {
        return;
    };
    let range = data.as_ptr_range();
    let mut frames = Vec::new();
    let mut failed = false;
    for item in reader.take(MAX_RECORDS) {
        assert!(!failed, "a record after an error");
        match item {
            Ok(r) => {
                let inside = r.data.is_empty()
                    || (range.contains(&r.data.as_ptr()) && r.data.as_ptr_range().end <= range.end);
                assert!(inside, "a record outside the file");
                let _ = parse_frame_view(r.data);
                frames.push((r.timestamp_ns, r.data));
            }
            Err(_) => failed = true,
        }
    }
    // Written back (microseconds), the frames read back the same.
    let copy = write_classic(frames.iter().map(|&(t, d)| (t / 1000 * 1000, d)));
    let back: Vec<_> = Reader::new(&copy)
        .expect("write_classic writes a capture")
        .map(|r| r.expect("write_classic's records read").data)
        .collect();
    assert!(back.len() == frames.len() && back.iter().zip(&frames).all(|(a, b)| *a == b.1));
}
