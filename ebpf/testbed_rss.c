// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * testbed_rss: a tc (clsact egress) program for the test beds only, never
 * loaded by the engine.
 *
 * Makes a Linux bridge spread flows over a multi-queue veth by a hash of
 * the flow, as RSS spreads them over a NIC's queues. Attached to the
 * egress of the bridge's port that faces the engine under test
 * (engine/src/testbed/netns.rs, VethPair::create_bridged).
 *
 * Why it is needed: a veth delivers a frame on the receive queue of the
 * number its peer transmitted it on, and a forwarded frame keeps the queue
 * number it was received with (skb->queue_mapping), which the kernel's
 * transmit-queue choice (skb_tx_hash) prefers over the flow hash. So a
 * frame an engine sends from its queue k arrives at the other engine on a
 * queue derived from k, not from its flow: on a NIC it would be the RSS
 * hash of addresses and ports. This program sets skb->queue_mapping to
 * (flow hash mod 256) + 1, which the kernel reads as "received on queue
 * (flow hash mod 256)", so the bridge's port picks transmit queue
 * (flow hash mod 256) mod (number of queues): the same for every frame of
 * a flow, spread over the queues across flows.
 *
 * Rebuild: scripts/check-ebpf.sh --update (the object is committed beside
 * this file and CI checks that a rebuild is byte-identical).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int testbed_rss(struct __sk_buff *skb)
{
	/* The flow hash of the 5-tuple (computed now if not yet). */
	__u32 hash = bpf_get_hash_recalc(skb);

	/* queue_mapping = recorded receive queue + 1 (skb_record_rx_queue);
	 * kept below 257 so that skb_tx_hash's reduction loop stays short. */
	skb->queue_mapping = (hash & 0xff) + 1;
	return TC_ACT_OK;
}

char _license[] SEC("license") = "Dual BSD/GPL";
