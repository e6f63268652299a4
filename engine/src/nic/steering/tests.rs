//! The steering policy against a fake NIC: what is installed, removed on
//! drop, recovered after a crash, and the refusals' wording.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::*;

/// What the fake NIC can do and holds.
#[derive(Debug, Clone)]
struct Nic {
    rx: RxQueues,
    ntuple: bool,
    udp6: bool,
    contexts: bool,
    special: bool,
    size: u32,
    default_table: Vec<u32>,
    rules: BTreeMap<u32, UdpPortRule>,
    ctx: BTreeMap<u32, Vec<u32>>,
    next_ctx: u32,
    /// Inserting the served family's rule fails (EINVAL-like).
    fail_insert: bool,
}

impl Nic {
    fn new(rx: u32) -> Nic {
        Nic {
            rx: RxQueues {
                count: rx,
                kind: ChannelKind::Combined,
            },
            ntuple: true,
            udp6: true,
            contexts: true,
            special: false,
            size: 8,
            default_table: (0..16).map(|i| i % rx).collect(),
            rules: BTreeMap::new(),
            ctx: BTreeMap::new(),
            next_ctx: 1,
            fail_insert: false,
        }
    }
}

#[derive(Clone)]
struct Fake(Arc<Mutex<Nic>>);

impl Fake {
    fn new(nic: Nic) -> Fake {
        Fake(Arc::new(Mutex::new(nic)))
    }
    fn nic(&self) -> std::sync::MutexGuard<'_, Nic> {
        self.0.lock().unwrap()
    }
    fn boxed(&self) -> Box<dyn SteerOps> {
        Box::new(self.clone())
    }
}

fn unsupported(what: &'static str) -> EthtoolError {
    EthtoolError::NotSupported {
        iface: "f0".into(),
        what,
    }
}

impl SteerOps for Fake {
    fn rx_queues(&self) -> Result<RxQueues, EthtoolError> {
        Ok(self.nic().rx)
    }
    fn rss_indirection(&self, context: u32) -> Result<Vec<u32>, EthtoolError> {
        let n = self.nic();
        if context == 0 {
            return Ok(n.default_table.clone());
        }
        n.ctx.get(&context).cloned().ok_or(EthtoolError::Failed {
            iface: "f0".into(),
            what: "GRSSH",
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        })
    }
    fn rule_table(&self) -> Result<RuleTable, EthtoolError> {
        let n = self.nic();
        if !n.ntuple {
            return Err(unsupported("ntuple rules (ETHTOOL_GRXCLSRLCNT)"));
        }
        Ok(RuleTable {
            count: n.rules.len() as u32,
            size: n.size,
            special_locations: n.special,
        })
    }
    fn rule_locations(&self) -> Result<Vec<u32>, EthtoolError> {
        Ok(self.nic().rules.keys().copied().collect())
    }
    fn rule(&self, location: u32) -> Result<Option<UdpPortRule>, EthtoolError> {
        let n = self.nic();
        if !n.ntuple {
            return Err(unsupported("ntuple rules"));
        }
        Ok(n.rules.get(&location).copied())
    }
    fn insert_rule(&self, rule: &UdpPortRule, at: RuleLocation) -> Result<u32, EthtoolError> {
        let mut n = self.nic();
        if n.fail_insert || (rule.family == FlowFamily::Udp6 && !n.udp6) {
            return Err(EthtoolError::Failed {
                iface: "f0".into(),
                what: "inserting an ntuple rule",
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let loc = match at {
            RuleLocation::Any => (0..n.size).find(|l| !n.rules.contains_key(l)).unwrap(),
            RuleLocation::At(l) => {
                assert!(!n.rules.contains_key(&l), "location {l} taken");
                l
            }
        };
        n.rules.insert(loc, *rule);
        Ok(loc)
    }
    fn delete_rule(&self, location: u32) -> Result<(), EthtoolError> {
        self.nic()
            .rules
            .remove(&location)
            .map(|_| ())
            .ok_or(EthtoolError::Failed {
                iface: "f0".into(),
                what: "deleting",
                source: std::io::Error::from_raw_os_error(libc::ENOENT),
            })
    }
    fn create_rss_context(&self, queues: u32) -> Result<u32, EthtoolError> {
        let mut n = self.nic();
        if !n.contexts {
            return Err(unsupported("RSS contexts"));
        }
        let id = n.next_ctx;
        n.next_ctx += 1;
        n.ctx.insert(id, (0..16).map(|i| i % queues).collect());
        Ok(id)
    }
    fn delete_rss_context(&self, context: u32) -> Result<(), EthtoolError> {
        let mut n = self.nic();
        assert!(
            !n.rules
                .values()
                .any(|r| r.action == RuleAction::RssContext(context)),
            "context {context} deleted while rules use it"
        );
        n.ctx.remove(&context).map(|_| ()).ok_or(unsupported("x"))
    }
}

/// A fresh state directory per test.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("roce-xdp-steer-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Dir(d)
    }
    fn req(&self, served: u32) -> SteerRequest {
        SteerRequest {
            netns: Some("stc-test".into()),
            state_dir: self.0.clone(),
            ..SteerRequest::new("f0", served)
        }
    }
    fn state(&self) -> PathBuf {
        state_path(&self.0, Some("stc-test"), "f0")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn udp(family: FlowFamily, action: RuleAction) -> UdpPortRule {
    UdpPortRule {
        family,
        dst_port: ROCE_V2_PORT,
        action,
    }
}

#[test]
fn nothing_needed_when_every_queue_is_served() {
    let d = Dir::new("none");
    let fake = Fake::new(Nic::new(4));
    for mode in [SteerMode::Auto, SteerMode::Ntuple, SteerMode::Off] {
        let s = Steering::establish(fake.boxed(), &SteerRequest { mode, ..d.req(4) }).unwrap();
        assert_eq!(s.status().state, SteeringState::NoneNeeded);
        assert!(s.status().summary().contains("all 4 RX queue(s) of f0"));
        assert!(s.status().uncovered().is_empty());
    }
    assert!(fake.nic().rules.is_empty());
    assert!(!d.state().exists());
}

#[test]
fn one_queue_gets_rules_removed_on_drop() {
    let d = Dir::new("one");
    let fake = Fake::new(Nic::new(4));
    let s = Steering::establish(fake.boxed(), &d.req(1)).unwrap();
    let st = s.status().clone();
    assert_eq!(st.state, SteeringState::Ntuple);
    // Without special locations: the last free ones, udp4 (served) first.
    assert_eq!(
        st.rules,
        vec![
            (7, udp(FlowFamily::Udp4, RuleAction::Queue(0))),
            (6, udp(FlowFamily::Udp6, RuleAction::Queue(0))),
        ]
    );
    assert_eq!(fake.nic().rules.len(), 2);
    assert!(st
        .summary()
        .contains("udp4 at location 7, udp6 at location 6"));
    // Recorded for crash recovery.
    let text = std::fs::read_to_string(d.state()).unwrap();
    let rec = parse_state(&text).unwrap();
    assert_eq!(rec.pid, std::process::id());
    assert_eq!(rec.installed.rules, st.rules);
    drop(s);
    assert!(fake.nic().rules.is_empty());
    assert!(!d.state().exists());
}

#[test]
fn several_queues_get_an_rss_context() {
    let d = Dir::new("ctx");
    let fake = Fake::new(Nic {
        special: true,
        ..Nic::new(8)
    });
    let s = Steering::establish(fake.boxed(), &d.req(2)).unwrap();
    assert_eq!(s.status().state, SteeringState::RssContext);
    assert_eq!(s.status().rss_context, Some(1));
    assert_eq!(fake.nic().ctx[&1][..4], [0, 1, 0, 1]);
    assert!(fake
        .nic()
        .rules
        .values()
        .all(|r| r.action == RuleAction::RssContext(1) && r.dst_port == 4791));
    // Special locations: the driver chose 0 and 1.
    assert_eq!(fake.nic().rules.keys().copied().collect::<Vec<_>>(), [0, 1]);
    assert!(s
        .status()
        .summary()
        .contains("RSS context 1 spreads over queues 0-1"));
    s.remove().unwrap();
    assert!(fake.nic().rules.is_empty() && fake.nic().ctx.is_empty());
    assert!(!d.state().exists());
}

#[test]
fn without_rss_contexts_rules_go_to_queue_zero() {
    let d = Dir::new("noctx");
    let fake = Fake::new(Nic {
        contexts: false,
        ..Nic::new(4)
    });
    let s = Steering::establish(fake.boxed(), &d.req(2)).unwrap();
    assert_eq!(s.status().state, SteeringState::Ntuple);
    assert!(s
        .status()
        .summary()
        .contains("every RoCE flow goes to queue 0"));
    assert!(fake
        .nic()
        .rules
        .values()
        .all(|r| r.action == RuleAction::Queue(0)));
}

#[test]
fn the_other_familys_rule_is_optional() {
    let d = Dir::new("v6");
    let fake = Fake::new(Nic {
        udp6: false,
        ..Nic::new(4)
    });
    let s = Steering::establish(fake.boxed(), &d.req(1)).unwrap();
    assert_eq!(s.status().rules.len(), 1);
    drop(s);
    // Serving IPv6 needs the udp6 rule: refused, nothing left behind.
    let e = Steering::establish(
        fake.boxed(),
        &SteerRequest {
            ipv6: true,
            ..d.req(1)
        },
    )
    .unwrap_err();
    assert!(matches!(e, SteerError::Uncovered(_)), "{e}");
    assert!(e.to_string().contains("ethtool -K f0 ntuple on"), "{e}");
    assert!(fake.nic().rules.is_empty());
}

#[test]
fn a_failed_rule_undoes_the_context() {
    let d = Dir::new("undo");
    let fake = Fake::new(Nic {
        fail_insert: true,
        ..Nic::new(4)
    });
    let e = Steering::establish(fake.boxed(), &d.req(2)).unwrap_err();
    assert!(matches!(e, SteerError::Uncovered(_)), "{e}");
    assert!(fake.nic().ctx.is_empty(), "the context stayed");
    assert!(!d.state().exists());
}

#[test]
fn no_ntuple_refuses_with_the_fix() {
    let d = Dir::new("refuse");
    let fake = Fake::new(Nic {
        ntuple: false,
        ..Nic::new(4)
    });
    let e = Steering::establish(fake.boxed(), &d.req(1)).unwrap_err();
    let m = e.to_string();
    for want in [
        "f0 has 4 RX queues but only queue 0 is served",
        "no steering could be installed: f0 has no ntuple filters",
        "queues 1-3",
        "`--queues 0-3`",
        "`ethtool -L f0 combined 1`",
        "pass --force to serve anyway",
        "reach the kernel instead of the engine",
    ] {
        assert!(m.contains(want), "{want:?} missing from: {m}");
    }
    // The tools name their queue with --queue; veth-like NICs count rx.
    let fake = Fake::new(Nic {
        ntuple: false,
        rx: RxQueues {
            count: 4,
            kind: ChannelKind::Rx,
        },
        ..Nic::new(4)
    });
    let req = SteerRequest {
        queue_option: QueueOption::UpTo,
        ..d.req(2)
    };
    let m = Steering::establish(fake.boxed(), &req)
        .unwrap_err()
        .to_string();
    assert!(m.contains("queues 0-1 are served"), "{m}");
    assert!(
        m.contains("`--queue 3`") && m.contains("`ethtool -L f0 rx 2`"),
        "{m}"
    );
    // The dry run refuses the same way.
    let c = Steering::check(&fake, &req).unwrap_err().to_string();
    assert_eq!(c, m);
}

#[test]
fn force_serves_uncovered_with_a_warning() {
    let d = Dir::new("force");
    let fake = Fake::new(Nic {
        ntuple: false,
        ..Nic::new(4)
    });
    let req = SteerRequest {
        force: true,
        ..d.req(1)
    };
    Steering::check(&fake, &req).unwrap();
    let s = Steering::establish(fake.boxed(), &req).unwrap();
    assert_eq!(s.status().state, SteeringState::Forced);
    assert_eq!(s.status().uncovered(), 1..4);
    assert_eq!(s.notes().len(), 1);
    assert!(s.notes()[0].starts_with("forced (--force): no steering (f0 has no ntuple filters"));
    assert!(s.notes()[0].contains("queues 1-3 of f0 reach the kernel"));
}

#[test]
fn ntuple_mode_failing_is_an_error_even_forced() {
    let d = Dir::new("ntuple");
    let fake = Fake::new(Nic {
        ntuple: false,
        ..Nic::new(4)
    });
    let req = SteerRequest {
        mode: SteerMode::Ntuple,
        force: true,
        ..d.req(1)
    };
    let e = Steering::establish(fake.boxed(), &req).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("--steer ntuple could not steer RoCE there"),
        "{m}"
    );
    assert!(
        m.contains("--force does not override --steer ntuple"),
        "{m}"
    );
    assert!(Steering::check(&fake, &req).is_err());
    // Where it can, ntuple installs like auto.
    let fake = Fake::new(Nic::new(4));
    let s = Steering::establish(fake.boxed(), &req).unwrap();
    assert_eq!(s.status().state, SteeringState::Ntuple);
}

#[test]
fn off_installs_nothing() {
    let d = Dir::new("off");
    let fake = Fake::new(Nic::new(4));
    let req = SteerRequest {
        mode: SteerMode::Off,
        ..d.req(1)
    };
    let m = Steering::establish(fake.boxed(), &req)
        .unwrap_err()
        .to_string();
    assert!(m.contains("steering is off (--steer off)"), "{m}");
    assert!(Steering::check(&fake, &req).is_err());
    let s = Steering::establish(fake.boxed(), &SteerRequest { force: true, ..req }).unwrap();
    assert_eq!(s.status().state, SteeringState::Off);
    assert_eq!(s.status().uncovered(), 1..4);
    assert!(fake.nic().rules.is_empty() && fake.nic().ctx.is_empty());
    assert!(!d.state().exists());
}

#[test]
fn an_rss_table_over_the_served_queues_needs_nothing() {
    let d = Dir::new("table");
    let fake = Fake::new(Nic {
        ntuple: false,
        default_table: vec![0, 1, 0, 1],
        ..Nic::new(4)
    });
    let s = Steering::establish(fake.boxed(), &d.req(2)).unwrap();
    assert_eq!(s.status().state, SteeringState::RssTable);
    assert!(Steering::check(&fake, &d.req(2)).is_ok());
    // Queue 1 is in the table but not served: refused.
    assert!(Steering::establish(fake.boxed(), &d.req(1)).is_err());
}

/// A pid no process can have (above the kernel's PID_MAX_LIMIT).
const DEAD_PID: u32 = 0x7fff_fff0;

#[test]
fn crash_recovery_removes_what_a_dead_run_left() {
    let d = Dir::new("crash");
    let fake = Fake::new(Nic::new(4));
    // A run that crashed: its context and rules are still on the NIC.
    let ours = udp(FlowFamily::Udp4, RuleAction::RssContext(1));
    let replaced = udp(FlowFamily::Udp6, RuleAction::RssContext(1));
    {
        let mut n = fake.nic();
        n.ctx.insert(1, (0..16).map(|i| i % 2).collect());
        n.next_ctx = 2;
        n.rules.insert(7, ours);
        // Someone replaced location 6 since: not ours any more.
        n.rules
            .insert(6, udp(FlowFamily::Udp6, RuleAction::Queue(3)));
    }
    let left = Installed {
        context: None,
        rules: vec![(7, ours), (6, replaced)],
    };
    std::fs::create_dir_all(&d.0).unwrap();
    std::fs::write(d.state(), format_state(DEAD_PID, 1, "f0", &left)).unwrap();
    // Serving every queue needs no steering, but the leftovers go first.
    let s = Steering::establish(fake.boxed(), &d.req(4)).unwrap();
    assert_eq!(s.notes().len(), 1, "{:?}", s.notes());
    let note = &s.notes()[0];
    assert!(note.contains(&format!("pid {DEAD_PID}")), "{note}");
    assert!(
        note.contains("removed its udp4 rule at location 7"),
        "{note}"
    );
    assert!(note.contains("left location 6 alone"), "{note}");
    assert!(!fake.nic().rules.contains_key(&7));
    assert!(fake.nic().rules.contains_key(&6));
    assert!(!d.state().exists());
    drop(s);

    // The context too, when the state lists it and its table is as left.
    fake.nic().rules.clear();
    let left = Installed {
        context: Some((1, 2)),
        rules: Vec::new(),
    };
    std::fs::write(d.state(), format_state(DEAD_PID, 1, "f0", &left)).unwrap();
    let s = Steering::establish(fake.boxed(), &d.req(1)).unwrap();
    assert!(
        s.notes()[0].contains("removed its RSS context 1"),
        "{:?}",
        s.notes()
    );
    assert!(!fake.nic().ctx.contains_key(&1));
    // ... and this run's own steering is then in place.
    assert_eq!(s.status().state, SteeringState::Ntuple);
}

#[test]
fn a_live_owner_is_not_disturbed() {
    let d = Dir::new("live");
    let fake = Fake::new(Nic::new(4));
    let first = Steering::establish(fake.boxed(), &d.req(1)).unwrap();
    let e = Steering::establish(fake.boxed(), &d.req(1)).unwrap_err();
    assert!(
        matches!(&e, SteerError::InUse { pid, .. } if *pid == std::process::id()),
        "{e}"
    );
    assert_eq!(fake.nic().rules.len(), 2);
    drop(first);
    assert!(fake.nic().rules.is_empty());
    // A garbled file is dropped with a note.
    std::fs::create_dir_all(&d.0).unwrap();
    std::fs::write(d.state(), "rule x y\n").unwrap();
    let s = Steering::establish(fake.boxed(), &d.req(4)).unwrap();
    assert!(s.notes()[0].contains("unreadable"), "{:?}", s.notes());
}

#[test]
fn a_failed_removal_stays_recorded() {
    let d = Dir::new("keep");
    let fake = Fake::new(Nic::new(4));
    let s = Steering::establish(fake.boxed(), &d.req(1)).unwrap();
    // Someone deleted location 6 behind our back.
    fake.nic().rules.remove(&6);
    let e = s.remove().unwrap_err();
    assert!(e.to_string().contains("rule at location 6"), "{e}");
    let rec = parse_state(&std::fs::read_to_string(d.state()).unwrap()).unwrap();
    assert_eq!(rec.installed.rules.len(), 1);
    assert_eq!(rec.installed.rules[0].0, 6);
}

#[test]
fn state_files_round_trip() {
    let inst = Installed {
        context: Some((3, 2)),
        rules: vec![
            (1023, udp(FlowFamily::Udp4, RuleAction::RssContext(3))),
            (1022, udp(FlowFamily::Udp6, RuleAction::Queue(0))),
        ],
    };
    let st = parse_state(&format_state(42, 99, "eth0", &inst)).unwrap();
    assert_eq!(
        st,
        StateFile {
            pid: 42,
            start_time: 99,
            installed: inst
        }
    );
    assert!(process_alive(std::process::id(), own_start_time()));
    assert!(!process_alive(std::process::id(), own_start_time() + 1));
    assert!(!process_alive(DEAD_PID, 0));
    assert!(!netns_label(None).is_empty());
    assert_eq!(netns_label(Some("stc-a")), "stc-a");
}
