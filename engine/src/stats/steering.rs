//! The `steering` object of the stats document (`docs/queue-coverage.md`):
//!
//! `"steering":{"state":"ntuple","mode":"auto","served_queues":1,
//!   "rx_queues":4,"rules":[{"location":1023,"flow":"udp4",
//!   "dst_port":4791,"queue":0}],"rss_context":null,
//!   "uncovered_queues":[],"summary":"ntuple rules send ..."}`
//!
//! `state` is one of `none_needed`, `rss_table`, `ntuple`, `rss_context`,
//! `off`, `forced`; a rule into an RSS context has `"rss_context":N`
//! instead of `"queue"`.

use std::fmt::Write as _;

use super::json::json_str;
use crate::io::ethtool::RuleAction;
use crate::nic::SteeringStatus;

/// Appends the object.
pub(super) fn json(out: &mut String, s: &SteeringStatus) {
    out.push_str("{\"state\":");
    json_str(out, s.state.name());
    out.push_str(",\"mode\":");
    json_str(out, s.mode.name());
    let _ = write!(
        out,
        ",\"served_queues\":{},\"rx_queues\":{},\"rules\":[",
        s.served, s.rx_queues
    );
    for (i, (loc, r)) in s.rules.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"location\":{loc},\"flow\":\"{}\",\"dst_port\":{},",
            r.family.name(),
            r.dst_port
        );
        let _ = match r.action {
            RuleAction::Queue(q) => write!(out, "\"queue\":{q}}}"),
            RuleAction::RssContext(c) => write!(out, "\"rss_context\":{c}}}"),
        };
    }
    out.push_str("],\"rss_context\":");
    match s.rss_context {
        Some(c) => {
            let _ = write!(out, "{c}");
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"uncovered_queues\":[");
    for (i, q) in s.uncovered().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{q}");
    }
    out.push_str("],\"summary\":");
    json_str(out, &s.summary());
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::ethtool::{FlowFamily, UdpPortRule};
    use crate::nic::{SteerMode, SteeringState};

    #[test]
    fn steering_json() {
        let s = SteeringStatus {
            state: SteeringState::RssContext,
            mode: SteerMode::Auto,
            iface: "eth0".into(),
            served: 2,
            rx_queues: 8,
            rules: vec![(
                1023,
                UdpPortRule {
                    family: FlowFamily::Udp4,
                    dst_port: 4791,
                    action: RuleAction::RssContext(1),
                },
            )],
            rss_context: Some(1),
            reason: None,
        };
        let mut out = String::new();
        json(&mut out, &s);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["state"], "rss_context");
        assert_eq!(v["rules"][0]["location"], 1023);
        assert_eq!(v["rules"][0]["rss_context"], 1);
        assert_eq!(v["rss_context"], 1);
        assert_eq!(v["uncovered_queues"], serde_json::json!([]));
        let forced = SteeringStatus {
            state: SteeringState::Forced,
            rules: Vec::new(),
            rss_context: None,
            served: 1,
            rx_queues: 4,
            ..s
        };
        let mut out = String::new();
        json(&mut out, &forced);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["uncovered_queues"], serde_json::json!([1, 2, 3]));
        assert!(v["summary"].as_str().unwrap().starts_with("forced"));
    }
}
