// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * roce_steer: XDP program of roce-xdp.
 *
 * Steers RoCE v2 frames (UDP destination port 4791 over IPv4 or IPv6, with
 * or without one 802.1Q tag) to the AF_XDP socket bound to the receive
 * queue (XSKMAP[rx_queue_index]); passes everything else (ARP, ND, ICMP,
 * TCP, other UDP, IP fragments, malformed headers) to the kernel stack.
 *
 * Multi-buffer capable (SEC "xdp.frags"): only the linear part of the
 * frame is parsed (the headers, 14 + 4 + 40 + 8 bytes at most, always sit
 * there), so 4096-byte path-MTU frames spanning several buffers work.
 *
 * Test impairments (off by default), configured through `config`:
 *   drop_ppm - drop a RoCE frame with probability drop_ppm / 1e6
 *   ce_ppm   - mark a RoCE frame's ECN field CE with probability ce_ppm / 1e6
 *              (only ECN-capable frames, as a switch would; the IPv4
 *              checksum is fixed incrementally, RFC 1624)
 *
 * Rebuild: scripts/check-ebpf.sh --update (the object is committed beside
 * this file and CI checks that a rebuild is byte-identical).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ROCE_V2_PORT 4791
#define MAX_QUEUES 64

#ifndef ETH_P_8021Q
#define ETH_P_8021Q 0x8100
#endif

/* Counter indices of the per-CPU `counters` array (keep in sync with
 * engine/src/nic/loader.rs). */
enum counter {
	CNT_SEEN = 0,          /* every frame the program ran on */
	CNT_REDIRECTED = 1,    /* RoCE frames handed to bpf_redirect_map */
	CNT_PASSED = 2,        /* non-RoCE frames passed to the kernel */
	CNT_NO_SOCKET = 3,     /* RoCE frames for a queue with no socket bound */
	CNT_DROPPED_IMPAIRMENT = 4, /* RoCE frames dropped by drop_ppm */
	CNT_CE_MARKED = 5,     /* RoCE frames marked CE by ce_ppm */
	CNT_MAX = 6,
};

/* Index 0 of the `config` array. */
struct steer_config {
	__u32 drop_ppm;
	__u32 ce_ppm;
};

struct vlan_hdr {
	__be16 tci;
	__be16 encapsulated_proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_config);
} config SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);

	if (c)
		*c += 1;
}

static __always_inline int pass(void)
{
	count(CNT_PASSED);
	return XDP_PASS;
}

/* 1 with probability ppm / 1e6. */
static __always_inline int chance(__u32 ppm)
{
	return ppm && (bpf_get_prandom_u32() % 1000000) < ppm;
}

/* RFC 1624 incremental update of a 16-bit one's complement checksum. */
static __always_inline __u16 csum_replace(__u16 check, __u16 old, __u16 new)
{
	__u32 sum = (__u16)~check + (__u16)~old + new;

	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

SEC("xdp.frags")
int roce_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip4 = 0;
	struct ipv6hdr *ip6 = 0;
	struct udphdr *udp;
	void *l3;
	__u16 proto;
	__u32 key = 0, queue;
	struct steer_config *cfg;

	count(CNT_SEEN);

	if ((void *)(eth + 1) > data_end)
		return pass();
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_hdr *vlan = l3;

		if ((void *)(vlan + 1) > data_end)
			return pass();
		proto = vlan->encapsulated_proto;
		l3 = vlan + 1;
	}

	if (proto == bpf_htons(ETH_P_IP)) {
		ip4 = l3;
		if ((void *)(ip4 + 1) > data_end)
			return pass();
		if (ip4->version != 4 || ip4->ihl < 5)
			return pass();
		/* Fragments (MF set or non-zero offset) go to the kernel. */
		if (ip4->frag_off & bpf_htons(0x3fff))
			return pass();
		if (ip4->protocol != IPPROTO_UDP)
			return pass();
		udp = (void *)ip4 + ip4->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		ip6 = l3;
		if ((void *)(ip6 + 1) > data_end)
			return pass();
		if (ip6->version != 6 || ip6->nexthdr != IPPROTO_UDP)
			return pass();
		udp = (void *)(ip6 + 1);
	} else {
		return pass();
	}

	if ((void *)(udp + 1) > data_end)
		return pass();
	if (udp->dest != bpf_htons(ROCE_V2_PORT))
		return pass();

	/* A RoCE v2 frame. */
	cfg = bpf_map_lookup_elem(&config, &key);
	if (cfg) {
		if (chance(cfg->drop_ppm)) {
			count(CNT_DROPPED_IMPAIRMENT);
			return XDP_DROP;
		}
		if (chance(cfg->ce_ppm)) {
			if (ip4 && (ip4->tos & 3)) {
				__u16 *word = (__u16 *)ip4; /* version/ihl + tos */
				__u16 old = *word;

				ip4->tos |= 3;
				ip4->check = csum_replace(ip4->check, old, *word);
				count(CNT_CE_MARKED);
			} else if (ip6 && (ip6->flow_lbl[0] & 0x30)) {
				/* Traffic class spans priority(4) and flow_lbl[0]
				 * high nibble; ECN = its low 2 bits. */
				ip6->flow_lbl[0] |= 0x30;
				count(CNT_CE_MARKED);
			}
		}
	}

	queue = ctx->rx_queue_index;
	if (!bpf_map_lookup_elem(&xsks_map, &queue)) {
		count(CNT_NO_SOCKET);
		return XDP_PASS;
	}
	count(CNT_REDIRECTED);
	return bpf_redirect_map(&xsks_map, queue, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
