# interop/tshark-roce.sh - the tshark options both interop test beds read
# their RoCE captures with (source it from bash): the array TSHARK_ROCE.
#
# tshark 4.0 offers a RoCE frame's payload to heuristic dissectors that
# guess a protocol from its first bytes, and some of them then call
# application data malformed (interop/README.md, "tshark note"):
# - rpcrdma_infiniband (RPC-over-RDMA) claims 1-byte SEND payloads;
# - eth_over_ib (Ethernet over InfiniBand) reads a payload's first two
#   bytes as an EtherType: perftest's random data began 37 73 once, and
#   the dissector of EtherType 0x3773 (C15) threw.
# Every frame is still decoded as InfiniBand (BTH and extension headers).
TSHARK_ROCE=(--disable-heuristic rpcrdma_infiniband --disable-heuristic eth_over_ib)
