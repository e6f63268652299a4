//! Address handles (UD): `ibv_create_ah`, `ibv_destroy_ah`, and
//! libibverbs' own `ibv_init_ah_from_wc` / `ibv_create_ah_from_wc`, which
//! read the GRH area at the start of a UD receive buffer
//! (docs/unreliable-datagram.md).
//!
//! An address handle is the engine's handle of the same protection domain
//! (`Endpoint::create_ah`): the destination GID's IP, the MAC the kernel's
//! neighbour table gives for it (as `ibv_modify_qp` resolves an RC QP's
//! address vector; the device's own GID is its own MAC: loopback), the
//! GRH's traffic class, hop limit and flow label.

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

use engine::rc::RemoteAddress;
use engine::ud::AhAttr;

use super::queue_pairs::ip_of_gid;
use super::regions::{pd, Pd};
use super::{engine, errno_of, gid, minus_one, object, pointer, status};
use crate::abi::*;
use crate::handles::{self, Kind, Object};
use crate::identity::{self, GID_TABLE_LEN};

/// An address handle: the engine's handle `number`, in PD `pd`.
#[repr(C)]
pub(super) struct Ah {
    c: UnsafeCell<ibv_ah>,
    pub(super) number: u32,
    pd: *const Pd,
}
// SAFETY: `c` is written before the handle is handed out, read-only
// after; the rest is immutable.
unsafe impl Send for Ah {}
// SAFETY: as above.
unsafe impl Sync for Ah {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Ah {
    const KIND: Kind = Kind::Ah;
    const PUBLIC: usize = 0;
}

/// The live address handle at `p`: a NULL, unknown or destroyed one is
/// `EINVAL` (where rxe's provider would read through the pointer).
pub(super) fn ah<'a>(p: *const ibv_ah) -> Result<&'a Ah, c_int> {
    object::<Ah, _>(p)
}

/// `ibv_create_ah`'s refusals as the kernel's (`rdma_check_ah_attr`,
/// `rxe_av_chk_attr`): `EINVAL`, with one line saying why.
fn refuse(what: &str) -> c_int {
    eprintln!("roce-xdp: ibv_create_ah: {what}");
    libc::EINVAL
}

/// The engine's form of `attr` (checked as the kernel checks it), with
/// the destination's MAC resolved.
fn ah_attr(p: *mut ibv_pd, a: &ibv_ah_attr) -> Result<AhAttr, c_int> {
    let shell = engine()?;
    if a.port_num != identity::PORT {
        return Err(refuse("port_num must be 1"));
    }
    // RoCE: every address vector has a GRH (rdma_check_ah_attr).
    if a.is_global == 0 {
        return Err(refuse(
            "the address has no GRH (is_global 0): on RoCE give a GID index",
        ));
    }
    // SAFETY: `p` is a live PD (checked by the caller); its context was
    // set at alloc.
    let ctx = unsafe { (*p).context };
    if u32::from(a.grh.sgid_index) >= GID_TABLE_LEN
        || gid(ctx, identity::PORT.into(), a.grh.sgid_index.into()).is_err()
    {
        return Err(refuse("sgid_index names no GID of the port"));
    }
    let ip = ip_of_gid(a.grh.dgid);
    if !ip.is_ipv4() {
        return Err(refuse(
            "the destination GID is not an IPv4-mapped RoCE v2 GID",
        ));
    }
    // The kernel resolves the neighbour as it creates the handle
    // (ib_resolve_eth_dmac): a neighbour that does not answer times out.
    let mac = shell.resolve_mac(ip).map_err(|e| {
        eprintln!("roce-xdp: ibv_create_ah: cannot resolve the MAC of {ip}: {e}");
        libc::ETIMEDOUT
    })?;
    Ok(AhAttr {
        remote: RemoteAddress {
            mac,
            ip,
            vlan: None,
            ..RemoteAddress::default()
        },
        traffic_class: a.grh.traffic_class,
        // The route's, as the kernel resolves it (ib_resolve_eth_dmac).
        hop_limit: shell.route_hop_limit(ip),
        // IPv4 carries no flow label; the engine keeps 20 bits.
        flow_label: a.grh.flow_label & 0xF_FFFF,
        sgid_index: a.grh.sgid_index,
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_create_ah(p: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    pointer((|| {
        let shell = engine()?;
        let owner = pd(p)?;
        // SAFETY: a non-NULL `attr` points to the attributes (point 1).
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        let engine_attr = ah_attr(p, a)?;
        let number = shell
            .create_ah(owner.number, &engine_attr)
            .map_err(|e| errno_of(&e))?;
        let b = Box::new(Ah {
            c: UnsafeCell::new(ibv_ah {
                // SAFETY: `p` is a live PD; its context was set at alloc.
                context: unsafe { (*p).context },
                pd: p,
                handle: number,
            }),
            number,
            pd: owner,
        });
        owner.users.fetch_add(1, Ordering::AcqRel);
        Ok(handles::publish(b))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_ah(p: *mut ibv_ah) -> c_int {
    status((|| {
        let shell = engine()?;
        let a = ah(p)?;
        shell.destroy_ah(a.number).map_err(|e| errno_of(&e))?;
        // SAFETY: a PD with address handles cannot be freed (its count
        // holds this one), so it is alive.
        unsafe { (*a.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: the program destroys the handle: it uses it no more.
        unsafe { handles::retire::<Ah, _>(p) }.map(drop)
    })())
}

/// The GID index of `g` among the port's RoCE v2 GIDs (libibverbs'
/// `ibv_find_gid_index`: past the table's end, `ibv_query_gid` fails
/// with `EINVAL`).
fn find_gid_index(ctx: *const ibv_context, port: u8, g: &[u8; 16]) -> Result<u8, c_int> {
    (0..GID_TABLE_LEN)
        .find(|&i| gid(ctx, port.into(), i).is_ok_and(|x| &x == g))
        .map(|i| i as u8)
        .ok_or(libc::EINVAL)
}

/// The IP version of the GRH area (libibverbs' `get_grh_header_version`):
/// an IPv6 header's version 6, unless the bytes at 20 are an IPv4 header
/// whose checksum holds (RoCE v2 over IPv4 leaves 20 zero bytes first);
/// `EPROTONOSUPPORT` when neither.
fn grh_version(b: &[u8; 40]) -> Result<u8, c_int> {
    let ip4 = &b[20..40];
    if b[0] >> 4 != 6 {
        return if ip4[0] >> 4 == 4 {
            Ok(4)
        } else {
            Err(libc::EPROTONOSUPPORT)
        };
    }
    if ip4[0] & 0xf != 5 {
        return Ok(6);
    }
    let mut sum: u32 = ip4
        .chunks(2)
        .enumerate()
        .filter(|&(i, _)| i != 5)
        .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let check = !(sum as u16);
    Ok(if check == u16::from_be_bytes([ip4[10], ip4[11]]) {
        4
    } else {
        6
    })
}

/// `ibv_init_ah_from_wc` as libibverbs computes it: the address handle
/// that answers the sender of a UD receive, from its completion and the
/// 40-byte GRH area its buffer begins with.
fn init_ah_from_wc(
    ctx: *const ibv_context,
    port: u8,
    wc: &ibv_wc,
    grh: &[u8; 40],
) -> Result<ibv_ah_attr, c_int> {
    let mut a = ibv_ah_attr::default();
    let flow = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
    a.grh.flow_label = flow & 0xF_FFFF;
    a.dlid = wc.slid;
    a.sl = wc.sl;
    a.src_path_bits = wc.dlid_path_bits;
    a.port_num = port;
    if wc.wc_flags & IBV_WC_GRH == 0 {
        return Ok(a);
    }
    a.is_global = 1;
    match grh_version(grh)? {
        4 => {
            let ip4 = &grh[20..40];
            let (saddr, daddr) = (&ip4[12..16], &ip4[16..20]);
            // No multicast GID is in the table.
            if daddr[0] & 0xf0 == 0xe0 {
                return Err(libc::EINVAL);
            }
            let mapped = |x: &[u8]| {
                let mut g = [0u8; 16];
                g[10] = 0xff;
                g[11] = 0xff;
                g[12..].copy_from_slice(x);
                g
            };
            a.grh.sgid_index = find_gid_index(ctx, port, &mapped(daddr))?;
            a.grh.dgid = mapped(saddr);
            a.grh.hop_limit = ip4[8];
            a.grh.traffic_class = ip4[1];
        }
        _ => {
            let sgid: [u8; 16] = grh[8..24].try_into().unwrap_or_default();
            let dgid: [u8; 16] = grh[24..40].try_into().unwrap_or_default();
            if dgid[0] == 0xff {
                return Err(libc::EINVAL);
            }
            // Next header UDP: RoCE v2 (the port's GIDs' type); 0x1b,
            // RoCE v1, has no GID here.
            match grh[6] {
                17 => {}
                0x1b => return Err(libc::EINVAL),
                _ => return Err(libc::EPROTONOSUPPORT),
            }
            a.grh.dgid = sgid;
            a.grh.sgid_index = find_gid_index(ctx, port, &dgid)?;
            a.grh.hop_limit = grh[7];
            a.grh.traffic_class = ((flow >> 20) & 0xff) as u8;
        }
    }
    Ok(a)
}

#[no_mangle]
unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    out: *mut ibv_ah_attr,
) -> c_int {
    minus_one((|| {
        super::context(ctx)?;
        // SAFETY: non-NULL pointers point to a completion, the 40-byte
        // GRH area and an ibv_ah_attr (the contract, point 1).
        let (w, g) = unsafe { (wc.as_ref(), grh.cast::<[u8; 40]>().as_ref()) };
        let (Some(w), Some(g), false) = (w, g, out.is_null()) else {
            return Err(libc::EINVAL);
        };
        let a = init_ah_from_wc(ctx, port, w, g)?;
        // SAFETY: `out` points to an ibv_ah_attr (checked non-NULL).
        unsafe { out.write(a) };
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_create_ah_from_wc(
    p: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port: u8,
) -> *mut ibv_ah {
    let ctx = match pd(p) {
        // SAFETY: `p` is a live PD; its context was set at alloc.
        Ok(_) => unsafe { (*p).context },
        Err(e) => return pointer(Err(e)),
    };
    let mut a = ibv_ah_attr::default();
    // SAFETY: the program's pointers, as `ibv_init_ah_from_wc` takes them.
    if unsafe { ibv_init_ah_from_wc(ctx, port, wc, grh, &mut a) } != 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `p` is a live PD, `a` a valid ibv_ah_attr.
    unsafe { ibv_create_ah(p, &mut a) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RoCE v2 GRH area over IPv4: 20 zero bytes, then the header.
    fn ipv4_area(src: [u8; 4], dst: [u8; 4], tos: u8, ttl: u8) -> [u8; 40] {
        let mut b = [0u8; 40];
        let h = &mut b[20..];
        h[0] = 0x45;
        h[1] = tos;
        h[2..4].copy_from_slice(&60u16.to_be_bytes());
        h[6] = 0x40;
        h[8] = ttl;
        h[9] = 17;
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let mut sum: u32 = h
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        b
    }

    #[test]
    fn grh_version_as_libibverbs() {
        let v4 = ipv4_area([10, 0, 0, 1], [10, 0, 0, 2], 0, 64);
        assert_eq!(grh_version(&v4), Ok(4));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[6] = 17;
        assert_eq!(grh_version(&v6), Ok(6));
        assert_eq!(grh_version(&[0u8; 40]), Err(libc::EPROTONOSUPPORT));
        // An IPv6 header whose bytes at 20 look like an IPv4 header with
        // a wrong checksum stays IPv6.
        let mut mixed = ipv4_area([1, 2, 3, 4], [5, 6, 7, 8], 0, 1);
        mixed[0] = 0x60;
        assert_eq!(grh_version(&mixed), Ok(4));
        mixed[30] ^= 1;
        assert_eq!(grh_version(&mixed), Ok(6));
    }
}
