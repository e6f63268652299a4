//! The Unreliable Datagram transport (IBA 9.8.4, chapter 10's UD QPs), as
//! RoCE v2 and Linux rxe carry it: one packet per message (UD SEND_ONLY,
//! with or without immediate, BTH + DETH [+ ImmDt]), no ACK, no
//! retransmission, each send addressed by its work request (an address
//! handle, a remote QP number and Q_Key).
//!
//! - `ah.rs`: address handles ([`AhAttr`], [`AhTable`]): where a datagram
//!   goes (MAC, IP, VLAN, traffic class, hop limit).
//! - `qp.rs`: the QP ([`UdQp`]): its attributes ([`UdQpAttr`],
//!   [`UdQpAttrMask`]), the state machine (IBA 11.2.4.2 for UD), the
//!   work queues.
//! - `send.rs`: posting sends ([`UdSendWr`]) and writing their frames.
//! - `receive.rs`: checking and placing a received datagram (rxe's
//!   `rxe_recv.c` `check_keys` and `rxe_resp.c` for UD: the GRH area,
//!   the completion's [`UdSource`]).
//! - `table.rs`: the endpoint's UD QPs by number, and which have work.
//!
//! The endpoint ([`crate::endpoint::Endpoint`]) holds one [`AhTable`] and
//! one [`UdQps`]; UD QPs share its QP number space with the RC QPs, and
//! QP 1 (the GSI) can be made with [`crate::endpoint::Endpoint::create_ud_qp_numbered`].

mod ah;
mod qp;
mod receive;
mod send;
mod table;

pub use self::ah::{AhAttr, AhTable, MAX_AHS};
pub use self::qp::{
    UdQp, UdQpAttr, UdQpAttrMask, GRH_LEN, GSI_QKEY, GSI_QPN, PKEY_TABLE_LEN, PORT_NUM,
};
pub use self::receive::{NetworkHeader, UdSource};
pub(crate) use self::send::SendContext;
pub use self::send::{UdSendOp, UdSendWr};
pub use self::table::UdQps;
