//! The Communication Management MAD (IBA 13.4.2 common header, IBA 12.6
//! message contents): checked zero-copy views over a 256-byte MAD and
//! setters that build one in place.
//!
//! Offsets are the MAD's own (the 24-byte common header first, then the
//! CM message). The message tables are IBA vol 1 ch. 12 tables 106
//! (REQ), 107 (MRA), 108 (REJ), 110 (REP), 111 (RTU), 112 (DREQ),
//! 113 (DREP), 119 (SIDR_REQ) and 120 (SIDR_REP); the Linux kernel's
//! `include/rdma/ibta_vol1_c12.h` names the same offsets. Bit positions
//! are written as IBA does, `byte[bit]` with bit 7 the most significant:
//! a field "bits 7:3 of byte 43" is the top five bits.
//!
//! A view is built with `new_checked` (the buffer must hold a whole MAD);
//! getters never panic afterwards. Setters only touch their field's bits.

use core::fmt;

/// A MAD is always 256 bytes (IBA 13.4.2).
pub const MAD_SIZE: usize = 256;
/// The common MAD header (IBA 13.4.2, figure 146).
pub const MAD_HEADER_LEN: usize = 24;
/// Base version of every MAD (IBA 13.4.2).
pub const BASE_VERSION: u8 = 1;
/// Management class of the Communication Manager (IBA 13.4.4, table 146).
pub const MGMT_CLASS_CM: u8 = 0x07;
/// CM class version 2 (IBA 1.2 onwards; the kernel's IB_CM_CLASS_VERSION).
pub const CM_CLASS_VERSION: u8 = 2;
/// The CM's messages are all sent with method Send (IBA 12.6.1).
pub const METHOD_SEND: u8 = 0x03;
/// The General Service Interface's QP (IBA 13.5.1).
pub const GSI_QPN: u32 = 1;
/// The GSI's well-known Q_Key (IBA 13.5.1: 0x80010000).
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The default partition key (full member).
pub const DEFAULT_PKEY: u16 = 0xFFFF;
/// The permissive LID a RoCE v2 path carries in LID fields (the kernel's
/// cm_format_req uses it when the path has no LIDs).
pub const PERMISSIVE_LID: u16 = 0xFFFF;

/// CM attribute IDs (IBA 12.6.1, table 104).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum AttrId {
    /// ClassPortInfo (answered by the kernel, never by this core).
    ClassPortInfo = 0x0001,
    /// Request for communication.
    Req = 0x0010,
    /// Message receipt acknowledgement.
    Mra = 0x0011,
    /// Reject.
    Rej = 0x0012,
    /// Reply to request for communication.
    Rep = 0x0013,
    /// Ready to use.
    Rtu = 0x0014,
    /// Request for communication release (disconnection request).
    Dreq = 0x0015,
    /// Reply to request for communication release.
    Drep = 0x0016,
    /// Service ID resolution request.
    SidrReq = 0x0017,
    /// Service ID resolution response.
    SidrRep = 0x0018,
    /// Load alternate path.
    Lap = 0x0019,
    /// Alternate path response.
    Apr = 0x001A,
}

impl AttrId {
    /// The attribute with this ID, if the CM class defines it.
    pub fn from_u16(v: u16) -> Option<AttrId> {
        Some(match v {
            0x0001 => AttrId::ClassPortInfo,
            0x0010 => AttrId::Req,
            0x0011 => AttrId::Mra,
            0x0012 => AttrId::Rej,
            0x0013 => AttrId::Rep,
            0x0014 => AttrId::Rtu,
            0x0015 => AttrId::Dreq,
            0x0016 => AttrId::Drep,
            0x0017 => AttrId::SidrReq,
            0x0018 => AttrId::SidrRep,
            0x0019 => AttrId::Lap,
            0x001A => AttrId::Apr,
            _ => return None,
        })
    }
}

/// Private data sizes (IBA 12.6, tables 106..120).
pub const REQ_PRIVATE_DATA: usize = 92;
/// MRA private data.
pub const MRA_PRIVATE_DATA: usize = 222;
/// REJ private data.
pub const REJ_PRIVATE_DATA: usize = 148;
/// REP private data.
pub const REP_PRIVATE_DATA: usize = 196;
/// RTU private data.
pub const RTU_PRIVATE_DATA: usize = 224;
/// DREQ private data.
pub const DREQ_PRIVATE_DATA: usize = 220;
/// DREP private data.
pub const DREP_PRIVATE_DATA: usize = 224;
/// SIDR_REQ private data.
pub const SIDR_REQ_PRIVATE_DATA: usize = 216;
/// SIDR_REP private data.
pub const SIDR_REP_PRIVATE_DATA: usize = 136;
/// REJ's Additional Rejection Information (IBA 12.6.7: up to 72 bytes).
pub const REJ_ARI_LEN: usize = 72;
/// SIDR_REP's Additional Information (IBA 12.6.11: up to 72 bytes).
pub const SIDR_REP_INFO_LEN: usize = 72;

/// Why bytes are not a CM MAD this core handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MadError {
    /// Shorter than 256 bytes.
    Truncated,
    /// Base version is not 1.
    BaseVersion,
    /// Management class is not CM (0x07).
    Class,
    /// Class version is not 2.
    ClassVersion,
    /// Method is not Send.
    Method,
    /// An attribute the CM class does not define, or one this core does
    /// not handle (ClassPortInfo, LAP, APR).
    Attribute,
}

impl fmt::Display for MadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MadError::Truncated => "MAD shorter than 256 bytes",
            MadError::BaseVersion => "MAD base version is not 1",
            MadError::Class => "MAD management class is not CM (0x07)",
            MadError::ClassVersion => "CM class version is not 2",
            MadError::Method => "CM MAD method is not Send (0x03)",
            MadError::Attribute => "CM attribute not handled",
        })
    }
}

impl std::error::Error for MadError {}

// Field access over absolute MAD offsets. Callers have checked the length.

fn get_u8(b: &[u8], off: usize) -> u8 {
    b[off]
}
fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}
fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}
/// A 24-bit field in the top three bytes of the 32-bit word at `off`.
fn get_u24(b: &[u8], off: usize) -> u32 {
    get_u32(b, off) >> 8
}
/// `width` bits of byte `off` whose least significant bit is bit `lsb`.
fn get_bits(b: &[u8], off: usize, lsb: u32, width: u32) -> u8 {
    (b[off] >> lsb) & ((1u16 << width) - 1) as u8
}
/// A 20-bit flow label in the top bits of the 32-bit word at `off`.
fn get_flow(b: &[u8], off: usize) -> u32 {
    get_u32(b, off) >> 12
}
fn get_gid(b: &[u8], off: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[off..off + 16]);
    g
}

fn set_u8(b: &mut [u8], off: usize, v: u8) {
    b[off] = v;
}
fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}
fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}
fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}
fn set_u24(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 3].copy_from_slice(&(v & 0x00FF_FFFF).to_be_bytes()[1..]);
}
fn set_bits(b: &mut [u8], off: usize, lsb: u32, width: u32, v: u8) {
    let mask = (((1u16 << width) - 1) as u8) << lsb;
    b[off] = (b[off] & !mask) | ((v << lsb) & mask);
}
fn set_flow(b: &mut [u8], off: usize, v: u32) {
    let w = (get_u32(b, off) & 0xFFF) | ((v & 0xF_FFFF) << 12);
    set_u32(b, off, w);
}
fn set_gid(b: &mut [u8], off: usize, v: &[u8; 16]) {
    b[off..off + 16].copy_from_slice(v);
}

/// Generates the getters (on any `B: AsRef<[u8]>`) and setters (on
/// `B: AsMut<[u8]>`) of one message from its table. Offsets are relative
/// to the CM message (after the common header), as IBA's tables give them.
macro_rules! message {
    (
        $(#[$meta:meta])*
        $name:ident, attr = $attr:expr, private = ($pd_off:expr, $pd_len:expr);
        $( $(#[$fm:meta])* $get:ident / $set:ident : $ty:ty = $kind:ident($off:expr $(, $a:expr)*); )*
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name<B> {
            buf: B,
        }

        impl<B: AsRef<[u8]>> $name<B> {
            /// The attribute ID of this message.
            pub const ATTR: AttrId = $attr;
            /// Offset of the private data in the MAD.
            pub const PRIVATE_DATA_OFFSET: usize = MAD_HEADER_LEN + $pd_off;
            /// Size of the private data (IBA 12.6).
            pub const PRIVATE_DATA_LEN: usize = $pd_len;

            /// A view over a buffer that holds a whole MAD.
            pub fn new_checked(buf: B) -> Result<Self, MadError> {
                if buf.as_ref().len() < MAD_SIZE {
                    return Err(MadError::Truncated);
                }
                Ok($name { buf })
            }

            /// The buffer back.
            pub fn into_inner(self) -> B {
                self.buf
            }

            /// The common MAD header.
            pub fn header(&self) -> MadHeader<&[u8]> {
                MadHeader { buf: self.buf.as_ref() }
            }

            /// The whole private data field (IBA 12.6: the sender's bytes,
            /// zero padded).
            pub fn private_data(&self) -> &[u8] {
                &self.buf.as_ref()[Self::PRIVATE_DATA_OFFSET..Self::PRIVATE_DATA_OFFSET + $pd_len]
            }

            $(
                $(#[$fm])*
                pub fn $get(&self) -> $ty {
                    message!(@get $kind, self.buf.as_ref(), MAD_HEADER_LEN + $off $(, $a)*) as $ty
                }
            )*
        }

        impl<B: AsRef<[u8]> + AsMut<[u8]>> $name<B> {
            /// The common MAD header, to set.
            pub fn header_mut(&mut self) -> MadHeader<&mut [u8]> {
                MadHeader { buf: self.buf.as_mut() }
            }

            /// Copies `data` to the start of the private data field and
            /// zeroes the rest; `Err` (nothing written) if it is too long.
            pub fn set_private_data(&mut self, data: &[u8]) -> Result<(), MadError> {
                if data.len() > $pd_len {
                    return Err(MadError::Truncated);
                }
                let pd = &mut self.buf.as_mut()[Self::PRIVATE_DATA_OFFSET..Self::PRIVATE_DATA_OFFSET + $pd_len];
                pd[..data.len()].copy_from_slice(data);
                pd[data.len()..].fill(0);
                Ok(())
            }

            $(
                $(#[$fm])*
                pub fn $set(&mut self, v: $ty) {
                    message!(@set $kind, self.buf.as_mut(), MAD_HEADER_LEN + $off, v $(, $a)*)
                }
            )*
        }
    };
    (@get u8, $b:expr, $off:expr) => { get_u8($b, $off) };
    (@get u16, $b:expr, $off:expr) => { get_u16($b, $off) };
    (@get u24, $b:expr, $off:expr) => { get_u24($b, $off) };
    (@get u32, $b:expr, $off:expr) => { get_u32($b, $off) };
    (@get u64, $b:expr, $off:expr) => { get_u64($b, $off) };
    (@get flow, $b:expr, $off:expr) => { get_flow($b, $off) };
    (@get gid, $b:expr, $off:expr) => { get_gid($b, $off) };
    (@get bits, $b:expr, $off:expr, $lsb:expr, $w:expr) => { get_bits($b, $off, $lsb, $w) };
    (@get flag, $b:expr, $off:expr, $lsb:expr) => { get_bits($b, $off, $lsb, 1) != 0 };
    (@set u8, $b:expr, $off:expr, $v:expr) => { set_u8($b, $off, $v) };
    (@set u16, $b:expr, $off:expr, $v:expr) => { set_u16($b, $off, $v) };
    (@set u24, $b:expr, $off:expr, $v:expr) => { set_u24($b, $off, $v) };
    (@set u32, $b:expr, $off:expr, $v:expr) => { set_u32($b, $off, $v) };
    (@set u64, $b:expr, $off:expr, $v:expr) => { set_u64($b, $off, $v) };
    (@set flow, $b:expr, $off:expr, $v:expr) => { set_flow($b, $off, $v) };
    (@set gid, $b:expr, $off:expr, $v:expr) => { set_gid($b, $off, &$v) };
    (@set bits, $b:expr, $off:expr, $v:expr, $lsb:expr, $w:expr) => { set_bits($b, $off, $lsb, $w, $v) };
    (@set flag, $b:expr, $off:expr, $v:expr, $lsb:expr) => { set_bits($b, $off, $lsb, 1, $v as u8) };
}

/// The common MAD header (IBA 13.4.2, figure 146).
#[derive(Debug, Clone, Copy)]
pub struct MadHeader<B> {
    buf: B,
}

impl<B: AsRef<[u8]>> MadHeader<B> {
    /// A view over a buffer that holds a whole MAD.
    pub fn new_checked(buf: B) -> Result<Self, MadError> {
        if buf.as_ref().len() < MAD_SIZE {
            return Err(MadError::Truncated);
        }
        Ok(MadHeader { buf })
    }

    /// Checks that this is a CM MAD this core handles: base version 1,
    /// class CM, class version 2, method Send, and one of the nine
    /// connection/SIDR attributes. Returns the attribute.
    pub fn check_cm(&self) -> Result<AttrId, MadError> {
        if self.base_version() != BASE_VERSION {
            return Err(MadError::BaseVersion);
        }
        if self.mgmt_class() != MGMT_CLASS_CM {
            return Err(MadError::Class);
        }
        if self.class_version() != CM_CLASS_VERSION {
            return Err(MadError::ClassVersion);
        }
        if self.method() != METHOD_SEND {
            return Err(MadError::Method);
        }
        match AttrId::from_u16(self.attr_id()) {
            Some(AttrId::ClassPortInfo | AttrId::Lap | AttrId::Apr) | None => {
                Err(MadError::Attribute)
            }
            Some(a) => Ok(a),
        }
    }

    /// BaseVersion (byte 0).
    pub fn base_version(&self) -> u8 {
        get_u8(self.buf.as_ref(), 0)
    }
    /// MgmtClass (byte 1).
    pub fn mgmt_class(&self) -> u8 {
        get_u8(self.buf.as_ref(), 1)
    }
    /// ClassVersion (byte 2).
    pub fn class_version(&self) -> u8 {
        get_u8(self.buf.as_ref(), 2)
    }
    /// R (response bit) and Method (byte 3).
    pub fn method(&self) -> u8 {
        get_u8(self.buf.as_ref(), 3)
    }
    /// Status (bytes 4..6).
    pub fn status(&self) -> u16 {
        get_u16(self.buf.as_ref(), 4)
    }
    /// ClassSpecific (bytes 6..8).
    pub fn class_specific(&self) -> u16 {
        get_u16(self.buf.as_ref(), 6)
    }
    /// TransactionID (bytes 8..16).
    pub fn transaction_id(&self) -> u64 {
        get_u64(self.buf.as_ref(), 8)
    }
    /// AttributeID (bytes 16..18).
    pub fn attr_id(&self) -> u16 {
        get_u16(self.buf.as_ref(), 16)
    }
    /// AttributeModifier (bytes 20..24).
    pub fn attr_mod(&self) -> u32 {
        get_u32(self.buf.as_ref(), 20)
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> MadHeader<B> {
    /// Writes a CM Send header: base version 1, class CM, class version 2,
    /// method Send, status 0, class specific 0, this transaction ID and
    /// attribute, reserved and attribute modifier 0.
    pub fn fill_cm(&mut self, tid: u64, attr: AttrId) {
        let b = self.buf.as_mut();
        set_u8(b, 0, BASE_VERSION);
        set_u8(b, 1, MGMT_CLASS_CM);
        set_u8(b, 2, CM_CLASS_VERSION);
        set_u8(b, 3, METHOD_SEND);
        set_u16(b, 4, 0);
        set_u16(b, 6, 0);
        set_u64(b, 8, tid);
        set_u16(b, 16, attr as u16);
        set_u16(b, 18, 0);
        set_u32(b, 20, 0);
    }
    /// Sets BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        set_u8(self.buf.as_mut(), 0, v)
    }
    /// Sets MgmtClass.
    pub fn set_mgmt_class(&mut self, v: u8) {
        set_u8(self.buf.as_mut(), 1, v)
    }
    /// Sets ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        set_u8(self.buf.as_mut(), 2, v)
    }
    /// Sets Method.
    pub fn set_method(&mut self, v: u8) {
        set_u8(self.buf.as_mut(), 3, v)
    }
    /// Sets Status.
    pub fn set_status(&mut self, v: u16) {
        set_u16(self.buf.as_mut(), 4, v)
    }
    /// Sets TransactionID.
    pub fn set_transaction_id(&mut self, v: u64) {
        set_u64(self.buf.as_mut(), 8, v)
    }
    /// Sets AttributeID.
    pub fn set_attr_id(&mut self, v: u16) {
        set_u16(self.buf.as_mut(), 16, v)
    }
    /// Sets AttributeModifier.
    pub fn set_attr_mod(&mut self, v: u32) {
        set_u32(self.buf.as_mut(), 20, v)
    }
}

message! {
    /// REQ, request for communication (IBA 12.6.5, table 106).
    Req, attr = AttrId::Req, private = (140, REQ_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// ServiceID.
    service_id / set_service_id: u64 = u64(8);
    /// Local CA GUID.
    local_ca_guid / set_local_ca_guid: u64 = u64(16);
    /// Local Q_Key (RD only).
    local_qkey / set_local_qkey: u32 = u32(28);
    /// Local QPN.
    local_qpn / set_local_qpn: u32 = u24(32);
    /// Responder Resources.
    responder_resources / set_responder_resources: u8 = u8(35);
    /// Local EECN (RD only).
    local_eecn / set_local_eecn: u32 = u24(36);
    /// Initiator Depth.
    initiator_depth / set_initiator_depth: u8 = u8(39);
    /// Remote EECN (RD only).
    remote_eecn / set_remote_eecn: u32 = u24(40);
    /// Remote CM Response Timeout (byte 43 bits 7:3).
    remote_cm_response_timeout / set_remote_cm_response_timeout: u8 = bits(43, 3, 5);
    /// Transport Service Type (byte 43 bits 2:1): 0 RC, 1 UC, 2 RD.
    transport_service_type / set_transport_service_type: u8 = bits(43, 1, 2);
    /// End-to-End Flow Control (byte 43 bit 0).
    end_to_end_flow_control / set_end_to_end_flow_control: bool = flag(43, 0);
    /// Starting PSN.
    starting_psn / set_starting_psn: u32 = u24(44);
    /// Local CM Response Timeout (byte 47 bits 7:3).
    local_cm_response_timeout / set_local_cm_response_timeout: u8 = bits(47, 3, 5);
    /// Retry Count (byte 47 bits 2:0).
    retry_count / set_retry_count: u8 = bits(47, 0, 3);
    /// Partition Key.
    partition_key / set_partition_key: u16 = u16(48);
    /// Path Packet Payload MTU (byte 50 bits 7:4).
    path_mtu / set_path_mtu: u8 = bits(50, 4, 4);
    /// RDC Exists (byte 50 bit 3).
    rdc_exists / set_rdc_exists: bool = flag(50, 3);
    /// RNR Retry Count (byte 50 bits 2:0).
    rnr_retry_count / set_rnr_retry_count: u8 = bits(50, 0, 3);
    /// Max CM Retries (byte 51 bits 7:4).
    max_cm_retries / set_max_cm_retries: u8 = bits(51, 4, 4);
    /// SRQ (byte 51 bit 3).
    srq / set_srq: bool = flag(51, 3);
    /// Extended Transport Type (byte 51 bits 2:0; XRC).
    extended_transport_type / set_extended_transport_type: u8 = bits(51, 0, 3);
    /// Primary Local Port LID.
    primary_local_lid / set_primary_local_lid: u16 = u16(52);
    /// Primary Remote Port LID.
    primary_remote_lid / set_primary_remote_lid: u16 = u16(54);
    /// Primary Local Port GID.
    primary_local_gid / set_primary_local_gid: [u8; 16] = gid(56);
    /// Primary Remote Port GID.
    primary_remote_gid / set_primary_remote_gid: [u8; 16] = gid(72);
    /// Primary Flow Label (bytes 88..91, top 20 bits).
    primary_flow_label / set_primary_flow_label: u32 = flow(88);
    /// Primary Packet Rate (byte 91 bits 5:0).
    primary_packet_rate / set_primary_packet_rate: u8 = bits(91, 0, 6);
    /// Primary Traffic Class.
    primary_traffic_class / set_primary_traffic_class: u8 = u8(92);
    /// Primary Hop Limit.
    primary_hop_limit / set_primary_hop_limit: u8 = u8(93);
    /// Primary SL (byte 94 bits 7:4).
    primary_sl / set_primary_sl: u8 = bits(94, 4, 4);
    /// Primary Subnet Local (byte 94 bit 3).
    primary_subnet_local / set_primary_subnet_local: bool = flag(94, 3);
    /// Primary Local ACK Timeout (byte 95 bits 7:3).
    primary_local_ack_timeout / set_primary_local_ack_timeout: u8 = bits(95, 3, 5);
    /// Alternate Local Port LID.
    alternate_local_lid / set_alternate_local_lid: u16 = u16(96);
    /// Alternate Remote Port LID.
    alternate_remote_lid / set_alternate_remote_lid: u16 = u16(98);
    /// Alternate Local Port GID.
    alternate_local_gid / set_alternate_local_gid: [u8; 16] = gid(100);
    /// Alternate Remote Port GID.
    alternate_remote_gid / set_alternate_remote_gid: [u8; 16] = gid(116);
}

message! {
    /// MRA, message receipt acknowledgement (IBA 12.6.6, table 107).
    Mra, attr = AttrId::Mra, private = (10, MRA_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// Remote Communication ID.
    remote_comm_id / set_remote_comm_id: u32 = u32(4);
    /// Message MRAed (byte 8 bits 7:6): 0 REQ, 1 REP, 2 LAP.
    message_mraed / set_message_mraed: u8 = bits(8, 6, 2);
    /// Service Timeout (byte 9 bits 7:3).
    service_timeout / set_service_timeout: u8 = bits(9, 3, 5);
}

message! {
    /// REJ, reject (IBA 12.6.7, table 108).
    Rej, attr = AttrId::Rej, private = (84, REJ_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// Remote Communication ID.
    remote_comm_id / set_remote_comm_id: u32 = u32(4);
    /// Message Rejected (byte 8 bits 7:6): 0 REQ, 1 REP, 2 other.
    message_rejected / set_message_rejected: u8 = bits(8, 6, 2);
    /// Reject Info Length (byte 9 bits 7:1).
    reject_info_length / set_reject_info_length: u8 = bits(9, 1, 7);
    /// Reason (table 112).
    reason / set_reason: u16 = u16(10);
}

message! {
    /// REP, reply to request for communication (IBA 12.6.8, table 110).
    Rep, attr = AttrId::Rep, private = (36, REP_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// Remote Communication ID.
    remote_comm_id / set_remote_comm_id: u32 = u32(4);
    /// Local Q_Key (RD only).
    local_qkey / set_local_qkey: u32 = u32(8);
    /// Local QPN.
    local_qpn / set_local_qpn: u32 = u24(12);
    /// Local EE Context Number (RD only).
    local_eecn / set_local_eecn: u32 = u24(16);
    /// Starting PSN.
    starting_psn / set_starting_psn: u32 = u24(20);
    /// Responder Resources.
    responder_resources / set_responder_resources: u8 = u8(24);
    /// Initiator Depth.
    initiator_depth / set_initiator_depth: u8 = u8(25);
    /// Target ACK Delay (byte 26 bits 7:3).
    target_ack_delay / set_target_ack_delay: u8 = bits(26, 3, 5);
    /// Failover Accepted (byte 26 bits 2:1).
    failover_accepted / set_failover_accepted: u8 = bits(26, 1, 2);
    /// End-to-End Flow Control (byte 26 bit 0).
    end_to_end_flow_control / set_end_to_end_flow_control: bool = flag(26, 0);
    /// RNR Retry Count (byte 27 bits 7:5).
    rnr_retry_count / set_rnr_retry_count: u8 = bits(27, 5, 3);
    /// SRQ (byte 27 bit 4).
    srq / set_srq: bool = flag(27, 4);
    /// Local CA GUID.
    local_ca_guid / set_local_ca_guid: u64 = u64(28);
}

message! {
    /// RTU, ready to use (IBA 12.6.9, table 111).
    Rtu, attr = AttrId::Rtu, private = (8, RTU_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// Remote Communication ID.
    remote_comm_id / set_remote_comm_id: u32 = u32(4);
}

message! {
    /// DREQ, request for communication release (IBA 12.6.10, table 113).
    Dreq, attr = AttrId::Dreq, private = (12, DREQ_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// Remote Communication ID.
    remote_comm_id / set_remote_comm_id: u32 = u32(4);
    /// Remote QPN/EECN.
    remote_qpn / set_remote_qpn: u32 = u24(8);
}

message! {
    /// DREP, reply to request for communication release (IBA 12.6.11).
    Drep, attr = AttrId::Drep, private = (8, DREP_PRIVATE_DATA);
    /// Local Communication ID.
    local_comm_id / set_local_comm_id: u32 = u32(0);
    /// Remote Communication ID.
    remote_comm_id / set_remote_comm_id: u32 = u32(4);
}

message! {
    /// SIDR_REQ, service ID resolution request (IBA 12.11.1, table 119).
    SidrReq, attr = AttrId::SidrReq, private = (16, SIDR_REQ_PRIVATE_DATA);
    /// Request ID.
    request_id / set_request_id: u32 = u32(0);
    /// Partition Key.
    partition_key / set_partition_key: u16 = u16(4);
    /// ServiceID.
    service_id / set_service_id: u64 = u64(8);
}

message! {
    /// SIDR_REP, service ID resolution response (IBA 12.11.2, table 120).
    SidrRep, attr = AttrId::SidrRep, private = (96, SIDR_REP_PRIVATE_DATA);
    /// Request ID.
    request_id / set_request_id: u32 = u32(0);
    /// Status (table 121): 0 valid, 1 service ID not supported, 2 rejected
    /// by the service, 3 no QP, 4 redirect, 5 unsupported class version.
    status / set_status: u8 = u8(4);
    /// Additional Information Length.
    additional_info_length / set_additional_info_length: u8 = u8(5);
    /// QPN.
    qpn / set_qpn: u32 = u24(8);
    /// ServiceID.
    service_id / set_service_id: u64 = u64(12);
    /// Q_Key.
    qkey / set_qkey: u32 = u32(20);
}

impl<B: AsRef<[u8]>> Rej<B> {
    /// Offset of the Additional Rejection Information in the MAD.
    pub const ARI_OFFSET: usize = MAD_HEADER_LEN + 12;

    /// The Additional Rejection Information, as long as Reject Info
    /// Length says (capped at the field's 72 bytes).
    pub fn ari(&self) -> &[u8] {
        let len = usize::from(self.reject_info_length()).min(REJ_ARI_LEN);
        &self.buf.as_ref()[Self::ARI_OFFSET..Self::ARI_OFFSET + len]
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Rej<B> {
    /// Sets the Additional Rejection Information and its length; `Err`
    /// (nothing written) beyond 72 bytes.
    pub fn set_ari(&mut self, ari: &[u8]) -> Result<(), MadError> {
        if ari.len() > REJ_ARI_LEN {
            return Err(MadError::Truncated);
        }
        let f = &mut self.buf.as_mut()[Self::ARI_OFFSET..Self::ARI_OFFSET + REJ_ARI_LEN];
        f[..ari.len()].copy_from_slice(ari);
        f[ari.len()..].fill(0);
        self.set_reject_info_length(ari.len() as u8);
        Ok(())
    }
}

/// REJ reasons (IBA 12.6.7.2, table 112).
pub mod rej_reason {
    /// No QP available.
    pub const NO_QP: u16 = 1;
    /// No EEC available.
    pub const NO_EEC: u16 = 2;
    /// No resources available.
    pub const NO_RESOURCES: u16 = 3;
    /// Timeout (ARI: the rejecting CA's GUID).
    pub const TIMEOUT: u16 = 4;
    /// Unsupported request.
    pub const UNSUPPORTED_REQUEST: u16 = 5;
    /// Invalid Communication ID.
    pub const INVALID_COMM_ID: u16 = 6;
    /// Invalid Communication Instance.
    pub const INVALID_COMM_INSTANCE: u16 = 7;
    /// Invalid Service ID.
    pub const INVALID_SERVICE_ID: u16 = 8;
    /// Invalid Transport Service Type.
    pub const INVALID_TRANSPORT_TYPE: u16 = 9;
    /// Stale connection.
    pub const STALE_CONNECTION: u16 = 10;
    /// RDC does not exist.
    pub const RDC_NOT_EXIST: u16 = 11;
    /// Primary remote port GID rejected.
    pub const INVALID_GID: u16 = 12;
    /// Primary remote port LID rejected.
    pub const INVALID_LID: u16 = 13;
    /// Invalid primary SL.
    pub const INVALID_SL: u16 = 14;
    /// Invalid primary traffic class.
    pub const INVALID_TRAFFIC_CLASS: u16 = 15;
    /// Invalid primary hop limit.
    pub const INVALID_HOP_LIMIT: u16 = 16;
    /// Invalid primary packet rate.
    pub const INVALID_PACKET_RATE: u16 = 17;
    /// Port and CM redirection.
    pub const PORT_CM_REDIRECT: u16 = 24;
    /// Port redirection.
    pub const PORT_REDIRECT: u16 = 25;
    /// Invalid path MTU.
    pub const INVALID_MTU: u16 = 26;
    /// Insufficient responder resources.
    pub const INSUFFICIENT_RESP_RESOURCES: u16 = 27;
    /// Consumer reject (private data carries the consumer's reason).
    pub const CONSUMER_DEFINED: u16 = 28;
    /// Invalid RNR NAK timer count.
    pub const INVALID_RNR_RETRY: u16 = 29;
    /// Duplicate local Communication ID.
    pub const DUPLICATE_LOCAL_COMM_ID: u16 = 30;
    /// Invalid class version.
    pub const INVALID_CLASS_VERSION: u16 = 31;
    /// Invalid primary flow label.
    pub const INVALID_FLOW_LABEL: u16 = 32;
    /// Invalid alternate flow label.
    pub const INVALID_ALT_FLOW_LABEL: u16 = 33;
}

/// MRA's and REJ's "message" codes (IBA 12.6.6, 12.6.7).
pub mod msg_code {
    /// The REQ.
    pub const REQ: u8 = 0;
    /// The REP.
    pub const REP: u8 = 1;
    /// Other (REJ) / LAP (MRA).
    pub const OTHER: u8 = 2;
}

/// SIDR_REP statuses (IBA 12.11.2, table 121).
pub mod sidr_status {
    /// The QPN and Q_Key are valid.
    pub const VALID: u8 = 0;
    /// Service ID not supported.
    pub const UNSUPPORTED: u8 = 1;
    /// Rejected by the service.
    pub const REJECT: u8 = 2;
    /// No QP available.
    pub const NO_QP: u8 = 3;
    /// Redirect.
    pub const REDIRECT: u8 = 4;
    /// Unsupported class version.
    pub const UNSUPPORTED_VERSION: u8 = 5;
}
