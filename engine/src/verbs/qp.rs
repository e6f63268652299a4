//! [`QueuePair`]: an RC QP on one queue (connect, modify, post, destroy),
//! and [`QpCaps`], the depths of its work queues.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::driver::{Directory, Shared, Work};
use crate::endpoint::{ConnectOptions, RemoteQp};
use crate::rc::{QpAttr, QpAttrMask, QpInitAttr, QpState, RecvWr, SendWr, Sge, SgeCaps};

use super::device::call_qp;
use super::DeviceError;

/// Queue depths of a new QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
}

impl QpCaps {
    /// The QP's creation attributes with both work queues on `cq`.
    pub(crate) fn init_attr(self, cq: u32) -> QpInitAttr {
        QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: self.max_send_wr,
            max_recv_wr: self.max_recv_wr,
            sq_sig_all: false,
            srq: None,
        }
    }
}

impl Default for QpCaps {
    /// 64 send and 64 receive work requests: room for a perftest-style
    /// window, and small enough that a queue's limit of QPs
    /// ([`crate::endpoint::MAX_QPS_PER_ENGINE`]) fits in a few hundred MiB
    /// (`docs/architecture.md`, "QP limits").
    fn default() -> Self {
        QpCaps {
            max_send_wr: 64,
            max_recv_wr: 64,
        }
    }
}

/// An RC queue pair of one queue's application: its posts go through that
/// queue and its completions arrive there, while the QP itself lives on
/// the queue its packets arrive on (see [`Device::create_qp`](super::Device::create_qp)).
#[derive(Clone)]
pub struct QueuePair {
    qpn: u32,
    psn: u32,
    queue: u32,
    shared: Arc<Shared>,
    directory: Arc<Directory>,
}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qpn", &self.qpn)
            .field("queue", &self.queue)
            .finish()
    }
}

impl QueuePair {
    /// The handle of QP `qpn` of queue `queue`'s application, whose engine
    /// thread shares `shared`.
    pub(super) fn new(
        qpn: u32,
        queue: u32,
        shared: Arc<Shared>,
        directory: Arc<Directory>,
    ) -> Self {
        QueuePair {
            qpn,
            psn: directory.draw_psn(),
            queue,
            shared,
            directory,
        }
    }

    /// QP number (give it to the peer): drawn at random from the 24-bit
    /// space, unique across the device.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// A first send PSN for this QP, drawn at random when it was created
    /// (from a secret the device took from the OS CSPRNG): give it to the
    /// peer and pass it as [`ConnectOptions::sq_psn`].
    pub fn psn(&self) -> u32 {
        self.psn
    }

    /// The queue of the application this QP belongs to: its posts go
    /// through it, its completions arrive there.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// The queue whose engine holds the QP now (where its packets are
    /// handled): the queue RSS delivers its packets to, once it has
    /// received one.
    pub fn home_queue(&self) -> Option<u32> {
        self.directory.owner(self.qpn)
    }

    /// RESET -> INIT -> RTR -> RTS with the peer's parameters.
    pub fn connect(&self, remote: RemoteQp, opts: ConnectOptions) -> Result<(), DeviceError> {
        let qpn = self.qpn;
        Ok(call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.connect(qpn, &remote, &opts)
        })??)
    }

    /// The QP's state.
    pub fn state(&self) -> Result<Option<QpState>, DeviceError> {
        let qpn = self.qpn;
        call_qp(&self.shared, self.queue, qpn, move |ep, _| ep.qp_state(qpn))
    }

    /// Applies the fields of `attr` that `mask` selects (`ibv_modify_qp`),
    /// e.g. `QpState::Error` with [`QpAttrMask::STATE`] to flush the QP's
    /// outstanding work requests as `Flushed` completions.
    pub fn modify(&self, attr: QpAttr, mask: QpAttrMask) -> Result<(), DeviceError> {
        let qpn = self.qpn;
        Ok(call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.modify_qp(qpn, &attr, mask)
        })??)
    }

    /// Destroys the QP (`ibv_destroy_qp`). Work requests still outstanding
    /// are dropped without completions (move the QP to the error state and
    /// poll its flushed completions first if you need them); packets that
    /// still arrive for it are counted as unknown-QP drops; a later QP may
    /// get the same number. Posts through a clone of this handle are
    /// refused with an unknown-QP error ([`Device::poll_post_error`](super::Device::poll_post_error)).
    pub fn destroy(self) -> Result<(), DeviceError> {
        let qpn = self.qpn;
        call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.destroy_qp(qpn)
        })??;
        self.directory.free_qpn(qpn);
        Ok(())
    }

    /// Posts a send work request (SEND, WRITE, READ, atomics). Refusals by
    /// the engine arrive through [`Device::poll_post_error`](super::Device::poll_post_error).
    pub fn post_send(&self, wr: SendWr) -> Result<(), DeviceError> {
        self.shared
            .post(Work::Send { qpn: self.qpn, wr })
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }

    /// Posts a receive work request.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), DeviceError> {
        self.shared
            .post(Work::Recv { qpn: self.qpn, wr })
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }

    /// Gives the QP, before it is connected, room for SGE lists and
    /// inline data (`ibv_qp_cap`'s `max_send_sge`, `max_recv_sge`,
    /// `max_inline_data`; up to rxe's 32 SGEs and 512 inline bytes). A QP
    /// is made with one SGE a request and no inline data.
    pub fn set_sge_caps(&self, caps: SgeCaps) -> Result<(), DeviceError> {
        let qpn = self.qpn;
        Ok(call_qp(&self.shared, self.queue, qpn, move |ep, _| {
            ep.set_qp_sge_caps(qpn, caps)
        })??)
    }

    /// Posts a send work request whose data is gathered from `sges` (up
    /// to the QP's `max_send_sge`; `wr.local` is ignored). One SGE or
    /// none goes as [`QueuePair::post_send`] does; a longer list is
    /// copied into the post.
    pub fn post_send_sgl(&self, mut wr: SendWr, sges: &[Sge]) -> Result<(), DeviceError> {
        let work = match sges {
            [] | [_] => {
                wr.local = sges.first().copied().unwrap_or_default();
                Work::Send { qpn: self.qpn, wr }
            }
            _ => Work::SendList {
                qpn: self.qpn,
                wr,
                sges: sges.into(),
            },
        };
        self.shared
            .post(work)
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }

    /// Posts a SEND or WRITE (with or without immediate) carrying `data`
    /// inline, up to the QP's `max_inline_data` bytes: copied now, so the
    /// caller may reuse its buffer at once (`wr.local` is ignored).
    pub fn post_send_inline(&self, wr: SendWr, data: &[u8]) -> Result<(), DeviceError> {
        let work = Work::SendInline {
            qpn: self.qpn,
            wr,
            data: data.into(),
        };
        self.shared
            .post(work)
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }

    /// Posts a receive work request whose buffer is the list `sges` (up to
    /// the QP's `max_recv_sge`; none: it takes a zero-length message).
    pub fn post_recv_sgl(&self, wr_id: u64, sges: &[Sge]) -> Result<(), DeviceError> {
        let work = match sges {
            [] | [_] => Work::Recv {
                qpn: self.qpn,
                wr: RecvWr {
                    wr_id,
                    sge: sges.first().copied().unwrap_or_default(),
                },
            },
            _ => Work::RecvList {
                qpn: self.qpn,
                wr_id,
                sges: sges.into(),
            },
        };
        self.shared
            .post(work)
            .map_err(|_| DeviceError::WouldBlock(self.queue))
    }

    /// [`QueuePair::post_recv`], waiting (yielding the core) while the
    /// queue's work queue is full, for at most `timeout`: for a caller
    /// that posts many receives at once, faster than the engine takes
    /// them. After `timeout`, the `WouldBlock` error.
    pub fn post_recv_within(&self, wr: RecvWr, timeout: Duration) -> Result<(), DeviceError> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.post_recv(wr) {
                Err(DeviceError::WouldBlock(_)) if Instant::now() < deadline => {
                    std::thread::yield_now()
                }
                res => return res,
            }
        }
    }
}
