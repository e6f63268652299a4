//! The MAD codec against hand-written byte layouts (IBA vol 1 ch. 12
//! tables 106..120, offsets written here from the tables, not from the
//! code), and getters reading back what setters wrote.

use proto::cm::mad::*;
use proto::cm::{CmAgent, ConnectParams, MadAddress, Transport};
use proto::time::Instant;

use crate::support::*;

/// The common header every CM MAD starts with (IBA 13.4.2).
fn header(tid: u64, attr: u16) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0] = 1; // base version
    h[1] = 0x07; // class CM
    h[2] = 2; // class version
    h[3] = 0x03; // Send
    h[8..16].copy_from_slice(&tid.to_be_bytes());
    h[16..18].copy_from_slice(&attr.to_be_bytes());
    h
}

#[test]
fn req_layout_of_the_agents_req_every_byte() {
    let mut cfg = config(1);
    cfg.ca_guid = 0x0A0B_0C0D_0E0F_1011;
    cfg.first_comm_id = 0x1122_3344;
    cfg.tid_seed = 0x0102_0304;
    cfg.packet_life_time = 16; // rdma_cm's RoCE value
    cfg.ack_delay = 15; // rxe's
    cfg.packet_rate = 7;
    let mut a = CmAgent::new(cfg);
    let pd: Vec<u8> = (0..92u8).collect();
    let p = ConnectParams {
        service_id: 0x0106_4E20,
        peer: MadAddress::gsi(gid(2)),
        local_qpn: 0xAB_CDEF,
        starting_psn: 0x12_3456,
        transport: Transport::Rc,
        responder_resources: 4,
        initiator_depth: 2,
        retry_count: 7,
        rnr_retry_count: 6,
        path_mtu: 5,
        srq: true,
        flow_control: true,
        traffic_class: 0x28,
        hop_limit: 64,
        flow_label: 0xABCDE,
        local_cm_response_timeout: 20,
        remote_cm_response_timeout: 20,
        max_cm_retries: 15,
        private_data: &pd,
    };
    let id = a.connect(Instant::ZERO, &p).unwrap();
    assert_eq!(id, 0x1122_3344);
    let (to, m) = take(&mut a, Instant::ZERO).remove(0);
    assert_eq!(
        to,
        MadAddress {
            gid: gid(2),
            qpn: 1,
            qkey: 0x8001_0000,
            pkey_index: 0
        }
    );

    let mut want = [0u8; 256];
    want[..24].copy_from_slice(&header(0x0102_0304_1122_3344, 0x0010));
    let c = 24; // CM message start
    want[c..c + 4].copy_from_slice(&[0x11, 0x22, 0x33, 0x44]); // local comm ID
    want[c + 8..c + 16].copy_from_slice(&[0, 0, 0, 0, 0x01, 0x06, 0x4E, 0x20]); // service ID
    want[c + 16..c + 24].copy_from_slice(&[0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11]); // CA GUID
                                                                                             // 28..32 local Q_Key 0 (RC)
    want[c + 32..c + 36].copy_from_slice(&[0xAB, 0xCD, 0xEF, 4]); // QPN, responder resources
    want[c + 36..c + 40].copy_from_slice(&[0, 0, 0, 2]); // EECN, initiator depth
                                                         // remote EECN 0; byte 43: remote CM timeout 20 (10100) <<3, RC 00, E2E 1
    want[c + 43] = 0b1010_0001;
    want[c + 44..c + 48].copy_from_slice(&[0x12, 0x34, 0x56, 0b1010_0111]); // PSN; local timeout 20, retry 7
    want[c + 48..c + 50].copy_from_slice(&[0xFF, 0xFF]); // P_Key
    want[c + 50] = 0x50 | 6; // MTU 5, RDC 0, RNR retry 6
    want[c + 51] = 0xF0 | 0x08; // max CM retries 15, SRQ, ext transport 0
    want[c + 52..c + 56].copy_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]); // permissive LIDs
    want[c + 56..c + 72].copy_from_slice(&gid(1));
    want[c + 72..c + 88].copy_from_slice(&gid(2));
    want[c + 88..c + 92].copy_from_slice(&[0xAB, 0xCD, 0xE0, 0x07]); // flow label, rate 7
    want[c + 92] = 0x28; // traffic class
    want[c + 93] = 64; // hop limit
    want[c + 94] = 0x00; // SL 0, not subnet local (routed)
    want[c + 95] = 17 << 3; // local ACK timeout: cm_ack_timeout(15, 16) = 17
                            // alternate path 96..140 zero
    want[c + 140..c + 232].copy_from_slice(&pd);
    assert_eq!(m.to_vec(), want.to_vec());

    // And the view reads every field back.
    let r = Req::new_checked(&m[..]).unwrap();
    assert_eq!(r.header().check_cm(), Ok(AttrId::Req));
    assert_eq!(r.local_comm_id(), 0x1122_3344);
    assert_eq!(r.service_id(), 0x0106_4E20);
    assert_eq!(r.local_ca_guid(), 0x0A0B_0C0D_0E0F_1011);
    assert_eq!(r.local_qpn(), 0xAB_CDEF);
    assert_eq!(r.responder_resources(), 4);
    assert_eq!(r.initiator_depth(), 2);
    assert_eq!(r.remote_cm_response_timeout(), 20);
    assert_eq!(r.transport_service_type(), 0);
    assert!(r.end_to_end_flow_control());
    assert_eq!(r.starting_psn(), 0x12_3456);
    assert_eq!(r.local_cm_response_timeout(), 20);
    assert_eq!(r.retry_count(), 7);
    assert_eq!(r.partition_key(), 0xFFFF);
    assert_eq!(r.path_mtu(), 5);
    assert!(!r.rdc_exists());
    assert_eq!(r.rnr_retry_count(), 6);
    assert_eq!(r.max_cm_retries(), 15);
    assert!(r.srq());
    assert_eq!(r.primary_local_lid(), 0xFFFF);
    assert_eq!(r.primary_flow_label(), 0xABCDE);
    assert_eq!(r.primary_packet_rate(), 7);
    assert_eq!(r.primary_traffic_class(), 0x28);
    assert_eq!(r.primary_hop_limit(), 64);
    assert_eq!(r.primary_local_ack_timeout(), 17);
    assert_eq!(r.private_data(), &pd[..]);
}

#[test]
fn setters_touch_only_their_bits() {
    // Fields sharing a byte: set each to all ones, then zero one, and
    // check the others kept their bits.
    let mut m = [0u8; 256];
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_remote_cm_response_timeout(31);
    r.set_transport_service_type(3);
    r.set_end_to_end_flow_control(true);
    assert_eq!(m[24 + 43], 0xFF);
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_transport_service_type(0);
    assert_eq!(m[24 + 43], 0b1111_1001);
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_primary_flow_label(0xF_FFFF);
    r.set_primary_packet_rate(0x3F);
    assert_eq!(&m[24 + 88..24 + 92], &[0xFF, 0xFF, 0xF0, 0x3F]);
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_primary_flow_label(0);
    assert_eq!(&m[24 + 88..24 + 92], &[0, 0, 0, 0x3F]);
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_local_qpn(0x00FF_FFFF);
    r.set_responder_resources(0x5A);
    r.set_local_qpn(0x12_3456);
    assert_eq!(&m[24 + 32..24 + 36], &[0x12, 0x34, 0x56, 0x5A]);
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_local_qpn(0xFFFF_FFFF); // 24 bits kept
    assert_eq!(&m[24 + 32..24 + 36], &[0xFF, 0xFF, 0xFF, 0x5A]);
}

#[test]
fn mra_rej_rep_rtu_layouts() {
    // MRA (table 107).
    let mut m = [0u8; 256];
    let mut v = Mra::new_checked(&mut m[..]).unwrap();
    v.header_mut().fill_cm(7, AttrId::Mra);
    v.set_local_comm_id(0xA1A2A3A4);
    v.set_remote_comm_id(0xB1B2B3B4);
    v.set_message_mraed(msg_code::REP);
    v.set_service_timeout(0x1F);
    v.set_private_data(&[0xEE; 222]).unwrap();
    let mut want = [0u8; 256];
    want[..24].copy_from_slice(&header(7, 0x11));
    want[24..32].copy_from_slice(&[0xA1, 0xA2, 0xA3, 0xA4, 0xB1, 0xB2, 0xB3, 0xB4]);
    want[32] = 0b0100_0000; // REP mraed, bits 7:6
    want[33] = 0xF8; // service timeout bits 7:3
    want[34..].fill(0xEE);
    assert_eq!(m.to_vec(), want.to_vec());
    assert_eq!(Mra::<&[u8]>::PRIVATE_DATA_LEN, 222);

    // REJ (table 108).
    let mut m = [0u8; 256];
    let mut v = Rej::new_checked(&mut m[..]).unwrap();
    v.header_mut().fill_cm(8, AttrId::Rej);
    v.set_local_comm_id(1);
    v.set_remote_comm_id(2);
    v.set_message_rejected(msg_code::OTHER);
    v.set_reason(rej_reason::CONSUMER_DEFINED);
    v.set_ari(&[0x55; 8]).unwrap();
    v.set_private_data(&[0x77; 148]).unwrap();
    let mut want = [0u8; 256];
    want[..24].copy_from_slice(&header(8, 0x12));
    want[24..32].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
    want[32] = 0b1000_0000; // other
    want[33] = 8 << 1; // ARI length bits 7:1
    want[34..36].copy_from_slice(&[0, 28]);
    want[36..44].fill(0x55);
    want[108..256].fill(0x77);
    assert_eq!(m.to_vec(), want.to_vec());
    let v = Rej::new_checked(&m[..]).unwrap();
    assert_eq!(v.ari(), &[0x55; 8]);
    assert_eq!(v.reason(), 28);
    assert_eq!(v.message_rejected(), 2);
    // Too long: refused, nothing written.
    let mut v = Rej::new_checked(&mut m[..]).unwrap();
    assert_eq!(v.set_ari(&[0; 73]), Err(MadError::Truncated));
    assert_eq!(v.set_private_data(&[0; 149]), Err(MadError::Truncated));
    assert_eq!(m[33], 8 << 1);

    // REP (table 110).
    let mut m = [0u8; 256];
    let mut v = Rep::new_checked(&mut m[..]).unwrap();
    v.header_mut().fill_cm(9, AttrId::Rep);
    v.set_local_comm_id(0x0102_0304);
    v.set_remote_comm_id(0x0506_0708);
    v.set_local_qkey(0x1111_1111);
    v.set_local_qpn(0x22_2222);
    v.set_local_eecn(0x33_3333);
    v.set_starting_psn(0x44_4444);
    v.set_responder_resources(0x55);
    v.set_initiator_depth(0x66);
    v.set_target_ack_delay(15);
    v.set_failover_accepted(1);
    v.set_end_to_end_flow_control(true);
    v.set_rnr_retry_count(7);
    v.set_srq(true);
    v.set_local_ca_guid(0x8877_6655_4433_2211);
    v.set_private_data(&[0x99; 196]).unwrap();
    let mut want = [0u8; 256];
    want[..24].copy_from_slice(&header(9, 0x13));
    want[24..28].copy_from_slice(&[1, 2, 3, 4]);
    want[28..32].copy_from_slice(&[5, 6, 7, 8]);
    want[32..36].fill(0x11);
    want[36..39].fill(0x22);
    want[40..43].fill(0x33);
    want[44..47].fill(0x44);
    want[48] = 0x55;
    want[49] = 0x66;
    want[50] = (15 << 3) | (1 << 1) | 1;
    want[51] = (7 << 5) | (1 << 4);
    want[52..60].copy_from_slice(&[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
    want[60..256].fill(0x99);
    assert_eq!(m.to_vec(), want.to_vec());
    let v = Rep::new_checked(&m[..]).unwrap();
    assert_eq!(
        (
            v.local_qpn(),
            v.starting_psn(),
            v.target_ack_delay(),
            v.failover_accepted()
        ),
        (0x22_2222, 0x44_4444, 15, 1)
    );
    assert!(v.srq() && v.end_to_end_flow_control());
    assert_eq!(v.rnr_retry_count(), 7);

    // RTU (table 111), DREQ (112/113), DREP.
    let mut m = [0u8; 256];
    let mut v = Rtu::new_checked(&mut m[..]).unwrap();
    v.set_local_comm_id(0xDEAD_BEEF);
    v.set_remote_comm_id(0xCAFE_F00D);
    v.set_private_data(&[1; 224]).unwrap();
    assert_eq!(
        &m[24..32],
        &[0xDE, 0xAD, 0xBE, 0xEF, 0xCA, 0xFE, 0xF0, 0x0D]
    );
    assert!(m[32..].iter().all(|&b| b == 1));
    let mut m = [0u8; 256];
    let mut v = Dreq::new_checked(&mut m[..]).unwrap();
    v.set_local_comm_id(1);
    v.set_remote_comm_id(2);
    v.set_remote_qpn(0xAB_CDEF);
    v.set_private_data(&[3; 220]).unwrap();
    assert_eq!(&m[24..36], &[0, 0, 0, 1, 0, 0, 0, 2, 0xAB, 0xCD, 0xEF, 0]);
    assert!(m[36..].iter().all(|&b| b == 3));
    let mut m = [0u8; 256];
    let mut v = Drep::new_checked(&mut m[..]).unwrap();
    v.set_private_data(&[4; 224]).unwrap();
    assert!(m[32..].iter().all(|&b| b == 4));
    assert!(m[..32].iter().all(|&b| b == 0));
}

#[test]
fn sidr_layouts() {
    let mut m = [0u8; 256];
    let mut v = SidrReq::new_checked(&mut m[..]).unwrap();
    v.header_mut().fill_cm(0x10, AttrId::SidrReq);
    v.set_request_id(0x0A0B_0C0D);
    v.set_partition_key(0xFFFF);
    v.set_service_id(0x0111_1234);
    v.set_private_data(&[5; 216]).unwrap();
    let mut want = [0u8; 256];
    want[..24].copy_from_slice(&header(0x10, 0x17));
    want[24..28].copy_from_slice(&[0x0A, 0x0B, 0x0C, 0x0D]);
    want[28..30].copy_from_slice(&[0xFF, 0xFF]);
    want[32..40].copy_from_slice(&[0, 0, 0, 0, 0x01, 0x11, 0x12, 0x34]);
    want[40..].fill(5);
    assert_eq!(m.to_vec(), want.to_vec());

    let mut m = [0u8; 256];
    let mut v = SidrRep::new_checked(&mut m[..]).unwrap();
    v.header_mut().fill_cm(0x11, AttrId::SidrRep);
    v.set_request_id(0x0A0B_0C0D);
    v.set_status(sidr_status::VALID);
    v.set_qpn(0x12_3456);
    v.set_service_id(0x0111_1234);
    v.set_qkey(0x1234_5678);
    v.set_private_data(&[6; 136]).unwrap();
    let mut want = [0u8; 256];
    want[..24].copy_from_slice(&header(0x11, 0x18));
    want[24..28].copy_from_slice(&[0x0A, 0x0B, 0x0C, 0x0D]);
    want[32..35].copy_from_slice(&[0x12, 0x34, 0x56]);
    want[36..44].copy_from_slice(&[0, 0, 0, 0, 0x01, 0x11, 0x12, 0x34]);
    want[44..48].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
    want[120..].fill(6);
    assert_eq!(m.to_vec(), want.to_vec());
}

#[test]
fn header_checks_name_what_is_wrong() {
    let mut m = [0u8; 256];
    m[..24].copy_from_slice(&header(1, 0x10));
    assert_eq!(
        MadHeader::new_checked(&m[..]).unwrap().check_cm(),
        Ok(AttrId::Req)
    );
    assert_eq!(
        MadHeader::new_checked(&m[..255]).err(),
        Some(MadError::Truncated)
    );
    let bad = |i: usize, v: u8| {
        let mut x = m;
        x[i] = v;
        MadHeader::new_checked(&x[..]).unwrap().check_cm()
    };
    assert_eq!(bad(0, 2), Err(MadError::BaseVersion));
    assert_eq!(bad(1, 0x04), Err(MadError::Class));
    assert_eq!(bad(2, 1), Err(MadError::ClassVersion));
    assert_eq!(bad(3, 0x81), Err(MadError::Method));
    assert_eq!(bad(17, 0x19), Err(MadError::Attribute)); // LAP
    assert_eq!(bad(17, 0x01), Err(MadError::Attribute)); // ClassPortInfo
    assert_eq!(bad(17, 0x42), Err(MadError::Attribute));
    for a in 0x10..=0x18u16 {
        assert_eq!(AttrId::from_u16(a).map(|x| x as u16), Some(a));
    }
}

#[test]
fn private_data_sizes_fill_the_mad() {
    // Each message's private data ends at byte 256 (IBA 12.6).
    assert_eq!(Req::<&[u8]>::PRIVATE_DATA_OFFSET + REQ_PRIVATE_DATA, 256);
    assert_eq!(Mra::<&[u8]>::PRIVATE_DATA_OFFSET + MRA_PRIVATE_DATA, 256);
    assert_eq!(Rej::<&[u8]>::PRIVATE_DATA_OFFSET + REJ_PRIVATE_DATA, 256);
    assert_eq!(Rep::<&[u8]>::PRIVATE_DATA_OFFSET + REP_PRIVATE_DATA, 256);
    assert_eq!(Rtu::<&[u8]>::PRIVATE_DATA_OFFSET + RTU_PRIVATE_DATA, 256);
    assert_eq!(Dreq::<&[u8]>::PRIVATE_DATA_OFFSET + DREQ_PRIVATE_DATA, 256);
    assert_eq!(Drep::<&[u8]>::PRIVATE_DATA_OFFSET + DREP_PRIVATE_DATA, 256);
    assert_eq!(
        SidrReq::<&[u8]>::PRIVATE_DATA_OFFSET + SIDR_REQ_PRIVATE_DATA,
        256
    );
    assert_eq!(
        SidrRep::<&[u8]>::PRIVATE_DATA_OFFSET + SIDR_REP_PRIVATE_DATA,
        256
    );
    assert_eq!(
        (
            REQ_PRIVATE_DATA,
            MRA_PRIVATE_DATA,
            REJ_PRIVATE_DATA,
            REP_PRIVATE_DATA,
            RTU_PRIVATE_DATA
        ),
        (92, 222, 148, 196, 224)
    );
    assert_eq!(
        (
            DREQ_PRIVATE_DATA,
            DREP_PRIVATE_DATA,
            SIDR_REQ_PRIVATE_DATA,
            SIDR_REP_PRIVATE_DATA
        ),
        (220, 224, 216, 136)
    );
    assert!(Req::new_checked(&[0u8; 255][..]).is_err());
}

#[test]
fn iba_time_is_4096ns_times_two_to_the_t() {
    use proto::cm::iba_time;
    use std::time::Duration;
    assert_eq!(iba_time(0), Duration::from_nanos(4096));
    assert_eq!(iba_time(8), Duration::from_nanos(1_048_576));
    assert_eq!(iba_time(20), Duration::from_nanos(4096 << 20)); // ~4.3 s
    assert_eq!(iba_time(31), iba_time(200));
}
