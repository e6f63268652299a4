//! The agent's timers: retransmissions (the MAD layer's response timer,
//! IBA 13.4.6.4 / 12.7.20) and timewait (IBA 12.9.7).

use super::agent::CmAgent;
use super::conn::State;
use super::event::CmEvent;
use super::ConnId;
use crate::time::Instant;

impl CmAgent {
    /// Runs the timers due at `now`: resends a REQ / REP / DREQ /
    /// SIDR_REQ whose answer is late, gives up when its retries are out
    /// (cm.c's cm_process_send_error: `Unreachable` for a REQ or REP and
    /// the connection is gone, `Disconnected` and timewait for a DREQ,
    /// `SidrUnreachable` for a SIDR_REQ), and ends timewaits
    /// (`TimewaitExit`, the connection is gone).
    pub fn handle_timeout(&mut self, now: Instant) {
        // In deadline order (then ID): the same run for the same inputs.
        let due: Vec<ConnId> = self
            .timers
            .iter()
            .take_while(|&&(t, _)| t <= now)
            .map(|&(_, id)| id)
            .collect();
        for id in due {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            if c.timewait_end.is_some_and(|t| t <= now) {
                let destroyed = c.destroyed;
                self.remove_conn(id);
                if !destroyed {
                    self.emit_gone(CmEvent::TimewaitExit { conn: id });
                }
                continue;
            }
            let Some(r) = c.retry.as_mut() else {
                continue;
            };
            if r.deadline > now {
                continue;
            }
            if r.retries_left > 0 {
                r.retries_left -= 1;
                r.deadline = now + r.interval;
                let (peer, mad) = (c.peer, r.mad);
                self.counters.retransmissions += 1;
                self.queue(peer, mad);
                self.sync_timer(id);
                continue;
            }
            c.retry = None;
            let state = c.state;
            self.sync_timer(id);
            self.counters.timeouts += 1;
            match state {
                State::ReqSent | State::MraReqRcvd | State::RepSent | State::MraRepRcvd => {
                    self.emit(id, CmEvent::Unreachable { conn: id });
                    self.remove_conn(id);
                }
                State::DreqSent => {
                    self.emit(id, CmEvent::Disconnected { conn: id });
                    self.enter_timewait(now, id);
                }
                State::SidrReqSent => {
                    self.emit(id, CmEvent::SidrUnreachable { conn: id });
                    self.remove_conn(id);
                }
                _ => {}
            }
        }
    }
}
