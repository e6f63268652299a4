//! The drop-in's configuration, from environment variables (set by
//! `roce-xdp exec`, or by hand: docs/verbs-drop-in.md).

use engine::io::ZeroCopy;
use engine::nic::{AttachMode, SteerMode};

/// Interface to attach to (required).
pub const ENV_IFACE: &str = "ROCE_XDP_IFACE";
/// Interface queue whose AF_XDP socket the program's engine owns (default 0).
pub const ENV_QUEUE: &str = "ROCE_XDP_QUEUE";
/// XDP attach mode: auto (default), native, generic.
pub const ENV_MODE: &str = "ROCE_XDP_MODE";
/// AF_XDP zero-copy: auto (default), on, off.
pub const ENV_ZERO_COPY: &str = "ROCE_XDP_ZERO_COPY";
/// 1: remove an XDP program another tool attached first, and start even
/// if RoCE may reach RX queues without an engine (as the tools' --force).
pub const ENV_FORCE: &str = "ROCE_XDP_FORCE";
/// How RoCE reaches the program's queue on a multi-queue interface:
/// auto (default), ntuple, off (the tools' `--steer`,
/// docs/queue-coverage.md).
pub const ENV_STEER: &str = "ROCE_XDP_STEER";
/// 0: no progress thread; the engine moves only inside the program's
/// verbs calls (`ibv_poll_cq`...): for measurements, see
/// docs/verbs-drop-in.md ("Process model").
pub const ENV_PROGRESS_THREAD: &str = "ROCE_XDP_PROGRESS_THREAD";
/// `ibv_poll_cq` calls in a row that find nothing to do, while the
/// program's QPs have a window of requests in flight, before each further
/// one yields the core (sleeps until a frame or a completion arrives, at
/// most 1 ms); 0: never yield (docs/verbs-drop-in.md).
pub const ENV_POLL_YIELD: &str = "ROCE_XDP_POLL_YIELD";
/// Its default: about 10 us of empty polls here.
pub const DEFAULT_POLL_YIELD: u32 = 32;
/// The progress thread's nice value, -20..19 (setpriority(2) on the
/// thread; below 0 needs CAP_SYS_NICE); unset: the program's
/// (docs/verbs-drop-in.md, "Process model").
pub const ENV_PROGRESS_NICE: &str = "ROCE_XDP_PROGRESS_NICE";
/// Whether the program attaches to the interface's shared engine
/// (`roce-xdp service`; docs/shared-engine.md): `auto` (the default)
/// attaches when a service runs for the interface and runs an engine of
/// its own otherwise; `always` attaches or fails; `never` runs its own.
pub const ENV_SHARE: &str = "ROCE_XDP_SHARE";

/// How the program reaches the interface ([`ENV_SHARE`]): the engine's own
/// choice, as the tools' `--share` makes it.
pub use engine::attach::Share;

/// What the environment asks for.
#[derive(Debug, Clone)]
pub struct Config {
    pub iface: String,
    pub queue: u32,
    pub attach: AttachMode,
    pub zero_copy: ZeroCopy,
    pub force: bool,
    pub steer: SteerMode,
    pub progress_thread: bool,
    /// See [`ENV_POLL_YIELD`]; 0 = never.
    pub poll_yield: u32,
    /// See [`ENV_PROGRESS_NICE`]; None: leave it.
    pub progress_nice: Option<i32>,
    /// See [`ENV_SHARE`].
    pub share: Share,
}

impl Config {
    /// Reads the environment; the error says what to set.
    pub fn from_env() -> Result<Config, String> {
        Self::parse(|k| std::env::var(k).ok())
    }

    /// Parses the variables `get` returns.
    pub fn parse(get: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let iface = get(ENV_IFACE).filter(|s| !s.is_empty()).ok_or_else(|| {
            format!("{ENV_IFACE} is not set: run the program under `roce-xdp exec --iface IF -- ...` or set {ENV_IFACE}=IF")
        })?;
        let queue = match get(ENV_QUEUE) {
            None => 0,
            Some(q) => q
                .parse()
                .map_err(|_| format!("{ENV_QUEUE}={q}: expected one queue number, e.g. 0"))?,
        };
        let attach = match get(ENV_MODE).as_deref() {
            None | Some("auto") => AttachMode::Auto,
            Some("native") => AttachMode::Native,
            Some("generic") => AttachMode::Generic,
            Some(m) => return Err(format!("{ENV_MODE}={m}: expected auto, native or generic")),
        };
        let zero_copy = match get(ENV_ZERO_COPY).as_deref() {
            None | Some("auto") => ZeroCopy::Auto,
            Some("on") => ZeroCopy::On,
            Some("off") => ZeroCopy::Off,
            Some(z) => return Err(format!("{ENV_ZERO_COPY}={z}: expected auto, on or off")),
        };
        let force = matches!(
            get(ENV_FORCE).as_deref(),
            Some("1") | Some("yes") | Some("true")
        );
        let steer = match get(ENV_STEER).as_deref() {
            None | Some("auto") => SteerMode::Auto,
            Some("ntuple") => SteerMode::Ntuple,
            Some("off") => SteerMode::Off,
            Some(s) => return Err(format!("{ENV_STEER}={s}: expected auto, ntuple or off")),
        };
        let progress_thread = !matches!(get(ENV_PROGRESS_THREAD).as_deref(), Some("0"));
        let poll_yield = match get(ENV_POLL_YIELD) {
            None => DEFAULT_POLL_YIELD,
            Some(v) => v.parse().map_err(|_| {
                format!("{ENV_POLL_YIELD}={v}: expected a number of calls (0: never yield)")
            })?,
        };
        let progress_nice = match get(ENV_PROGRESS_NICE) {
            None => None,
            Some(v) => match v.parse::<i32>() {
                Ok(n) if (-20..=19).contains(&n) => Some(n),
                _ => {
                    return Err(format!(
                        "{ENV_PROGRESS_NICE}={v}: expected a nice value, -20..19"
                    ))
                }
            },
        };
        let share = match get(ENV_SHARE).as_deref() {
            None | Some("auto") => Share::Auto,
            Some("always") => Share::Always,
            Some("never") => Share::Never,
            Some(v) => return Err(format!("{ENV_SHARE}={v}: expected auto, always or never")),
        };
        Ok(Config {
            share,
            iface,
            queue,
            attach,
            zero_copy,
            force,
            steer,
            progress_thread,
            poll_yield,
            progress_nice,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn needs_an_interface_and_says_how_to_give_it() {
        let e = Config::parse(env(&[])).unwrap_err();
        assert!(e.contains("roce-xdp exec --iface"), "{e}");
    }

    #[test]
    fn reads_every_variable() {
        let c = Config::parse(env(&[
            (ENV_IFACE, "veth0"),
            (ENV_QUEUE, "2"),
            (ENV_MODE, "generic"),
            (ENV_ZERO_COPY, "off"),
            (ENV_FORCE, "1"),
            (ENV_STEER, "off"),
            (ENV_POLL_YIELD, "0"),
            (ENV_PROGRESS_NICE, "-5"),
            (ENV_SHARE, "always"),
        ]))
        .unwrap();
        assert_eq!(c.iface, "veth0");
        assert_eq!(c.queue, 2);
        assert_eq!(c.attach, AttachMode::Generic);
        assert_eq!(c.zero_copy, ZeroCopy::Off);
        assert!(c.force);
        assert_eq!(c.steer, SteerMode::Off);
        assert!(c.progress_thread);
        assert_eq!(c.poll_yield, 0);
        assert_eq!(c.progress_nice, Some(-5));
        assert_eq!(c.share, Share::Always);
        let d = Config::parse(env(&[(ENV_IFACE, "veth0")])).unwrap();
        assert_eq!(d.share, Share::Auto);
        let e = Config::parse(env(&[(ENV_IFACE, "veth0"), (ENV_SHARE, "yes")])).unwrap_err();
        assert!(e.contains("auto, always or never"), "{e}");
        assert_eq!(d.poll_yield, DEFAULT_POLL_YIELD);
        assert_eq!(d.progress_nice, None);
        let e =
            Config::parse(env(&[(ENV_IFACE, "veth0"), (ENV_PROGRESS_NICE, "-21")])).unwrap_err();
        assert!(e.contains("-20..19"), "{e}");
        let e = Config::parse(env(&[(ENV_IFACE, "veth0"), (ENV_POLL_YIELD, "x")])).unwrap_err();
        assert!(e.contains("0: never"), "{e}");
    }

    #[test]
    fn refuses_a_queue_range() {
        let e = Config::parse(env(&[(ENV_IFACE, "veth0"), (ENV_QUEUE, "0-3")])).unwrap_err();
        assert!(e.contains("one queue"), "{e}");
    }
}
