//! Unreliable Datagram on a [`Device`]: address handles and UD QPs
//! (`crate::ud` does the protocol).
//!
//! ```text
//! let ah = dev.create_ah(0, AhAttr { remote: RemoteAddress { mac, ip, ..Default::default() }, ..Default::default() })?;
//! let qp = dev.create_ud_qp(0, 0, QpCaps::default())?;     // queue 0, PD 0
//! qp.ready(qkey, psn)?;                                    // RESET -> INIT -> RTR -> RTS
//! qp.post_recv(RecvWr { wr_id, sge: mr.sge(0, 40 + 1024) })?;   // 40 bytes of GRH area first
//! qp.post_send(UdSendWr::new(wr_id, mr.sge(4096, n), ah.id(), remote_qpn, remote_qkey))?;
//! ```
//!
//! An address handle is the device's: it is made in every queue's
//! endpoint under one number, so a UD QP finds it on whichever queue the
//! QP lives. A UD QP stays on the queue it was made on (it has no one
//! peer whose packets would home it elsewhere): datagrams that RSS puts
//! on another queue are handed to it there.

use std::sync::Arc;

use crate::driver::{Directory, Shared, Work};
use crate::rc::{QpState, RecvWr};
use crate::ud::{AhAttr, UdQp, UdQpAttr, UdQpAttrMask, UdSendWr};

use super::device::{call, call_qp, Device};
use super::{DeviceError, QpCaps};

/// The device's address handle numbers: freed ones are used again.
#[derive(Debug, Default)]
pub(crate) struct AhNumbers {
    next: u32,
    free: Vec<u32>,
}

impl AhNumbers {
    fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// An address handle of a [`Device`] (`ibv_ah`): where UD sends that
/// name it ([`UdSendWr::ah`]) go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressHandle {
    id: u32,
    pd: u32,
    attr: AhAttr,
}

impl AddressHandle {
    /// Its number, for [`UdSendWr::ah`].
    pub fn id(&self) -> u32 {
        self.id
    }
    /// Its protection domain.
    pub fn pd(&self) -> u32 {
        self.pd
    }
    /// What it says.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
}

impl Device {
    /// Makes an address handle in protection domain `pd`
    /// (`ibv_create_ah`): in every queue's endpoint, under one number.
    pub fn create_ah(&self, pd: u32, attr: AhAttr) -> Result<AddressHandle, DeviceError> {
        let id = self
            .ah_numbers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        for q in 0..self.queues() {
            let made = call(self.shared(q)?, q, move |ep, _| {
                ep.create_ah_numbered(id, pd, &attr)
            })
            .and_then(|r| r.map_err(DeviceError::from));
            if let Err(e) = made {
                for undo in 0..q {
                    if let Ok(sh) = self.shared(undo) {
                        let _ = call(sh, undo, move |ep, _| ep.destroy_ah(id));
                    }
                }
                self.ah_numbers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .free
                    .push(id);
                return Err(e);
            }
        }
        Ok(AddressHandle { id, pd, attr })
    }

    /// Destroys an address handle (`ibv_destroy_ah`) in every queue's
    /// endpoint. A send posted with it and not yet sent fails with a local
    /// QP operation error.
    pub fn destroy_ah(&self, ah: AddressHandle) -> Result<(), DeviceError> {
        let id = ah.id;
        for q in 0..self.queues() {
            call(self.shared(q)?, q, move |ep, _| ep.destroy_ah(id))??;
        }
        self.ah_numbers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free
            .push(id);
        Ok(())
    }

    /// Creates a UD QP in protection domain `pd` for the application of
    /// queue `q` (its completions arrive on queue `q`), numbered across the
    /// device as the RC QPs are.
    pub fn create_ud_qp(&self, q: u32, pd: u32, caps: QpCaps) -> Result<UdQueuePair, DeviceError> {
        let shared = self.shared(q)?.clone();
        let qpn = self.directory.allocate_qpn(q)?;
        let created = call(&shared, q, move |ep, cq| {
            ep.create_ud_qp_numbered(pd, qpn, caps.init_attr(cq))
        })
        .and_then(|r| r.map_err(DeviceError::from));
        if let Err(e) = created {
            self.directory.free_qpn(qpn);
            return Err(e);
        }
        Ok(UdQueuePair {
            qpn,
            queue: q,
            shared,
            directory: self.directory.clone(),
        })
    }
}

impl Device {
    /// Creates QP 1, the General Services Interface (the QP a connection
    /// manager sends and receives its MADs on; Q_Key
    /// [`crate::ud::GSI_QKEY`]), in protection domain `pd` on queue `q`
    /// (its completions arrive there). One per device: a second is
    /// refused. Its packets are handled by queue `q`'s engine: give a
    /// device that has it one queue, or steer QP 1's packets to queue `q`.
    pub fn create_gsi_qp(&self, q: u32, pd: u32, caps: QpCaps) -> Result<UdQueuePair, DeviceError> {
        let shared = self.shared(q)?.clone();
        let qpn = crate::ud::GSI_QPN;
        call(&shared, q, move |ep, cq| {
            ep.create_ud_qp_numbered(pd, qpn, caps.init_attr(cq))
        })
        .and_then(|r| r.map_err(DeviceError::from))?;
        Ok(UdQueuePair {
            qpn,
            queue: q,
            shared,
            directory: self.directory.clone(),
        })
    }
}

/// A UD QP of a [`Device`].
#[derive(Clone)]
pub struct UdQueuePair {
    qpn: u32,
    queue: u32,
    shared: Arc<Shared>,
    directory: Arc<Directory>,
}

impl std::fmt::Debug for UdQueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdQueuePair")
            .field("qpn", &self.qpn)
            .field("queue", &self.queue)
            .finish()
    }
}

impl UdQueuePair {
    /// QP number (give it to senders), unique across the device.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The queue of the application this QP belongs to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Applies the fields of `attr` that `mask` selects (`ibv_modify_qp`
    /// for a UD QP).
    pub fn modify(&self, attr: UdQpAttr, mask: UdQpAttrMask) -> Result<(), DeviceError> {
        let qpn = self.qpn;
        Ok(call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.modify_ud_qp(qpn, &attr, mask)
        })??)
    }

    /// RESET -> INIT (P_Key index 0, port 1, Q_Key `qkey`) -> RTR -> RTS
    /// (first PSN `psn`).
    pub fn ready(&self, qkey: u32, psn: u32) -> Result<(), DeviceError> {
        let a = UdQpAttr {
            state: QpState::Init,
            qkey,
            sq_psn: psn,
            ..UdQpAttr::default()
        };
        self.modify(
            a,
            UdQpAttrMask::STATE
                | UdQpAttrMask::PKEY_INDEX
                | UdQpAttrMask::PORT
                | UdQpAttrMask::QKEY,
        )?;
        self.modify(
            UdQpAttr {
                state: QpState::Rtr,
                ..a
            },
            UdQpAttrMask::STATE,
        )?;
        self.modify(
            UdQpAttr {
                state: QpState::Rts,
                ..a
            },
            UdQpAttrMask::STATE | UdQpAttrMask::SQ_PSN,
        )
    }

    /// The QP's state.
    pub fn state(&self) -> Result<Option<QpState>, DeviceError> {
        let qpn = self.qpn;
        call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.ud_qp(qpn).map(UdQp::state)
        })
    }

    /// The QP's counters.
    pub fn counters(&self) -> Result<Option<crate::rc::Counters>, DeviceError> {
        let qpn = self.qpn;
        call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.qp_counters(qpn)
        })
    }

    /// Destroys the QP (`ibv_destroy_qp`): work still outstanding is
    /// dropped without completions.
    pub fn destroy(self) -> Result<(), DeviceError> {
        let qpn = self.qpn;
        call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.destroy_ud_qp(qpn)
        })??;
        self.directory.free_qpn(qpn);
        Ok(())
    }

    /// Posts a send. Refusals by the engine arrive through
    /// [`Device::poll_post_error`].
    pub fn post_send(&self, wr: UdSendWr) -> Result<(), DeviceError> {
        self.shared
            .post(Work::UdSend { qpn: self.qpn, wr })
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }

    /// Posts a receive: its buffer gets the 40-byte GRH area, then the
    /// message.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), DeviceError> {
        self.shared
            .post(Work::UdRecv { qpn: self.qpn, wr })
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }
}
