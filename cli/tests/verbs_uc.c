/* UC QPs through the drop-in, as a verbs program sees them (compiled
 * against rdma-core's verbs.h by tests/verbs_drop_in.rs, run under
 * `roce-xdp exec`), connected to a peer without an engine (nothing ever
 * answers, and UC needs no answer):
 * - ibv_create_qp(IBV_QPT_UC), and ibv_query_qp says UC;
 * - ibv_modify_qp takes UC's masks (IBA 11.2.4.2) and refuses RC's
 *   (EINVAL): INIT->RTR with MAX_DEST_RD_ATOMIC/MIN_RNR_TIMER or without
 *   PATH_MTU, RTR->RTS with TIMEOUT;
 * - ibv_post_send refuses RDMA READ, atomics and SEND with invalidate
 *   (EINVAL, *bad_wr the request, as rxe);
 * - a SEND and a WRITE with immediate complete successfully as they leave.
 * Usage: verbs_uc PEER_IPV4. Exit 0 and "ok" when all hold. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); return 1; } while (0)

int main(int argc, char **argv)
{
	if (argc != 2)
		FAIL("usage: %s PEER_IPV4", argv[0]);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n != 1)
		FAIL("expected one device, got %d", n);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		FAIL("ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096] __attribute__((aligned(8)));
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !mr || !cq)
		FAIL("pd/mr/cq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		FAIL("ibv_create_qp(UC): %s", strerror(errno));
	if (qp->qp_type != IBV_QPT_UC)
		FAIL("qp->qp_type %d", qp->qp_type);

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x123;
	a.rq_psn = 0x42;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid.raw[10] = 0xff;
	a.ah_attr.grh.dgid.raw[11] = 0xff;
	if (inet_pton(AF_INET, argv[1], &a.ah_attr.grh.dgid.raw[12]) != 1)
		FAIL("bad address %s", argv[1]);
	int uc_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	int r = ibv_modify_qp(qp, &a, uc_rtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r != EINVAL)
		FAIL("RTR with RC's mask: expected EINVAL, got %d", r);
	r = ibv_modify_qp(qp, &a, uc_rtr & ~IBV_QP_PATH_MTU);
	if (r != EINVAL)
		FAIL("RTR without PATH_MTU: expected EINVAL, got %d", r);
	if (ibv_modify_qp(qp, &a, uc_rtr))
		FAIL("RTR with UC's mask");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x77;
	a.timeout = 14;
	r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT);
	if (r != EINVAL)
		FAIL("RTS with TIMEOUT: expected EINVAL, got %d", r);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		FAIL("RTS with UC's mask");

	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	if (ibv_query_qp(qp, &q, IBV_QP_STATE, &qi))
		FAIL("ibv_query_qp");
	if (qi.qp_type != IBV_QPT_UC || q.qp_state != IBV_QPS_RTS || q.path_mtu != IBV_MTU_1024 ||
	    q.sq_psn != 0x77 || q.rq_psn != 0x42 || q.dest_qp_num != 0x123 ||
	    q.qp_access_flags != IBV_ACCESS_REMOTE_WRITE)
		FAIL("ibv_query_qp: type %d state %d mtu %d sq_psn %#x rq_psn %#x dest %#x access %#x",
		     qi.qp_type, q.qp_state, q.path_mtu, q.sq_psn, q.rq_psn, q.dest_qp_num,
		     q.qp_access_flags);

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	enum ibv_wr_opcode refused[] = { IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
					 IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV };
	for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
					  .opcode = refused[i], .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
		wr.wr.rdma.remote_addr = 0x1000;
		wr.wr.rdma.rkey = 5;
		r = ibv_post_send(qp, &wr, &bad);
		if (r != EINVAL || bad != &wr)
			FAIL("opcode %d on UC: expected EINVAL, got %d", refused[i], r);
	}

	sge.length = 2500;
	struct ibv_send_wr w2 = { .wr_id = 8, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(9) };
	w2.wr.rdma.remote_addr = 0x1000;
	w2.wr.rdma.rkey = 5;
	struct ibv_send_wr w1 = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .next = &w2,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (ibv_post_send(qp, &w1, &bad))
		FAIL("ibv_post_send SEND + WRITE_WITH_IMM");
	struct ibv_wc wc[2];
	int got = 0;
	time_t end = time(NULL) + 30;
	while (got < 2 && time(NULL) < end)
		got += ibv_poll_cq(cq, 2 - got, wc + got);
	if (got != 2 || wc[0].wr_id != 7 || wc[0].status != IBV_WC_SUCCESS ||
	    wc[0].opcode != IBV_WC_SEND || wc[1].wr_id != 8 || wc[1].status != IBV_WC_SUCCESS ||
	    wc[1].opcode != IBV_WC_RDMA_WRITE)
		FAIL("expected two successful completions, got %d (%s, %s)", got,
		     got > 0 ? ibv_wc_status_str(wc[0].status) : "-",
		     got > 1 ? ibv_wc_status_str(wc[1].status) : "-");

	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		FAIL("cleanup");
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
