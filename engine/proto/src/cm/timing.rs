//! CM timers (IBA 12.7.20 ff.): times are coded as `4.096 us * 2^t`.

use core::time::Duration;

/// `4.096 us * 2^t` (IBA 12.7.20 "CM Response Timeout", 12.7.34 "Local
/// ACK Timeout"; the kernel's cm_convert_to_ms rounds the same value to
/// milliseconds). `t` beyond 31 is taken as 31, the field's maximum.
pub fn iba_time(t: u8) -> Duration {
    Duration::from_nanos(4096u64 << u32::from(t.min(31)))
}
