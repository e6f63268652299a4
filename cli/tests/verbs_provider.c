/* The drop-in libibverbs as a provider, as a verbs program sees it
 * (compiled against rdma-core's verbs.h by tests/verbs_provider.rs, run
 * under `roce-xdp exec`). One check a subcommand; each prints "ok" and
 * exits 0 when everything holds, else "FAIL: ..." and exits 1.
 *
 *   loopback   two RC QPs of the one device connected to each other:
 *              RDMA WRITE, RDMA READ, SEND/RECV (with immediate) and a
 *              fetch-and-add, every byte and completion checked;
 *   access     a QP whose qp_access_flags lack REMOTE_WRITE / REMOTE_READ
 *              refuses a WRITE / READ that its region would allow: the
 *              requester gets IBV_WC_REM_ACCESS_ERR, the region is
 *              untouched; granted again after a reset, it works;
 *   checks     argument checks with rxe's errnos (ibv_reg_mr, ibv_create_cq,
 *              ibv_create_qp, ibv_modify_qp), ibv_rereg_mr, ibv_resize_cq,
 *              an empty GID table entry, the device's
 *              attributes (vendor_id, ibv_query_device_ex), the string
 *              helpers; sends whose SGE names no region, a region of
 *              another PD or bytes past its region (RC and UD, one SGE
 *              and a list): posted, then LOC_QP_OP_ERR (SEND, WRITE) or
 *              LOC_PROT_ERR (READ), the next request flushed, nothing
 *              sent, as rxe; receives whose SGE names no region, a region
 *              of another PD, bytes past its region or a region without
 *              LOCAL_WRITE (RC one SGE and a list, an SRQ list, UD one
 *              SGE and a list): posted, then LOC_QP_OP_ERR when a message
 *              reaches the entry (RC: the SEND REM_OP_ERR), the entries
 *              before it filled, a SEND of 0 bytes succeeding, as rxe; a
 *              UD send through an AH of another PD: posted, LOC_QP_OP_ERR;
 *   bad-input  a wrong or destroyed handle and NULL pointers get an error
 *              return, never a crash; an lkey of another PD gets an error
 *              completion;
 *   windows    memory windows over a region without remote rights: type 1
 *              bound by ibv_bind_mw and type 2 by a BIND_MW work request,
 *              WRITE and READ through the window's R_Key (bytes checked),
 *              refused outside its range; LOCAL_INV, SEND_WITH_INV (the
 *              receive names the key), a zero-length bind and
 *              ibv_dealloc_mw each close a window, and an access after is
 *              refused; a bind of the wrong type, an unknown type, and
 *              the deregistration of a region with a window bound are
 *              refused;
 *   sgl        scatter/gather lists and inline data: the caps rxe grants
 *              (max_sge 32, max_inline_data from the WQE's room), SEND,
 *              WRITE and READ with lists of up to 32 entries (zero-length
 *              ones too, boundaries inside packets) byte for byte, inline
 *              SEND and WRITE from unregistered buffers reused at once, a
 *              zero-SGE WRITE_WITH_IMM into a zero-SGE receive, EINVAL for
 *              more SGEs or inline bytes than the QP's, a list entry of
 *              another PD (LOC_QP_OP_ERR, nothing written) and a receive
 *              list too short (LOC_LEN_ERR);
 *   ud         UD QPs and address handles on the device's own GID
 *              (loopback): the caps granted, the UD transitions and their
 *              masks, ibv_query_qp; SEND and SEND_WITH_IMM checked byte
 *              for byte with the 40-byte GRH area (20 zero bytes, then
 *              the IPv4 header), src_qp, wc_flags, byte_len, sl (the
 *              RoCE packet type, as ConnectX reports it);
 *              ibv_init_ah_from_wc / ibv_create_ah_from_wc answering
 *              back; send SGE lists and inline data gathered, receive
 *              SGE lists scattered (past the staging rings' ends);
 *              the extended API (ibv_wr_set_ud_addr, ibv_wr_send)
 *              into an extended CQ (ibv_wc_read_src_qp); bad input: a
 *              NULL or destroyed AH, an RC opcode, two SGEs (EINVAL), a
 *              send longer than the MTU (completes, nothing arrives), a
 *              wrong Q_Key (dropped), a receive buffer too short
 *              (LOC_QP_OP_ERR); bad AH attributes. With UD_HOLD set it
 *              prints "hold" and waits for stdin to close before it
 *              exits (the test reads the engine's counters meanwhile);
 *   srq        a shared receive queue two RC QPs receive through: SENDs
 *              of both land in its receives in order (bytes checked), the
 *              armed limit raises one IBV_EVENT_SRQ_LIMIT_REACHED through
 *              ibv_get_async_event and disarms; receives of SGE lists
 *              up to max_srq_sge (27, rxe's) scatter in list order; a QP
 *              of the SRQ moved to error raises one
 *              IBV_EVENT_QP_LAST_WQE_REACHED; UC and UD QPs on an SRQ
 *              (a datagram scattered across an SRQ list); rxe's errnos for its
 *              creation, modify, posts (full: ENOMEM, too many SGEs:
 *              EINVAL), ibv_post_recv on a QP of the SRQ (EINVAL),
 *              destroy while a QP uses it (EBUSY), and bad handles;
 *   contexts   two contexts of the one device, as UCX and Open MPI open
 *              it: each its own async_fd; an SRQ limit event of the
 *              second context's SRQ, reached by a SEND from a QP of the
 *              first, arrives on the second's async_fd only; closing the
 *              second leaves the first working.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, " (line %d)\n", __LINE__); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

static struct ibv_context *ctx;
static union ibv_gid gid1;

static void open_device(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "expected one device, got %d", n);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(list);
	CHECK(ibv_query_gid(ctx, 1, 1, &gid1) == 0, "ibv_query_gid 1");
}

struct side {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

#define LEN 8192

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp: %s", strerror(errno));
	CHECK(qp->state == IBV_QPS_RESET, "a new QP is in RESET");
	return qp;
}

static void side_open(struct side *s, int access)
{
	s->pd = ibv_alloc_pd(ctx);
	s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(s->pd && s->cq, "pd/cq: %s", strerror(errno));
	s->buf = aligned_alloc(64, LEN);
	memset(s->buf, 0, LEN);
	s->mr = ibv_reg_mr(s->pd, s->buf, LEN, access);
	CHECK(s->mr, "ibv_reg_mr: %s", strerror(errno));
	s->qp = create_qp(s->pd, s->cq);
}

/* RESET -> INIT -> RTR -> RTS towards `dest` on this device's GID 1. */
static void connect_qp(struct ibv_qp *qp, uint32_t dest, int qp_access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = qp_access };
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS), "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
	      "RTR (the device's own GID as the destination)");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.sq_psn = 100;
	a.max_rd_atomic = 4;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), "RTS");
	CHECK(qp->state == IBV_QPS_RTS, "qp->state follows");
}

static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	time_t end = time(NULL) + 20;
	while (time(NULL) < end) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0, "ibv_poll_cq: %d", n);
		if (n == 1)
			return wc;
	}
	FAIL("no completion within 20 s");
}

static void post(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id, size_t off, size_t len,
		 struct side *remote, size_t roff)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)remote->buf + roff;
		wr.wr.atomic.rkey = remote->mr->rkey;
		wr.wr.atomic.compare_add = 5;
	} else if (remote) {
		wr.wr.rdma.remote_addr = (uintptr_t)remote->buf + roff;
		wr.wr.rdma.rkey = remote->mr->rkey;
	}
	if (op == IBV_WR_SEND_WITH_IMM)
		wr.imm_data = htobe32(0xabcd);
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "ibv_post_send op %d", op);
}

static void expect(struct side *s, uint64_t wr_id, enum ibv_wc_opcode op, enum ibv_wc_status st)
{
	struct ibv_wc wc = wait_wc(s->cq);
	CHECK(wc.wr_id == wr_id && wc.status == st, "wr %llu: status %s (%d), wanted %s",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status,
	      ibv_wc_status_str(st));
	if (st == IBV_WC_SUCCESS)
		CHECK(wc.opcode == op, "wr %llu: opcode %d, wanted %d", (unsigned long long)wr_id,
		      wc.opcode, op);
}

static void fill(char *p, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(seed + i * 7);
}

#define EXPECT_NULL_ERRNO(call, err) do { errno = 0; void *p_ = (void *)(call); \
	CHECK(!p_ && errno == (err), #call ": expected NULL with errno %d, got %p errno %d", \
	      (err), p_, errno); } while (0)
#define EXPECT_RET(call, want) do { int r_ = (call); \
	CHECK(r_ == (want), #call ": expected %d, got %d", (want), r_); } while (0)

static int loopback(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct side a, b;
	side_open(&a, all);
	side_open(&b, all);
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, all);

	/* WRITE 3000 bytes (three packets) from a to b. */
	fill(a.buf, 3000, 1);
	post(&a, IBV_WR_RDMA_WRITE, 1, 0, 3000, &b, 100);
	expect(&a, 1, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	CHECK(!memcmp(b.buf + 100, a.buf, 3000), "WRITE: bytes differ");

	/* READ them back into a's upper half. */
	post(&a, IBV_WR_RDMA_READ, 2, 4096, 3000, &b, 100);
	expect(&a, 2, IBV_WC_RDMA_READ, IBV_WC_SUCCESS);
	CHECK(!memcmp(a.buf + 4096, a.buf, 3000), "READ: bytes differ");

	/* SEND with immediate from b to a. */
	struct ibv_sge rs = { .addr = (uintptr_t)a.buf + 7000, .length = 1000, .lkey = a.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rs, .num_sge = 1 }, *rbad;
	CHECK(!ibv_post_recv(a.qp, &rwr, &rbad), "ibv_post_recv");
	fill(b.buf + 5000, 700, 9);
	post(&b, IBV_WR_SEND_WITH_IMM, 4, 5000, 700, NULL, 0);
	expect(&b, 4, IBV_WC_SEND, IBV_WC_SUCCESS);
	struct ibv_wc wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == 700 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      be32toh(wc.imm_data) == 0xabcd && wc.qp_num == a.qp->qp_num,
	      "RECV completion: status %d len %u", wc.status, wc.byte_len);
	CHECK(!memcmp(a.buf + 7000, b.buf + 5000, 700), "SEND: bytes differ");

	/* Fetch-and-add on b's word at 8000. */
	uint64_t v = 40;
	memcpy(b.buf + 8000, &v, 8);
	post(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 8100, 8, &b, 8000);
	expect(&a, 5, IBV_WC_FETCH_ADD, IBV_WC_SUCCESS);
	uint64_t orig, now;
	memcpy(&orig, a.buf + 8100, 8);
	memcpy(&now, b.buf + 8000, 8);
	CHECK(orig == 40 && now == 45, "FETCH_ADD: orig %llu now %llu", (unsigned long long)orig,
	      (unsigned long long)now);

	/* ibv_resize_cq refuses a size below what waits: three WRITEs
	 * complete unpolled (the engine moves without the program), then the
	 * CQ cannot shrink to two. */
	for (int i = 0; i < 3; i++)
		post(&a, IBV_WR_RDMA_WRITE, 10 + i, 0, 64, &b, 0);
	int refused = 0;
	for (time_t end = time(NULL) + 10; !refused && time(NULL) < end;)
		refused = ibv_resize_cq(a.cq, 2) == EINVAL;
	CHECK(refused, "ibv_resize_cq below the completions waiting");
	for (int i = 0; i < 3; i++)
		expect(&a, 10 + i, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	EXPECT_RET(ibv_resize_cq(a.cq, 2), 0);

	CHECK(!ibv_destroy_qp(a.qp) && !ibv_destroy_qp(b.qp), "destroy qp");
	CHECK(!ibv_dereg_mr(a.mr) && !ibv_dereg_mr(b.mr), "dereg");
	CHECK(!ibv_destroy_cq(a.cq) && !ibv_destroy_cq(b.cq), "destroy cq");
	CHECK(!ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc pd");
	return 0;
}

static void reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "to RESET");
}

static int access_flags(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct side a, b;
	side_open(&a, all);
	side_open(&b, all);
	/* b's region allows everything; b's QP allows only local writes. */
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(!ibv_query_qp(b.qp, &qa, IBV_QP_ACCESS_FLAGS, &qi) &&
	      qa.qp_access_flags == IBV_ACCESS_LOCAL_WRITE, "ibv_query_qp gives the flags back");
	fill(a.buf, 64, 3);
	post(&a, IBV_WR_RDMA_WRITE, 1, 0, 64, &b, 0);
	expect(&a, 1, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);
	for (int i = 0; i < LEN; i++)
		CHECK(b.buf[i] == 0, "a refused WRITE changed byte %d", i);

	/* Again with REMOTE_WRITE only: a READ is refused the same way. */
	reset(a.qp);
	reset(b.qp);
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	post(&a, IBV_WR_RDMA_WRITE, 2, 0, 64, &b, 0);
	expect(&a, 2, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	CHECK(!memcmp(a.buf, b.buf, 64), "the granted WRITE landed");
	post(&a, IBV_WR_RDMA_READ, 3, 1000, 64, &b, 0);
	expect(&a, 3, IBV_WC_RDMA_READ, IBV_WC_REM_ACCESS_ERR);
	return 0;
}

static int bad_sges(void);
static int bad_recvs(void);

static int checks(void)
{
	struct ibv_device_attr da;
	EXPECT_RET(ibv_query_device(ctx, &da), 0);
	CHECK(da.vendor_id == 0xffffff, "vendor_id %#x", da.vendor_id);
	CHECK(da.max_qp > 0 && da.max_cqe > 0 && da.max_mr > 0 && da.max_pd > 0 &&
	      da.phys_port_cnt == 1 && da.node_guid != 0, "device attributes");
	struct ibv_device_attr_ex dx;
	EXPECT_RET(ibv_query_device_ex(ctx, NULL, &dx), 0);
	CHECK(dx.phys_port_cnt_ex == 1 && dx.orig_attr.vendor_id == 0xffffff &&
	      dx.orig_attr.max_cqe == da.max_cqe, "ibv_query_device_ex");
	struct ibv_query_device_ex_input in = { .comp_mask = 1 };
	EXPECT_RET(ibv_query_device_ex(ctx, &in, &dx), EINVAL);
	/* cmd_fd is an open descriptor of the context (programs poll or dup
	 * it), distinct from async_fd; importing it is refused. */
	CHECK(ctx->cmd_fd >= 0 && fcntl(ctx->cmd_fd, F_GETFD) >= 0 &&
	      ctx->cmd_fd != ctx->async_fd, "cmd_fd %d", ctx->cmd_fd);
	int cmd_dup = dup(ctx->cmd_fd);
	CHECK(cmd_dup >= 0, "dup(cmd_fd): %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_import_device(cmd_dup) && errno == EOPNOTSUPP,
	      "ibv_import_device: errno %d", errno);
	close(cmd_dup);
	struct ibv_port_attr pa;
	EXPECT_RET(ibv_query_port(ctx, 2, &pa), EINVAL);
	EXPECT_RET(ibv_query_port(ctx, 1, &pa), 0);
	CHECK(pa.gid_tbl_len > 2, "gid_tbl_len %d", pa.gid_tbl_len);
	/* An empty entry of the GID table: zeros for ibv_query_gid, ENODATA
	 * for ibv_query_gid_ex; past the table's end, an error. */
	union ibv_gid g;
	EXPECT_RET(ibv_query_gid(ctx, 1, 2, &g), 0);
	for (int i = 0; i < 16; i++)
		CHECK(g.raw[i] == 0, "an empty GID entry reads as zeros");
	struct ibv_gid_entry ge;
	EXPECT_RET(ibv_query_gid_ex(ctx, 1, 2, &ge, 0), ENODATA);
	EXPECT_RET(ibv_query_gid_ex(ctx, 1, 1, &ge, 0), 0);
	CHECK(ge.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(&ge.gid, &gid1, 16), "GID 1");
	CHECK(ibv_query_gid(ctx, 1, pa.gid_tbl_len, &g) == -1, "past the GID table");

	/* String helpers. */
	CHECK(!strcmp(ibv_event_type_str(IBV_EVENT_SRQ_LIMIT_REACHED), "SRQ limit reached") &&
	      !strcmp(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter") &&
	      !strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "active") &&
	      !strcmp(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error") &&
	      !strcmp(ibv_event_type_str(99), "unknown") &&
	      ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 &&
	      mbps_to_ibv_rate(25781) == IBV_RATE_25_GBPS && ibv_rate_to_mult(IBV_RATE_40_GBPS) == 16,
	      "string and rate helpers");
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED, "fork status");

	/* ibv_reg_mr: rxe's (ib_check_mr_access's) refusals. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	static char buf[4096];
	EXPECT_NULL_ERRNO(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE), EINVAL);
	EXPECT_NULL_ERRNO(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC), EINVAL);
	EXPECT_NULL_ERRNO(ibv_reg_mr(pd, buf, sizeof(buf), 1 << 15), EINVAL);

	/* ibv_create_cq: cqe within 1..max_cqe, comp_vector below num_comp_vectors. */
	EXPECT_NULL_ERRNO(ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0), EINVAL);
	EXPECT_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	EXPECT_NULL_ERRNO(ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors), EINVAL);
	struct ibv_cq *cq = ibv_create_cq(ctx, da.max_cqe, NULL, NULL, ctx->num_comp_vectors - 1);
	CHECK(cq, "a CQ of max_cqe entries: %s", strerror(errno));
	EXPECT_RET(ibv_destroy_cq(cq), 0);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	EXPECT_RET(ibv_resize_cq(cq, 64), 0);
	CHECK(cq->cqe == 64, "ibv_resize_cq: cqe %d", cq->cqe);
	EXPECT_RET(ibv_resize_cq(cq, 0), EINVAL);
	EXPECT_RET(ibv_resize_cq(cq, da.max_cqe + 1), EINVAL);

	/* ibv_create_qp: capacities within the device's. */
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = da.max_qp_wr + 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 } };
	EXPECT_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	ia.cap.max_send_wr = 1;
	ia.cap.max_send_sge = da.max_sge + 1;
	EXPECT_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	ia.cap.max_send_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp");

	/* ibv_modify_qp: the state table's required attributes, and values. */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT), EINVAL);
	a.port_num = 2;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_ACCESS_FLAGS), EINVAL);
	a.port_num = 1;
	a.qp_state = IBV_QPS_RTS;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	CHECK(qp->state == IBV_QPS_RESET, "a refused modify leaves the state");
	a.qp_state = IBV_QPS_INIT;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_ACCESS_FLAGS), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = 7;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU), EINVAL);

	/* ibv_rereg_mr: rights, then the range; the keys stay. */
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 1024, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	uint32_t lkey = mr->lkey, rkey = mr->rkey;
	EXPECT_RET(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), 0);
	EXPECT_RET(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf + 1024, 2048, 0), 0);
	CHECK(mr->addr == buf + 1024 && mr->length == 2048 && mr->lkey == lkey && mr->rkey == rkey,
	      "rereg: addr/length follow, keys stay");
	errno = 0;
	EXPECT_RET(ibv_rereg_mr(mr, 1 << 5, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
	CHECK(errno == EINVAL, "rereg with an unknown flag: errno %d", errno);
	EXPECT_RET(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				IBV_ACCESS_REMOTE_WRITE), IBV_REREG_MR_ERR_CMD);
	CHECK(errno == EINVAL, "rereg to remote write without local write: errno %d", errno);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	EXPECT_RET(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	CHECK(mr->pd == pd2, "rereg: the PD follows");
	/* A PD with a region (or a QP) cannot be freed. */
	EXPECT_RET(ibv_dealloc_pd(pd2), EBUSY);
	EXPECT_RET(ibv_dereg_mr(mr), 0);
	EXPECT_RET(ibv_dealloc_pd(pd2), 0);
	EXPECT_RET(ibv_destroy_cq(cq), EBUSY);
	EXPECT_RET(ibv_dealloc_pd(pd), EBUSY);
	EXPECT_RET(ibv_destroy_qp(qp), 0);
	EXPECT_RET(ibv_destroy_cq(cq), 0);
	EXPECT_RET(ibv_dealloc_pd(pd), 0);
	bad_sges();
	return bad_recvs();
}

static int bad_input(void)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(pd && cq, "pd/cq");
	/* NULL and foreign pointers where objects belong. */
	EXPECT_NULL_ERRNO(ibv_alloc_pd(NULL), EINVAL);
	EXPECT_NULL_ERRNO(ibv_reg_mr(NULL, NULL, 0, 0), EINVAL);
	struct ibv_pd fake_pd = { .context = ctx };
	static char buf[256];
	EXPECT_NULL_ERRNO(ibv_reg_mr(&fake_pd, buf, sizeof(buf), 0), EINVAL);
	EXPECT_NULL_ERRNO(ibv_create_qp(pd, NULL), EINVAL);
	struct ibv_qp_init_attr ia = { .send_cq = (struct ibv_cq *)pd, .recv_cq = cq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_recv_wr = 1 } };
	EXPECT_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	EXPECT_RET(ibv_dealloc_pd(NULL), EINVAL);
	EXPECT_RET(ibv_destroy_cq((struct ibv_cq *)pd), EINVAL);
	EXPECT_RET(ibv_query_device(NULL, NULL), EINVAL);

	/* A destroyed QP: every verb on it is refused. */
	ia.send_cq = cq;
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp");
	struct ibv_qp copy = *qp; /* what a program holding a stale pointer has */
	EXPECT_RET(ibv_destroy_qp(qp), 0);
	EXPECT_RET(ibv_destroy_qp(qp), EINVAL);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT };
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad = NULL;
	EXPECT_RET(copy.context->ops.post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr, "bad_wr names the refused request");
	struct ibv_wc wc;
	CHECK(ibv_poll_cq((struct ibv_cq *)pd, 1, &wc) < 0, "ibv_poll_cq on a PD");

	/* An lkey of another PD: an error completion, nothing sent. */
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct side x, y;
	side_open(&x, all);
	side_open(&y, all);
	connect_qp(x.qp, y.qp->qp_num, all);
	connect_qp(y.qp, x.qp->qp_num, all);
	struct ibv_mr *other = ibv_reg_mr(pd, buf, sizeof(buf), all);
	CHECK(other, "ibv_reg_mr");
	memset(y.buf, 0, 64);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = other->lkey };
	struct ibv_send_wr w = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };
	w.wr.rdma.remote_addr = (uintptr_t)y.buf;
	w.wr.rdma.rkey = y.mr->rkey;
	memset(buf, 0x5a, 64);
	/* Posted, as rxe: the key is looked up when the packet is built. */
	EXPECT_RET(ibv_post_send(x.qp, &w, &bad), 0);
	wc = wait_wc(x.cq);
	CHECK(wc.wr_id == 9 && wc.status == IBV_WC_LOC_QP_OP_ERR,
	      "an lkey of another PD: status %s", ibv_wc_status_str(wc.status));
	for (int i = 0; i < 64; i++)
		CHECK(y.buf[i] == 0, "a WRITE from another PD's region landed");
	return 0;
}

/* `op` (WRITE or READ) of `len` bytes between `s`'s buffer at `off` and
 * `raddr` under R_Key `rkey`. */
static void post_rkey(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id, size_t off,
		      size_t len, uint32_t rkey, char *raddr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK(!ibv_post_send(s->qp, &wr, &bad), "ibv_post_send op %d", op);
}

/* b's `mw` bound through a BIND_MW work request (type 2) to `len` bytes
 * of b's region at `at`, with key byte incremented; returns the new key. */
static uint32_t bind_type2(struct side *b, struct ibv_mw *mw, uint64_t wr_id, char *at,
			   size_t len, unsigned int access)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = b->mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)at;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	CHECK(!ibv_post_send(b->qp, &wr, &bad), "ibv_post_send BIND_MW");
	expect(b, wr_id, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	return wr.bind_mw.rkey;
}

/* Both QPs back to RTS after a refusal put them in error. */
static void reconnect(struct side *a, struct side *b, int all)
{
	reset(a->qp);
	reset(b->qp);
	connect_qp(a->qp, b->qp->qp_num, all);
	connect_qp(b->qp, a->qp->qp_num, all);
}

/* A QP of `pd` on `cq` created with these SGE and inline caps; NULL and
 * errno when refused. `got` receives what it was granted. */
static struct ibv_qp *create_qp_caps(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t send_sge,
				     uint32_t recv_sge, uint32_t inl, struct ibv_qp_cap *got)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = send_sge,
			 .max_recv_sge = recv_sge, .max_inline_data = inl },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (got)
		*got = ia.cap;
	return qp;
}

/* `n` SGEs over `s`'s buffer from `off`: lengths `lens`, a gap of `gap`
 * bytes before each. Returns the offset after the last. */
static size_t lay(struct side *s, struct ibv_sge *sg, const uint32_t *lens, int n, size_t off,
		  size_t gap)
{
	for (int i = 0; i < n; i++) {
		off += gap;
		sg[i].addr = (uintptr_t)s->buf + off;
		sg[i].length = lens[i];
		sg[i].lkey = s->mr->lkey;
		off += lens[i];
	}
	return off;
}

/* The bytes the list names, concatenated into `out`; their total. */
static size_t gather_sg(const struct ibv_sge *sg, int n, char *out)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		memcpy(out + at, (void *)(uintptr_t)sg[i].addr, sg[i].length);
		at += sg[i].length;
	}
	return at;
}

static int post_list_send(struct side *s, enum ibv_wr_opcode op, uint64_t wr_id,
			  struct ibv_sge *sg, int n, unsigned flags, struct side *remote, size_t roff)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED | flags }, *bad = NULL;
	if (remote) {
		wr.wr.rdma.remote_addr = (uintptr_t)remote->buf + roff;
		wr.wr.rdma.rkey = remote->mr->rkey;
	}
	wr.imm_data = htobe32(0x5151);
	int r = ibv_post_send(s->qp, &wr, &bad);
	CHECK(r == 0 || bad == &wr, "a refused post points bad at the request");
	return r;
}

static int post_list_recv(struct side *s, uint64_t wr_id, struct ibv_sge *sg, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n }, *bad = NULL;
	int r = ibv_post_recv(s->qp, &wr, &bad);
	CHECK(r == 0 || bad == &wr, "a refused receive points bad at the request");
	return r;
}

static void expect_len(struct side *s, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len)
{
	struct ibv_wc wc = wait_wc(s->cq);
	CHECK(wc.wr_id == wr_id && wc.status == IBV_WC_SUCCESS && wc.opcode == op &&
	      wc.byte_len == len, "wr %llu: status %s opcode %d byte_len %u, wanted %d %u",
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len,
	      op, len);
}

static int sgl(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_device_attr da;
	CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
	CHECK(da.max_sge == 32 && da.max_sge_rd == 32, "max_sge %d max_sge_rd %d (rxe: 32)",
	      da.max_sge, da.max_sge_rd);

	/* What rxe grants: the send WQE holds max(16 x max_send_sge,
	 * max_inline_data) bytes, and both fill it. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp_cap got;
	struct ibv_qp *q = create_qp_caps(pd, cq, 1, 1, 0, &got);
	CHECK(q && got.max_send_sge == 1 && got.max_recv_sge == 1 && got.max_inline_data == 16,
	      "caps (1, 1, 0) -> (%u, %u, %u)", got.max_send_sge, got.max_recv_sge,
	      got.max_inline_data);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(!ibv_query_qp(q, &qa, IBV_QP_CAP, &qi) && qi.cap.max_inline_data == 16 &&
	      qa.cap.max_send_sge == 1, "ibv_query_qp reports the grants");
	CHECK(!ibv_destroy_qp(q), "destroy");
	q = create_qp_caps(pd, cq, 4, 32, 100, &got);
	CHECK(q && got.max_send_sge == 6 && got.max_recv_sge == 32 && got.max_inline_data == 100,
	      "caps (4, 32, 100) -> (%u, %u, %u)", got.max_send_sge, got.max_recv_sge,
	      got.max_inline_data);
	CHECK(!ibv_destroy_qp(q), "destroy");
	q = create_qp_caps(pd, cq, 1, 1, 512, &got);
	CHECK(q && got.max_send_sge == 32 && got.max_inline_data == 512,
	      "caps (1, 1, 512) -> (%u, %u)", got.max_send_sge, got.max_inline_data);
	CHECK(!ibv_destroy_qp(q), "destroy");
	EXPECT_NULL_ERRNO(create_qp_caps(pd, cq, 33, 1, 0, NULL), EINVAL);
	EXPECT_NULL_ERRNO(create_qp_caps(pd, cq, 1, 33, 0, NULL), EINVAL);
	EXPECT_NULL_ERRNO(create_qp_caps(pd, cq, 1, 1, 513, NULL), EINVAL);
	CHECK(!ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd), "cleanup");

	struct side a, b;
	a.pd = ibv_alloc_pd(ctx);
	b.pd = ibv_alloc_pd(ctx);
	a.cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	b.cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	a.buf = aligned_alloc(64, LEN);
	b.buf = aligned_alloc(64, LEN);
	fill(a.buf, LEN, 3);
	memset(b.buf, 0, LEN);
	a.mr = ibv_reg_mr(a.pd, a.buf, LEN, all);
	b.mr = ibv_reg_mr(b.pd, b.buf, LEN, all);
	CHECK(a.mr && b.mr, "ibv_reg_mr");
	a.qp = create_qp_caps(a.pd, a.cq, 32, 32, 256, &got);
	CHECK(a.qp && got.max_inline_data == 512, "a: inline %u", got.max_inline_data);
	b.qp = create_qp_caps(b.pd, b.cq, 4, 4, 0, &got);
	CHECK(b.qp && got.max_send_sge == 4 && got.max_recv_sge == 4, "b");
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, all);
	static char want[LEN], flat[LEN];

	/* SEND: 7 entries (one empty, boundaries inside 1024-byte packets)
	 * into a receive of 4 entries. */
	struct ibv_sge ss[32], rs[32];
	const uint32_t slens[7] = { 700, 0, 1500, 33, 1, 900, 366 }; /* 3500 */
	lay(&a, ss, slens, 7, 0, 5);
	const uint32_t rlens[4] = { 1000, 17, 2000, 1000 };
	lay(&b, rs, rlens, 4, 0, 11);
	EXPECT_RET(post_list_recv(&b, 1, rs, 4), 0);
	EXPECT_RET(post_list_send(&a, IBV_WR_SEND, 2, ss, 7, 0, NULL, 0), 0);
	expect_len(&a, 2, IBV_WC_SEND, 3500);
	expect_len(&b, 1, IBV_WC_RECV, 3500);
	size_t n = gather_sg(ss, 7, flat);
	CHECK(n == 3500, "gathered %zu", n);
	/* The receive list, read back in order, holds the message. */
	memcpy(want, flat, n);
	gather_sg(rs, 4, flat);
	CHECK(!memcmp(flat, want, 3500), "SEND: the receive list's bytes differ");

	/* WRITE: 32 entries to one remote range. */
	uint32_t wlens[32];
	for (int i = 0; i < 32; i++)
		wlens[i] = (i * 37) % 200;
	lay(&a, ss, wlens, 32, 100, 3);
	size_t wn = gather_sg(ss, 32, want);
	memset(b.buf, 0, LEN);
	EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_WRITE, 3, ss, 32, 0, &b, 64), 0);
	expect_len(&a, 3, IBV_WC_RDMA_WRITE, wn);
	CHECK(!memcmp(b.buf + 64, want, wn), "WRITE: bytes differ");
	CHECK(b.buf[63] == 0 && b.buf[64 + wn] == 0, "WRITE: outside the range");

	/* READ: one remote range into 6 local entries. */
	fill(b.buf, LEN, 9);
	const uint32_t dl[6] = { 10, 1200, 0, 1, 1800, 989 }; /* 4000 */
	memset(a.buf + 4096, 0, 4096);
	lay(&a, ss, dl, 6, 4096, 7);
	EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_READ, 4, ss, 6, 0, &b, 100), 0);
	expect_len(&a, 4, IBV_WC_RDMA_READ, 4000);
	gather_sg(ss, 6, flat);
	CHECK(!memcmp(flat, b.buf + 100, 4000), "READ: bytes differ");

	/* Inline SEND of 300 bytes from two unregistered buffers, reused at
	 * once; inline WRITE of 512 bytes. */
	char x[200], y[100];
	fill(x, 200, 21);
	fill(y, 100, 22);
	memcpy(want, x, 200);
	memcpy(want + 200, y, 100);
	struct ibv_sge is[2] = { { .addr = (uintptr_t)x, .length = 200, .lkey = 0 },
				 { .addr = (uintptr_t)y, .length = 100, .lkey = 0xdead } };
	rs[0] = (struct ibv_sge){ .addr = (uintptr_t)b.buf, .length = 1000, .lkey = b.mr->lkey };
	EXPECT_RET(post_list_recv(&b, 5, rs, 1), 0);
	EXPECT_RET(post_list_send(&a, IBV_WR_SEND_WITH_IMM, 6, is, 2, IBV_SEND_INLINE, NULL, 0), 0);
	memset(x, 0, sizeof(x));
	memset(y, 0, sizeof(y));
	expect_len(&a, 6, IBV_WC_SEND, 300);
	expect_len(&b, 5, IBV_WC_RECV, 300);
	CHECK(!memcmp(b.buf, want, 300), "inline SEND: bytes differ");
	static char big[513];
	fill(big, 513, 23);
	is[0] = (struct ibv_sge){ .addr = (uintptr_t)big, .length = 512 };
	EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_WRITE, 7, is, 1, IBV_SEND_INLINE, &b, 2048), 0);
	memcpy(want, big, 512);
	memset(big, 0, 512);
	expect_len(&a, 7, IBV_WC_RDMA_WRITE, 512);
	CHECK(!memcmp(b.buf + 2048, want, 512), "inline WRITE: bytes differ");

	/* A zero-SGE WRITE_WITH_IMM into a zero-SGE receive (NCCL's). */
	EXPECT_RET(post_list_recv(&b, 8, NULL, 0), 0);
	EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 9, NULL, 0, 0, &b, 0), 0);
	expect_len(&a, 9, IBV_WC_RDMA_WRITE, 0);
	struct ibv_wc wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 8 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == 0 &&
	      (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0x5151,
	      "zero-SGE WRITE_WITH_IMM: status %d opcode %d len %u", wc.status, wc.opcode,
	      wc.byte_len);

	/* EINVAL: more SGEs than the QP's, more inline bytes than its. */
	lay(&a, ss, wlens, 32, 0, 0);
	is[0] = (struct ibv_sge){ .addr = (uintptr_t)big, .length = 513 };
	EXPECT_RET(post_list_send(&a, IBV_WR_SEND, 10, is, 1, IBV_SEND_INLINE, NULL, 0), EINVAL);
	EXPECT_RET(post_list_send(&a, IBV_WR_SEND, 10, ss, 33, 0, NULL, 0), EINVAL);
	EXPECT_RET(post_list_send(&b, IBV_WR_SEND, 10, ss, 5, 0, NULL, 0), EINVAL);
	EXPECT_RET(post_list_recv(&b, 10, rs, 5), EINVAL);
	EXPECT_RET(post_list_recv(&a, 10, rs, 33), EINVAL);

	/* A list entry of another PD: posted, LOC_QP_OP_ERR, nothing written. */
	memset(b.buf, 0, LEN);
	struct ibv_mr *other = ibv_reg_mr(b.pd, b.buf + 4096, 4096, all);
	CHECK(other, "ibv_reg_mr");
	const uint32_t two[2] = { 100, 100 };
	lay(&a, ss, two, 2, 0, 0);
	ss[1].addr = (uintptr_t)b.buf + 4096;
	ss[1].lkey = other->lkey;
	EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_WRITE, 11, ss, 2, 0, &b, 0), 0);
	wc = wait_wc(a.cq);
	CHECK(wc.wr_id == 11 && wc.status == IBV_WC_LOC_QP_OP_ERR,
	      "an entry of another PD: status %s", ibv_wc_status_str(wc.status));
	for (int i = 0; i < 4096; i++)
		CHECK(b.buf[i] == 0, "a WRITE with an entry of another PD landed at %d", i);
	reconnect(&a, &b, all);

	/* A receive list too short: LOC_LEN_ERR at b, REM_INV_REQ at a. */
	const uint32_t small[2] = { 100, 100 };
	lay(&b, rs, small, 2, 0, 50);
	EXPECT_RET(post_list_recv(&b, 12, rs, 2), 0);
	ss[0] = (struct ibv_sge){ .addr = (uintptr_t)a.buf, .length = 300, .lkey = a.mr->lkey };
	EXPECT_RET(post_list_send(&a, IBV_WR_SEND, 13, ss, 1, 0, NULL, 0), 0);
	wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 12 && wc.status == IBV_WC_LOC_LEN_ERR, "short receive: %s",
	      ibv_wc_status_str(wc.status));
	expect(&a, 13, IBV_WC_SEND, IBV_WC_REM_INV_REQ_ERR);

	CHECK(!ibv_destroy_qp(a.qp) && !ibv_destroy_qp(b.qp), "destroy qp");
	CHECK(!ibv_dereg_mr(other) && !ibv_dereg_mr(a.mr) && !ibv_dereg_mr(b.mr), "dereg");
	CHECK(!ibv_destroy_cq(a.cq) && !ibv_destroy_cq(b.cq), "destroy cq");
	CHECK(!ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc pd");
	return 0;
}

static int windows(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	const unsigned int rw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_device_attr da;
	CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
	CHECK((da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && da.max_mw > 0,
	      "memory windows of type 1 and 2B: flags %#x max_mw %d", da.device_cap_flags,
	      da.max_mw);
	struct side a, b;
	side_open(&a, all);
	/* b's region grants no remote right: only its windows open it. */
	side_open(&b, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, all);
	EXPECT_NULL_ERRNO(ibv_alloc_mw(b.pd, 3), EINVAL);

	/* Type 1: ibv_bind_mw, the key byte incremented. */
	struct ibv_mw *mw1 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	CHECK(mw1 && mw1->type == IBV_MW_TYPE_1 && mw1->pd == b.pd, "ibv_alloc_mw type 1: %s",
	      strerror(errno));
	uint32_t k1 = mw1->rkey;
	struct ibv_mw_bind mb = { .wr_id = 10, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = b.mr, .addr = (uintptr_t)b.buf + 1024,
						 .length = 2048, .mw_access_flags = rw } };
	EXPECT_RET(ibv_bind_mw(b.qp, mw1, &mb), 0);
	CHECK(mw1->rkey == ibv_inc_rkey(k1), "the window takes the next key byte");
	expect(&b, 10, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	fill(a.buf, 1000, 4);
	post_rkey(&a, IBV_WR_RDMA_WRITE, 11, 0, 1000, mw1->rkey, b.buf + 1124);
	expect(&a, 11, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	CHECK(!memcmp(b.buf + 1124, a.buf, 1000), "WRITE through the type 1 window");
	post_rkey(&a, IBV_WR_RDMA_READ, 12, 2000, 1000, mw1->rkey, b.buf + 1124);
	expect(&a, 12, IBV_WC_RDMA_READ, IBV_WC_SUCCESS);
	CHECK(!memcmp(a.buf + 2000, a.buf, 1000), "READ through the type 1 window");

	/* Type 2: a BIND_MW work request; ibv_bind_mw refuses it. */
	struct ibv_mw *mw2 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK(mw2 && mw2->type == IBV_MW_TYPE_2, "ibv_alloc_mw type 2: %s", strerror(errno));
	EXPECT_RET(ibv_bind_mw(b.qp, mw2, &mb), EINVAL);
	uint32_t k2 = bind_type2(&b, mw2, 20, b.buf + 4096, 2048, rw);
	fill(a.buf, 1500, 8);
	post_rkey(&a, IBV_WR_RDMA_WRITE, 21, 0, 1500, k2, b.buf + 4096);
	expect(&a, 21, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
	CHECK(!memcmp(b.buf + 4096, a.buf, 1500), "WRITE through the type 2 window");
	post_rkey(&a, IBV_WR_RDMA_READ, 22, 3000, 1500, k2, b.buf + 4096);
	expect(&a, 22, IBV_WC_RDMA_READ, IBV_WC_SUCCESS);
	CHECK(!memcmp(a.buf + 3000, a.buf, 1500), "READ through the type 2 window");

	/* Outside the window: refused, nothing written. */
	post_rkey(&a, IBV_WR_RDMA_WRITE, 23, 0, 64, k2, b.buf + 4096 + 2048 - 32);
	expect(&a, 23, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);
	for (int i = 4096 + 2048; i < LEN; i++)
		CHECK(b.buf[i] == 0, "a refused WRITE changed byte %d", i);
	reconnect(&a, &b, all);

	/* LOCAL_INV closes the type 2 window. */
	struct ibv_send_wr inv = { .wr_id = 30, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = k2 }, *bad;
	CHECK(!ibv_post_send(b.qp, &inv, &bad), "ibv_post_send LOCAL_INV");
	expect(&b, 30, IBV_WC_LOCAL_INV, IBV_WC_SUCCESS);
	post_rkey(&a, IBV_WR_RDMA_WRITE, 31, 0, 64, k2, b.buf + 4096);
	expect(&a, 31, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b, all);

	/* SEND_WITH_INV closes another; the receive names its key. */
	struct ibv_mw *mw3 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK(mw3, "ibv_alloc_mw: %s", strerror(errno));
	uint32_t k3 = bind_type2(&b, mw3, 40, b.buf + 6144, 1024, IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge rs = { .addr = (uintptr_t)b.buf, .length = 512, .lkey = b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 41, .sg_list = &rs, .num_sge = 1 }, *rbad;
	CHECK(!ibv_post_recv(b.qp, &rwr, &rbad), "ibv_post_recv");
	struct ibv_sge ss = { .addr = (uintptr_t)a.buf, .length = 200, .lkey = a.mr->lkey };
	struct ibv_send_wr sinv = { .wr_id = 42, .sg_list = &ss, .num_sge = 1,
				    .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
				    .invalidate_rkey = k3 };
	CHECK(!ibv_post_send(a.qp, &sinv, &bad), "ibv_post_send SEND_WITH_INV");
	expect(&a, 42, IBV_WC_SEND, IBV_WC_SUCCESS);
	struct ibv_wc wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 41 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == 200 && (wc.wc_flags & IBV_WC_WITH_INV) &&
	      !(wc.wc_flags & IBV_WC_WITH_IMM) && wc.invalidated_rkey == k3,
	      "RECV of SEND_WITH_INV: status %d flags %#x key %#x (want %#x)", wc.status,
	      wc.wc_flags, wc.invalidated_rkey, k3);
	CHECK(!memcmp(b.buf, a.buf, 200), "SEND_WITH_INV: bytes differ");
	post_rkey(&a, IBV_WR_RDMA_WRITE, 43, 0, 64, k3, b.buf + 6144);
	expect(&a, 43, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b, all);

	/* A zero-length bind closes the type 1 window. */
	struct ibv_mw_bind unbind = { .wr_id = 50, .send_flags = IBV_SEND_SIGNALED,
				      .bind_info = { .mr = b.mr, .addr = (uintptr_t)b.buf } };
	EXPECT_RET(ibv_bind_mw(b.qp, mw1, &unbind), 0);
	expect(&b, 50, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	post_rkey(&a, IBV_WR_RDMA_WRITE, 51, 0, 64, mw1->rkey, b.buf + 1124);
	expect(&a, 51, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b, all);

	/* Bound again: the region cannot be deregistered, nor the PD freed;
	 * freed, the window refuses. */
	mb.wr_id = 60;
	EXPECT_RET(ibv_bind_mw(b.qp, mw1, &mb), 0);
	expect(&b, 60, IBV_WC_BIND_MW, IBV_WC_SUCCESS);
	EXPECT_RET(ibv_dereg_mr(b.mr), EINVAL);
	EXPECT_RET(ibv_dealloc_pd(b.pd), EBUSY);
	uint32_t k1b = mw1->rkey;
	EXPECT_RET(ibv_dealloc_mw(mw1), 0);
	post_rkey(&a, IBV_WR_RDMA_WRITE, 61, 0, 64, k1b, b.buf + 1124);
	expect(&a, 61, IBV_WC_RDMA_WRITE, IBV_WC_REM_ACCESS_ERR);

	EXPECT_RET(ibv_dealloc_mw(mw2), 0);
	EXPECT_RET(ibv_dealloc_mw(mw3), 0);
	CHECK(!ibv_destroy_qp(a.qp) && !ibv_destroy_qp(b.qp), "destroy qp");
	CHECK(!ibv_dereg_mr(a.mr) && !ibv_dereg_mr(b.mr), "dereg");
	CHECK(!ibv_destroy_cq(a.cq) && !ibv_destroy_cq(b.cq), "destroy cq");
	CHECK(!ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc pd");
	return 0;
}

/* ---- ud ---- */

#define QKEY 0x11111111
#define GRH 40

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t psn)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp UD: %s", strerror(errno));
	CHECK(qp->qp_type == IBV_QPT_UD && qp->state == IBV_QPS_RESET, "a new UD QP");
	CHECK(ia.cap.max_send_sge == 1 && ia.cap.max_recv_sge == 1 && ia.cap.max_send_wr >= 16 &&
	      ia.cap.max_recv_wr >= 16 && ia.cap.max_inline_data == 16,
	      "UD caps granted as rxe (one SGE's room: 16 inline bytes): sge %u inline %u",
	      ia.cap.max_send_sge, ia.cap.max_inline_data);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	/* RESET->INIT needs the Q_Key; an RC attribute is refused. */
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS), EINVAL);
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	      "UD INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "UD RTR (state only)");
	a.qp_state = IBV_QPS_RTS;
	EXPECT_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL); /* SQ_PSN missing */
	a.sq_psn = psn;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "UD RTS");
	CHECK(qp->state == IBV_QPS_RTS, "qp->state follows");
	struct ibv_qp_init_attr qi;
	memset(&a, 0, sizeof(a));
	CHECK(!ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_SQ_PSN, &qi), "query UD");
	CHECK(a.qp_state == IBV_QPS_RTS && a.qkey == QKEY && a.sq_psn == psn && a.port_num == 1 &&
	      a.pkey_index == 0 && qi.qp_type == IBV_QPT_UD && qi.cap.max_send_sge == 1,
	      "ibv_query_qp of a UD QP: state %d qkey %#x psn %u port %d", a.qp_state, a.qkey,
	      a.sq_psn, a.port_num);
	return qp;
}

static void ud_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t wr_id, char *at, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(!ibv_post_recv(qp, &wr, &bad), "ibv_post_recv UD");
}

static int ud_send(struct ibv_qp *qp, struct ibv_mr *mr, enum ibv_wr_opcode op, uint64_t wr_id,
		   char *at, uint32_t len, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, int num_sge)
{
	struct ibv_sge sge[2] = { { .addr = (uintptr_t)at, .length = len, .lkey = mr->lkey },
				  { .addr = (uintptr_t)at, .length = 1, .lkey = mr->lkey } };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sge, .num_sge = num_sge, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	if (op == IBV_WR_SEND_WITH_IMM)
		wr.imm_data = htobe32(0x5a5a0001);
	int r = ibv_post_send(qp, &wr, &bad);
	CHECK(r == 0 || bad == &wr, "a refused post points bad at the request");
	return r;
}

/* The receive at `buf`: 20 zero bytes, the IPv4 header of a datagram from
 * and to the device's own address, then the payload `want`. */
static void check_grh(const char *buf, const char *want, uint32_t len, int imm)
{
	const unsigned char *g = (const unsigned char *)buf;
	for (int i = 0; i < 20; i++)
		CHECK(g[i] == 0, "GRH area byte %d is %#x, not 0", i, g[i]);
	const unsigned char *ip = g + 20;
	CHECK(ip[0] == 0x45, "IPv4 header: version/IHL %#x", ip[0]);
	/* IPv4, UDP, BTH, DETH, ImmDt, the payload padded to 4 bytes, ICRC. */
	uint32_t total = 20 + 8 + 12 + 8 + (imm ? 4 : 0) + ((len + 3) & ~3u) + 4;
	CHECK((uint32_t)((ip[2] << 8) | ip[3]) == total, "IPv4 total length %d, wanted %u",
	      (ip[2] << 8) | ip[3], total);
	CHECK(ip[9] == 17, "IPv4 protocol %d", ip[9]);
	CHECK(!memcmp(ip + 12, gid1.raw + 12, 4) && !memcmp(ip + 16, gid1.raw + 12, 4),
	      "IPv4 addresses: the device's own");
	CHECK(!memcmp(buf + GRH, want, len), "payload bytes");
}

/* The two completions of a send `send_id` and the receive it lands in, in
 * whichever order they come: the receive is returned, the send checked. */
static struct ibv_wc send_and_recv(struct ibv_cq *cq, uint64_t send_id)
{
	struct ibv_wc r = { 0 };
	int got = 0;
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = wait_wc(cq);
		if (wc.wr_id == send_id && wc.opcode == IBV_WC_SEND) {
			CHECK(wc.status == IBV_WC_SUCCESS, "send %llu: %s", (unsigned long long)send_id,
			      ibv_wc_status_str(wc.status));
			continue;
		}
		r = wc;
		got++;
	}
	CHECK(got == 1, "one receive completion");
	return r;
}

/* A receive completion as rxe gives it for a UD datagram. */
static void check_recv(const struct ibv_wc *wc, uint64_t wr_id, uint32_t len, uint32_t src_qp,
		       uint32_t qpn, int imm)
{
	CHECK(wc->wr_id == wr_id && wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_RECV,
	      "UD receive %llu: status %s opcode %d", (unsigned long long)wc->wr_id,
	      ibv_wc_status_str(wc->status), wc->opcode);
	CHECK(wc->byte_len == GRH + len, "byte_len %u, wanted %u", wc->byte_len, GRH + len);
	CHECK(wc->src_qp == src_qp && wc->qp_num == qpn, "src_qp %#x qp_num %#x", wc->src_qp,
	      wc->qp_num);
	CHECK(wc->wc_flags & IBV_WC_GRH, "IBV_WC_GRH set");
	CHECK(!!(wc->wc_flags & IBV_WC_WITH_IMM) == imm, "IBV_WC_WITH_IMM %d", imm);
	if (imm)
		CHECK(be32toh(wc->imm_data) == 0x5a5a0001, "imm_data %#x", be32toh(wc->imm_data));
	CHECK(wc->slid == 0 && wc->pkey_index == 0 && wc->dlid_path_bits == 0,
	      "slid/pkey_index as rxe's");
	/* sl: the RoCE packet type as ConnectX reports it (UCX reads it):
	 * RoCE v2 (bit 3) over IPv4 (2). */
	CHECK(wc->sl == 0xa, "sl %#x, wanted 0xa (RoCE v2 over IPv4)", wc->sl);
}

/* ---- checks: bad scatter/gather entries in sends ---- */

/* A UD QP of `pd` on `cq` with `sge` send SGEs, in RTS. */
static struct ibv_qp *ud_qp_sges(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t sge)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = sge, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "ibv_create_qp UD: %s", strerror(errno));
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	CHECK(!ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) &&
	      !ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR }, IBV_QP_STATE) &&
	      !ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 7 },
			     IBV_QP_STATE | IBV_QP_SQ_PSN), "UD QP to RTS");
	return qp;
}

static void expect_qp_error(struct ibv_qp *qp, const char *what)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(!ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_ERR,
	      "%s: the QP is in error (state %d)", what, qa.qp_state);
}

/* As rxe: its validate_send_wr (rdma-core providers/rxe/rxe.c, and the
 * kernel's rxe_verbs.c) looks at no key, and rxe_req.c finish_packet
 * reads the SGEs through rxe_mr.c copy_data when the request runs:
 * lookup_mr (a key of no region, or of a region of another PD) and
 * mr_check_range (bytes past the region) fail with -EINVAL, which
 * completes the request IBV_WC_LOC_QP_OP_ERR without a packet; a READ's
 * answer that cannot be placed is IBV_WC_LOC_PROT_ERR (rxe_comp.c
 * do_read). Either moves the QP to error: the request behind is flushed.
 * RC with one SGE and with a list, UD with one SGE and with a list (the
 * drop-in gathers that one at the post, through the QP's PD only). */
static int bad_sges(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct side a, b;
	side_open(&a, all);
	side_open(&b, all);
	CHECK(!ibv_destroy_qp(a.qp), "destroy qp");
	a.qp = create_qp_caps(a.pd, a.cq, 2, 1, 0, NULL);
	CHECK(a.qp, "an RC QP of two send SGEs: %s", strerror(errno));
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, all);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	char *obuf = aligned_alloc(64, 4096);
	memset(obuf, 0x5a, 4096);
	struct ibv_mr *other = ibv_reg_mr(pd2, obuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pd2 && other, "a region of another PD");
	const struct ibv_sge bad[3] = {
		{ (uintptr_t)a.buf, 64, a.mr->lkey ^ 0x5a5a0000 },	/* no region */
		{ (uintptr_t)obuf, 64, other->lkey },			/* another PD */
		{ (uintptr_t)a.buf + LEN - 32, 64, a.mr->lkey },	/* past the region */
	};
	const char *kind[3] = { "a key of no region", "a region of another PD", "past the region" };
	fill(a.buf, LEN, 4);
	char a0[LEN];
	memcpy(a0, a.buf, LEN);
	uint64_t id = 1000;

	/* RC: WRITE and SEND with the bad SGE alone and second in a list. */
	for (int k = 0; k < 3; k++) {
		for (int n = 1; n <= 2; n++) {
			for (int op = 0; op < 2; op++) {
				struct ibv_sge sg[2] = { { (uintptr_t)a.buf + 128, 16, a.mr->lkey }, bad[k] };
				if (n == 1)
					sg[0] = bad[k];
				enum ibv_wr_opcode wop = op ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
				if (wop == IBV_WR_SEND) {
					struct ibv_sge rs = { (uintptr_t)b.buf, 1024, b.mr->lkey };
					EXPECT_RET(post_list_recv(&b, id + 9, &rs, 1), 0);
				}
				EXPECT_RET(post_list_send(&a, wop, id, sg, n, 0, &b, 0), 0);
				struct ibv_sge good = { (uintptr_t)a.buf, 64, a.mr->lkey };
				EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_WRITE, id + 1, &good, 1, 0, &b,
							  2048), 0);
				expect(&a, id, 0, IBV_WC_LOC_QP_OP_ERR);
				expect(&a, id + 1, 0, IBV_WC_WR_FLUSH_ERR);
				expect_qp_error(a.qp, kind[k]);
				for (int i = 0; i < LEN; i++)
					CHECK(b.buf[i] == 0, "%s (%d SGEs, op %d): byte %d landed", kind[k],
					      n, wop, i);
				reconnect(&a, &b, all);
				if (wop == IBV_WR_SEND) /* b's receive, flushed by the reset */
					while (ibv_poll_cq(b.cq, 1, &(struct ibv_wc){ 0 }) > 0)
						;
				id += 10;
			}
		}
		/* A READ into the bad SGE: the answer cannot be placed. */
		struct ibv_sge rd = bad[k];
		EXPECT_RET(post_list_send(&a, IBV_WR_RDMA_READ, id, &rd, 1, 0, &b, 0), 0);
		expect(&a, id, 0, IBV_WC_LOC_PROT_ERR);
		expect_qp_error(a.qp, kind[k]);
		CHECK(!memcmp(a.buf, a0, LEN), "%s: a READ's answer landed", kind[k]);
		reconnect(&a, &b, all);
		id += 10;
	}
	for (int i = 0; i < 4096; i++)
		CHECK(obuf[i] == 0x5a, "the other PD's region changed at %d", i);

	/* UD: the same three, alone and second in a list of two. */
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(rcq, "ibv_create_cq");
	struct ibv_qp *v = ud_qp_sges(a.pd, rcq, 1);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	aa.grh.dgid = gid1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(a.pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	char *rcv = aligned_alloc(64, 2048);
	memset(rcv, 0, 2048);
	struct ibv_mr *rmr = ibv_reg_mr(a.pd, rcv, 2048, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rmr, "ibv_reg_mr");
	ud_recv(v, rmr, 900, rcv, GRH + 1024);
	for (int k = 0; k < 3; k++) {
		for (int n = 1; n <= 2; n++) {
			struct ibv_qp *u = ud_qp_sges(a.pd, a.cq, 2);
			struct ibv_sge sg[2] = { { (uintptr_t)a.buf + 128, 16, a.mr->lkey }, bad[k] };
			if (n == 1)
				sg[0] = bad[k];
			struct ibv_send_wr w = { .wr_id = id, .sg_list = sg, .num_sge = n,
						 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
					   *wbad;
			w.wr.ud.ah = ah;
			w.wr.ud.remote_qpn = v->qp_num;
			w.wr.ud.remote_qkey = QKEY;
			EXPECT_RET(ibv_post_send(u, &w, &wbad), 0);
			struct ibv_sge good = { (uintptr_t)a.buf, 8, a.mr->lkey };
			w.wr_id = id + 1;
			w.sg_list = &good;
			w.num_sge = 1;
			EXPECT_RET(ibv_post_send(u, &w, &wbad), 0);
			struct ibv_wc wc = wait_wc(a.cq);
			CHECK(wc.wr_id == id && wc.status == IBV_WC_LOC_QP_OP_ERR,
			      "UD, %s (%d SGEs): wr %llu %s", kind[k], n, (unsigned long long)wc.wr_id,
			      ibv_wc_status_str(wc.status));
			wc = wait_wc(a.cq);
			CHECK(wc.wr_id == id + 1 && wc.status == IBV_WC_WR_FLUSH_ERR,
			      "UD, %s (%d SGEs): the next send flushed, got %s", kind[k], n,
			      ibv_wc_status_str(wc.status));
			expect_qp_error(u, kind[k]);
			EXPECT_RET(ibv_destroy_qp(u), 0);
			id += 10;
		}
	}
	/* Nothing reached v: its receive takes the next datagram, a good one. */
	struct ibv_qp *u = ud_qp_sges(a.pd, a.cq, 1);
	struct ibv_sge good = { (uintptr_t)a.buf + 300, 8, a.mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &good, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *wbad;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = v->qp_num;
	w.wr.ud.remote_qkey = QKEY;
	EXPECT_RET(ibv_post_send(u, &w, &wbad), 0);
	expect(&a, id, IBV_WC_SEND, IBV_WC_SUCCESS);
	struct ibv_wc rw = wait_wc(rcq);
	CHECK(rw.wr_id == 900 && rw.status == IBV_WC_SUCCESS && rw.byte_len == GRH + 8 &&
	      rw.src_qp == u->qp_num, "the receive got the good datagram: wr %llu len %u",
	      (unsigned long long)rw.wr_id, rw.byte_len);
	CHECK(!memcmp(rcv + GRH, a.buf + 300, 8), "its bytes");
	CHECK(ibv_poll_cq(rcq, 1, &rw) == 0, "nothing else arrived");

	EXPECT_RET(ibv_destroy_qp(u), 0);
	EXPECT_RET(ibv_destroy_qp(v), 0);
	EXPECT_RET(ibv_destroy_ah(ah), 0);
	EXPECT_RET(ibv_dereg_mr(rmr), 0);
	free(rcv);
	EXPECT_RET(ibv_dereg_mr(other), 0);
	free(obuf);
	EXPECT_RET(ibv_dealloc_pd(pd2), 0);
	CHECK(!ibv_destroy_qp(a.qp) && !ibv_destroy_qp(b.qp), "destroy qp");
	CHECK(!ibv_dereg_mr(a.mr) && !ibv_dereg_mr(b.mr), "dereg");
	EXPECT_RET(ibv_destroy_cq(rcq), 0);
	CHECK(!ibv_destroy_cq(a.cq) && !ibv_destroy_cq(b.cq), "destroy cq");
	CHECK(!ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc pd");
	return 0;
}

/* ---- checks: bad scatter/gather entries in receives; a UD send's AH of another PD ---- */

/* The next completion of `cq`: `wr_id` with `st`. */
static void expect_on(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, const char *what)
{
	struct ibv_wc wc = wait_wc(cq);
	CHECK(wc.wr_id == wr_id && wc.status == st, "%s: wr %llu status %s, wanted wr %llu %s", what,
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
	      (unsigned long long)wr_id, ibv_wc_status_str(st));
}

static void expect_bytes(const char *p, size_t len, const char *want, const char *what)
{
	for (size_t i = 0; i < len; i++)
		CHECK(p[i] == want[i], "%s: byte %zu is %#x, was %#x", what, i,
		      (unsigned char)p[i], (unsigned char)want[i]);
}

/* As rxe: its rxe_post_one_recv (rdma-core providers/rxe/rxe.c, and
 * rxe_post_srq_recv through it) checks the queue and num_sge, no key, so
 * a receive whose SGE names no region, a region of another PD, bytes past
 * its region or a region without LOCAL_WRITE is posted. It fails when a
 * message's bytes reach that SGE: rxe_resp.c send_data_in -> rxe_mr.c
 * copy_data (lookup_mr with the QP's PD and LOCAL_WRITE, mr_check_range)
 * is RESPST_ERR_MALFORMED_WQE, "All, Class A": the receive completes
 * IBV_WC_LOC_QP_OP_ERR and the QP goes to error; on RC the responder
 * NAKs remote operational error and the SEND completes IBV_WC_REM_OP_ERR
 * (rxe_comp.c), the sender's QP to error too. The entries before the bad
 * one are filled (copy_data walks the list); a message of no bytes
 * touches no entry and succeeds. RC with one SGE and a list, an SRQ
 * list, UD with one SGE and a list (the GRH area lands in the good
 * entry). And a UD send whose address handle is of another PD: posted,
 * IBV_WC_LOC_QP_OP_ERR, nothing sent, the QP to error (rxe_av.c
 * rxe_get_av: "PDs don't match for AH and QP"; rxe_req.c). */
static int bad_recvs(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct side a, b;
	side_open(&a, all);
	side_open(&b, all);
	CHECK(!ibv_destroy_qp(b.qp), "destroy qp");
	b.qp = create_qp_caps(b.pd, b.cq, 1, 2, 0, NULL);
	CHECK(b.qp, "an RC QP of two receive SGEs: %s", strerror(errno));
	connect_qp(a.qp, b.qp->qp_num, all);
	connect_qp(b.qp, a.qp->qp_num, all);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	char *obuf = aligned_alloc(64, 4096), *nbuf = aligned_alloc(64, 4096);
	memset(obuf, 0x5a, 4096);
	memset(nbuf, 0x6b, 4096);
	struct ibv_mr *other = ibv_reg_mr(pd2, obuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *nowrite = ibv_reg_mr(b.pd, nbuf, 4096, 0);
	CHECK(pd2 && other && nowrite, "a region of another PD, one without LOCAL_WRITE: %s",
	      strerror(errno));
	const struct ibv_sge bad[4] = {
		{ (uintptr_t)b.buf, 64, b.mr->lkey ^ 0x5a5a0000 },	/* no region */
		{ (uintptr_t)obuf, 64, other->lkey },			/* another PD */
		{ (uintptr_t)b.buf + LEN - 32, 64, b.mr->lkey },	/* past the region */
		{ (uintptr_t)nbuf, 64, nowrite->lkey },			/* no LOCAL_WRITE */
	};
	const char *kind[4] = { "a key of no region", "a region of another PD", "past the region",
				"a region without LOCAL_WRITE" };
	char o0[4096], n0[4096], zero[LEN], want[LEN];
	memcpy(o0, obuf, 4096);
	memcpy(n0, nbuf, 4096);
	memset(zero, 0, LEN);
	fill(a.buf, LEN, 6);
	uint64_t id = 2000;
	char what[128];

	/* RC: the bad SGE alone, and second after a 16-byte entry; a 64-byte SEND. */
	for (int k = 0; k < 4; k++) {
		for (int n = 1; n <= 2; n++) {
			snprintf(what, sizeof(what), "RC receive, %s (%d SGEs)", kind[k], n);
			struct ibv_sge sg[2] = { { (uintptr_t)b.buf + 128, 16, b.mr->lkey }, bad[k] };
			if (n == 1)
				sg[0] = bad[k];
			EXPECT_RET(post_list_recv(&b, id + 9, sg, n), 0);
			struct ibv_sge src = { (uintptr_t)a.buf, 64, a.mr->lkey };
			EXPECT_RET(post_list_send(&a, IBV_WR_SEND, id, &src, 1, 0, NULL, 0), 0);
			expect_on(b.cq, id + 9, IBV_WC_LOC_QP_OP_ERR, what);
			expect_on(a.cq, id, IBV_WC_REM_OP_ERR, what);
			expect_qp_error(b.qp, what);
			expect_qp_error(a.qp, what);
			memset(want, 0, LEN);
			if (n == 2)
				memcpy(want + 128, a.buf, 16);
			expect_bytes(b.buf, LEN, want, what);
			expect_bytes(obuf, 4096, o0, what);
			expect_bytes(nbuf, 4096, n0, what);
			memset(b.buf, 0, LEN);
			reconnect(&a, &b, all);
			id += 10;
		}
	}
	/* A SEND of no bytes into such a receive succeeds: nothing is copied. */
	for (int k = 0; k < 4; k++) {
		snprintf(what, sizeof(what), "RC receive, %s, a SEND of 0 bytes", kind[k]);
		struct ibv_sge sg = bad[k];
		EXPECT_RET(post_list_recv(&b, id + 9, &sg, 1), 0);
		EXPECT_RET(post_list_send(&a, IBV_WR_SEND, id, NULL, 0, 0, NULL, 0), 0);
		struct ibv_wc wc = wait_wc(b.cq);
		CHECK(wc.wr_id == id + 9 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 0,
		      "%s: wr %llu %s len %u", what, (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status), wc.byte_len);
		expect_on(a.cq, id, IBV_WC_SUCCESS, what);
		id += 10;
	}
	expect_bytes(b.buf, LEN, zero, "after the SENDs of 0 bytes");

	/* An SRQ receive: a 16-byte entry, then one of another PD. */
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 4, .max_sge = 2 } };
	struct ibv_srq *srq = ibv_create_srq(b.pd, &si);
	CHECK(srq, "ibv_create_srq: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = b.cq, .recv_cq = b.cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	CHECK(!ibv_destroy_qp(b.qp), "destroy qp");
	b.qp = ibv_create_qp(b.pd, &ia);
	CHECK(b.qp, "an RC QP on the SRQ: %s", strerror(errno));
	reconnect(&a, &b, all);
	for (int k = 0; k < 4; k++) {
		snprintf(what, sizeof(what), "SRQ receive, %s second", kind[k]);
		struct ibv_sge sg[2] = { { (uintptr_t)b.buf + 256, 16, b.mr->lkey }, bad[k] };
		struct ibv_recv_wr rw = { .wr_id = id + 9, .sg_list = sg, .num_sge = 2 }, *rbad;
		EXPECT_RET(ibv_post_srq_recv(srq, &rw, &rbad), 0);
		struct ibv_sge src = { (uintptr_t)a.buf + 1000, 64, a.mr->lkey };
		EXPECT_RET(post_list_send(&a, IBV_WR_SEND, id, &src, 1, 0, NULL, 0), 0);
		expect_on(b.cq, id + 9, IBV_WC_LOC_QP_OP_ERR, what);
		expect_on(a.cq, id, IBV_WC_REM_OP_ERR, what);
		expect_qp_error(b.qp, what);
		memset(want, 0, LEN);
		memcpy(want + 256, a.buf + 1000, 16);
		expect_bytes(b.buf, LEN, want, what);
		expect_bytes(obuf, 4096, o0, what);
		expect_bytes(nbuf, 4096, n0, what);
		memset(b.buf, 0, LEN);
		/* b's QP in error reported its last WQE: drain nothing else. */
		reconnect(&a, &b, all);
		id += 10;
	}

	/* UD: a receive of one bad SGE, a good one behind it; and a QP of
	 * three receive SGEs whose list is a 40-byte entry (the GRH area),
	 * then the bad one. */
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(rcq, "ibv_create_cq");
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	aa.grh.dgid = gid1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(b.pd, &aa);
	CHECK(ah, "ibv_create_ah: %s", strerror(errno));
	struct ibv_qp *u = ud_qp_sges(b.pd, a.cq, 1);
	const struct ibv_sge ud_bad[4] = {
		{ (uintptr_t)b.buf, GRH + 64, b.mr->lkey ^ 0x5a5a0000 },
		{ (uintptr_t)obuf, GRH + 64, other->lkey },
		{ (uintptr_t)b.buf + LEN - 16, GRH + 64, b.mr->lkey },
		{ (uintptr_t)nbuf, GRH + 64, nowrite->lkey },
	};
	for (int k = 0; k < 4; k++) {
		for (int n = 1; n <= 2; n++) {
			snprintf(what, sizeof(what), "UD receive, %s (%d SGEs)", kind[k], n);
			struct ibv_qp_init_attr ua = {
				.send_cq = rcq, .recv_cq = rcq, .qp_type = IBV_QPT_UD,
				.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
					 .max_recv_sge = n == 1 ? 1 : 3 },
			};
			struct ibv_qp *v = ibv_create_qp(b.pd, &ua);
			CHECK(v, "%s: ibv_create_qp: %s", what, strerror(errno));
			struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
			CHECK(!ibv_modify_qp(v, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_QKEY) &&
			      !ibv_modify_qp(v, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR },
					     IBV_QP_STATE) &&
			      !ibv_modify_qp(v, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS,
									.sq_psn = 7 },
					     IBV_QP_STATE | IBV_QP_SQ_PSN), "%s: to RTS", what);
			struct ibv_sge sg[2] = { { (uintptr_t)b.buf + 512, GRH, b.mr->lkey }, ud_bad[k] };
			if (n == 1)
				sg[0] = ud_bad[k];
			struct ibv_recv_wr rw = { .wr_id = id + 9, .sg_list = sg, .num_sge = n }, *rbad;
			EXPECT_RET(ibv_post_recv(v, &rw, &rbad), 0);
			struct ibv_sge behind = { (uintptr_t)b.buf + 2048, GRH + 1024, b.mr->lkey };
			rw = (struct ibv_recv_wr){ .wr_id = id + 8, .sg_list = &behind, .num_sge = 1 };
			EXPECT_RET(ibv_post_recv(v, &rw, &rbad), 0);
			struct ibv_sge src = { (uintptr_t)b.buf + 4096, 64, b.mr->lkey };
			memcpy(b.buf + 4096, a.buf, 64);
			struct ibv_send_wr w = { .wr_id = id, .sg_list = &src, .num_sge = 1,
						 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
					   *wbad;
			w.wr.ud.ah = ah;
			w.wr.ud.remote_qpn = v->qp_num;
			w.wr.ud.remote_qkey = QKEY;
			EXPECT_RET(ibv_post_send(u, &w, &wbad), 0);
			expect_on(a.cq, id, IBV_WC_SUCCESS, what);
			expect_on(rcq, id + 9, IBV_WC_LOC_QP_OP_ERR, what);
			expect_on(rcq, id + 8, IBV_WC_WR_FLUSH_ERR, what);
			expect_qp_error(v, what);
			memset(want, 0, LEN);
			memcpy(want + 4096, a.buf, 64);
			if (n == 2) {
				/* The GRH area: 20 zero bytes, then the IPv4 header. */
				memcpy(want + 512 + 20, b.buf + 512 + 20, 20);
				CHECK((unsigned char)b.buf[512 + 20] == 0x45,
				      "%s: the GRH area landed in the first entry", what);
			}
			expect_bytes(b.buf, LEN, want, what);
			expect_bytes(obuf, 4096, o0, what);
			expect_bytes(nbuf, 4096, n0, what);
			memset(b.buf, 0, LEN);
			EXPECT_RET(ibv_destroy_qp(v), 0);
			id += 10;
		}
	}

	/* A UD send through an AH of another PD: posted, then fails. */
	struct ibv_ah *ah2 = ibv_create_ah(pd2, &aa);
	CHECK(ah2, "ibv_create_ah in another PD: %s", strerror(errno));
	struct ibv_qp *v = ud_qp_sges(b.pd, rcq, 1);
	ud_recv(v, b.mr, id + 9, b.buf, GRH + 1024);
	struct ibv_sge src = { (uintptr_t)b.buf + 4096, 8, b.mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &src, .num_sge = 1,
				 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *wbad;
	w.wr.ud.ah = ah2;
	w.wr.ud.remote_qpn = v->qp_num;
	w.wr.ud.remote_qkey = QKEY;
	EXPECT_RET(ibv_post_send(u, &w, &wbad), 0);
	w.wr_id = id + 1;
	w.wr.ud.ah = ah;
	EXPECT_RET(ibv_post_send(u, &w, &wbad), 0);
	expect_on(a.cq, id, IBV_WC_LOC_QP_OP_ERR, "a UD send through an AH of another PD");
	expect_on(a.cq, id + 1, IBV_WC_WR_FLUSH_ERR, "the send behind it");
	expect_qp_error(u, "a UD send through an AH of another PD");
	/* Nothing was sent: v's receive waits (a good datagram takes it). */
	struct ibv_qp *u2 = ud_qp_sges(b.pd, a.cq, 1);
	w.wr_id = id + 2;
	EXPECT_RET(ibv_post_send(u2, &w, &wbad), 0);
	expect_on(a.cq, id + 2, IBV_WC_SUCCESS, "a good send");
	struct ibv_wc rw = wait_wc(rcq);
	CHECK(rw.wr_id == id + 9 && rw.status == IBV_WC_SUCCESS && rw.src_qp == u2->qp_num,
	      "the receive took the good datagram: wr %llu %s from %u", (unsigned long long)rw.wr_id,
	      ibv_wc_status_str(rw.status), rw.src_qp);

	EXPECT_RET(ibv_destroy_qp(u2), 0);
	EXPECT_RET(ibv_destroy_qp(u), 0);
	EXPECT_RET(ibv_destroy_qp(v), 0);
	EXPECT_RET(ibv_destroy_ah(ah2), 0);
	EXPECT_RET(ibv_destroy_ah(ah), 0);
	EXPECT_RET(ibv_dereg_mr(other), 0);
	EXPECT_RET(ibv_dereg_mr(nowrite), 0);
	free(obuf);
	free(nbuf);
	EXPECT_RET(ibv_dealloc_pd(pd2), 0);
	CHECK(!ibv_destroy_qp(a.qp) && !ibv_destroy_qp(b.qp), "destroy qp");
	EXPECT_RET(ibv_destroy_srq(srq), 0);
	CHECK(!ibv_dereg_mr(a.mr) && !ibv_dereg_mr(b.mr), "dereg");
	EXPECT_RET(ibv_destroy_cq(rcq), 0);
	CHECK(!ibv_destroy_cq(a.cq) && !ibv_destroy_cq(b.cq), "destroy cq");
	CHECK(!ibv_dealloc_pd(a.pd) && !ibv_dealloc_pd(b.pd), "dealloc pd");
	return 0;
}

static int ud(void)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	CHECK(pd && cq, "pd/cq");
	char *buf = aligned_alloc(64, 4 * LEN);
	memset(buf, 0, 4 * LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4 * LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr");
	char *snd = buf, *rcv = buf + LEN, *rcv2 = buf + 2 * LEN, *rcv3 = buf + 3 * LEN;


	struct ibv_qp *a = ud_qp(pd, cq, 10), *b = ud_qp(pd, cq, 20);

	/* Address handles: bad attributes, then the device's own GID. */
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	aa.grh.dgid = gid1;
	aa.grh.sgid_index = 1;
	/* The frames carry the route's hop limit, not this (the kernel
	 * resolves RoCE addresses so, for rxe too). */
	aa.grh.hop_limit = 1;
	aa.grh.traffic_class = 0;
	struct ibv_ah_attr bad_attr = aa;
	bad_attr.is_global = 0;
	EXPECT_NULL_ERRNO(ibv_create_ah(pd, &bad_attr), EINVAL);
	bad_attr = aa;
	bad_attr.port_num = 2;
	EXPECT_NULL_ERRNO(ibv_create_ah(pd, &bad_attr), EINVAL);
	bad_attr = aa;
	bad_attr.grh.sgid_index = 7;
	EXPECT_NULL_ERRNO(ibv_create_ah(pd, &bad_attr), EINVAL);
	EXPECT_NULL_ERRNO(ibv_create_ah(pd, NULL), EINVAL);
	EXPECT_NULL_ERRNO(ibv_create_ah(NULL, &aa), EINVAL);
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	CHECK(ah, "ibv_create_ah (own GID): %s", strerror(errno));
	CHECK(ah->pd == pd && ah->context == ctx, "ibv_ah fields");
	EXPECT_RET(ibv_dealloc_pd(pd), EBUSY);

	/* SEND a -> b: the GRH area, the payload, the completion. */
	fill(snd, 300, 3);
	ud_recv(b, mr, 100, rcv, GRH + 1024);
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 1, snd, 300, ah, b->qp_num, QKEY, 1), 0);
	struct ibv_wc rw = send_and_recv(cq, 1);
	check_recv(&rw, 100, 300, a->qp_num, b->qp_num, 0);
	check_grh(rcv, snd, 300, 0);
	int ttl = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_default_ttl", "r");
	CHECK(f && fscanf(f, "%d", &ttl) == 1, "reading net.ipv4.ip_default_ttl");
	fclose(f);
	CHECK(((const unsigned char *)rcv)[20 + 8] == ttl,
	      "TTL %d: the route's (%d), not the AH's 1", ((const unsigned char *)rcv)[20 + 8], ttl);

	/* The AH that answers: libibverbs' own computation over the GRH. */
	struct ibv_ah_attr back;
	memset(&back, 0xee, sizeof(back));
	CHECK(!ibv_init_ah_from_wc(ctx, 1, &rw, (struct ibv_grh *)rcv, &back), "ibv_init_ah_from_wc");
	CHECK(back.is_global == 1 && !memcmp(back.grh.dgid.raw, gid1.raw, 16) &&
	      back.grh.sgid_index == 1 && back.grh.hop_limit == ttl && back.grh.traffic_class == 0 &&
	      back.port_num == 1 && back.dlid == 0 && back.sl == rw.sl && back.grh.flow_label == 0,
	      "ibv_init_ah_from_wc: global %d sgid_index %d hop %d", back.is_global,
	      back.grh.sgid_index, back.grh.hop_limit);
	struct ibv_ah *reply = ibv_create_ah_from_wc(pd, &rw, (struct ibv_grh *)rcv, 1);
	CHECK(reply, "ibv_create_ah_from_wc: %s", strerror(errno));
	/* Without IBV_WC_GRH: no GRH in the attributes. */
	struct ibv_wc nogrh = rw;
	nogrh.wc_flags = 0;
	CHECK(!ibv_init_ah_from_wc(ctx, 1, &nogrh, (struct ibv_grh *)rcv, &back) && !back.is_global,
	      "ibv_init_ah_from_wc without a GRH");

	/* SEND_WITH_IMM b -> a with the AH made from the completion. */
	fill(snd + 2000, 777, 9);
	ud_recv(a, mr, 200, rcv2, GRH + 1024);
	EXPECT_RET(ud_send(b, mr, IBV_WR_SEND_WITH_IMM, 2, snd + 2000, 777, reply, rw.src_qp, QKEY, 1), 0);
	rw = send_and_recv(cq, 2);
	check_recv(&rw, 200, 777, b->qp_num, a->qp_num, 1);
	check_grh(rcv2, snd + 2000, 777, 1);
	EXPECT_RET(ibv_destroy_ah(reply), 0);

	/* A zero-length SEND: the GRH area alone. */
	ud_recv(b, mr, 101, rcv, GRH + 1024);
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 3, snd, 0, ah, b->qp_num, QKEY, 0), 0);
	rw = send_and_recv(cq, 3);
	check_recv(&rw, 101, 0, a->qp_num, b->qp_num, 0);

	/* Bad input: NULL and destroyed AHs, an RC opcode, two SGEs. */
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 9, snd, 10, NULL, b->qp_num, QKEY, 1), EINVAL);
	struct ibv_ah *gone = ibv_create_ah(pd, &aa);
	CHECK(gone, "a second AH");
	EXPECT_RET(ibv_destroy_ah(gone), 0);
	EXPECT_RET(ibv_destroy_ah(gone), EINVAL);
	EXPECT_RET(ibv_destroy_ah(NULL), EINVAL);
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 9, snd, 10, gone, b->qp_num, QKEY, 1), EINVAL);
	EXPECT_RET(ud_send(a, mr, IBV_WR_RDMA_WRITE, 9, snd, 10, ah, b->qp_num, QKEY, 1), EINVAL);
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 9, snd, 10, ah, b->qp_num, QKEY, 2), EINVAL);
	struct ibv_sge two[2] = { { (uintptr_t)rcv, 8, mr->lkey }, { (uintptr_t)rcv, 8, mr->lkey } };
	struct ibv_recv_wr rw2 = { .wr_id = 9, .sg_list = two, .num_sge = 2 }, *rbad;
	EXPECT_RET(ibv_post_recv(b, &rw2, &rbad), EINVAL);

	/* Longer than the MTU (1024): completes, nothing arrives; a wrong
	 * Q_Key: dropped. The receive posted stays for the next datagram. */
	ud_recv(b, mr, 102, rcv3, GRH + 4000);
	fill(snd, 2000, 5);
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 4, snd, 2000, ah, b->qp_num, QKEY, 1), 0);
	struct ibv_wc wc = wait_wc(cq);
	CHECK(wc.wr_id == 4 && wc.status == IBV_WC_SUCCESS, "a UD send over the MTU completes");
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 5, snd, 50, ah, b->qp_num, 0x22222222, 1), 0);
	wc = wait_wc(cq);
	CHECK(wc.wr_id == 5 && wc.status == IBV_WC_SUCCESS, "a send with a wrong Q_Key completes");
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 6, snd + 1, 60, ah, b->qp_num, QKEY, 1), 0);
	rw = send_and_recv(cq, 6);
	check_recv(&rw, 102, 60, a->qp_num, b->qp_num, 0);
	check_grh(rcv3, snd + 1, 60, 0);

	/* SGE lists and inline data, gathered into one datagram. */
	struct ibv_qp_init_attr ga = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 4, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp *g = ibv_create_qp(pd, &ga);
	CHECK(g, "UD QP with SGE lists and inline data: %s", strerror(errno));
	CHECK(ga.cap.max_send_sge == 4 && ga.cap.max_inline_data == 64,
	      "caps: sge %u inline %u", ga.cap.max_send_sge, ga.cap.max_inline_data);
	{
		struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
		CHECK(!ibv_modify_qp(g, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) &&
		      !ibv_modify_qp(g, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR }, IBV_QP_STATE) &&
		      !ibv_modify_qp(g, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 1 },
				     IBV_QP_STATE | IBV_QP_SQ_PSN), "g to RTS");
	}
	fill(snd, 3 * 1024, 13);
	struct ibv_sge gl[4] = { { (uintptr_t)snd + 100, 100, mr->lkey },
				 { (uintptr_t)snd + 5, 0, mr->lkey },
				 { (uintptr_t)snd + 2000, 250, mr->lkey },
				 { (uintptr_t)snd + 17, 3, mr->lkey } };
	char want[400];
	memcpy(want, snd + 100, 100);
	memcpy(want + 100, snd + 2000, 250);
	memcpy(want + 350, snd + 17, 3);
	for (int round = 0; round < 6; round++) { /* past the staging ring (4 slots) */
		ud_recv(b, mr, 400 + round, rcv, GRH + 1024);
		struct ibv_send_wr w = { .wr_id = 40 + round, .sg_list = gl, .num_sge = 4,
					 .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *wbad;
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = b->qp_num;
		w.wr.ud.remote_qkey = QKEY;
		EXPECT_RET(ibv_post_send(g, &w, &wbad), 0);
		rw = send_and_recv(cq, 40 + round);
		check_recv(&rw, 400 + round, 353, g->qp_num, b->qp_num, 0);
		check_grh(rcv, want, 353, 0);
	}
	/* Inline: from a stack buffer clobbered right after the post. */
	{
		char stack[64];
		memset(stack, 0x3c, sizeof(stack));
		struct ibv_sge il[2] = { { (uintptr_t)stack, 40, 0 }, { (uintptr_t)stack + 50, 14, 0 } };
		struct ibv_send_wr w = { .wr_id = 50, .sg_list = il, .num_sge = 2,
					 .opcode = IBV_WR_SEND_WITH_IMM,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *wbad;
		w.imm_data = htobe32(0x5a5a0001);
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = b->qp_num;
		w.wr.ud.remote_qkey = QKEY;
		ud_recv(b, mr, 500, rcv, GRH + 1024);
		EXPECT_RET(ibv_post_send(g, &w, &wbad), 0);
		memset(stack, 0x77, sizeof(stack));
		char iw[54];
		memset(iw, 0x3c, sizeof(iw));
		rw = send_and_recv(cq, 50);
		check_recv(&rw, 500, 54, g->qp_num, b->qp_num, 1);
		check_grh(rcv, iw, 54, 1);
		/* More inline bytes than the QP's, more SGEs than its: EINVAL. */
		char big_inline[65];
		struct ibv_sge bl = { (uintptr_t)big_inline, 65, 0 };
		w.sg_list = &bl;
		w.num_sge = 1;
		EXPECT_RET(ibv_post_send(g, &w, &wbad), EINVAL);
		struct ibv_sge five[5] = { gl[0], gl[1], gl[2], gl[3], gl[0] };
		w.sg_list = five;
		w.num_sge = 5;
		w.send_flags = IBV_SEND_SIGNALED;
		EXPECT_RET(ibv_post_send(g, &w, &wbad), EINVAL);
		/* (An SGE with a key that names no region is posted and fails
		 * the send, as rxe: the `checks` subcommand.) */
		/* A list longer than the MTU: completes, nothing arrives (the
		 * receive posted next gets the next datagram). */
		struct ibv_sge longl[2] = { { (uintptr_t)snd, 700, mr->lkey },
					    { (uintptr_t)snd + 1000, 700, mr->lkey } };
		w.wr_id = 51;
		w.sg_list = longl;
		w.num_sge = 2;
		ud_recv(b, mr, 501, rcv3, GRH + 2048);
		EXPECT_RET(ibv_post_send(g, &w, &wbad), 0);
		wc = wait_wc(cq);
		CHECK(wc.wr_id == 51 && wc.status == IBV_WC_SUCCESS, "a gathered send over the MTU completes");
		w.wr_id = 52;
		w.sg_list = gl;
		w.num_sge = 4;
		EXPECT_RET(ibv_post_send(g, &w, &wbad), 0);
		rw = send_and_recv(cq, 52);
		check_recv(&rw, 501, 353, g->qp_num, b->qp_num, 1); /* still SEND_WITH_IMM */
		check_grh(rcv3, want, 353, 1);
	}

	/* Receive SGE lists: the GRH area and the message scattered. */
	{
		struct ibv_qp_init_attr ha = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
			.cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 3 },
		};
		struct ibv_qp *h = ibv_create_qp(pd, &ha);
		CHECK(h && ha.cap.max_recv_sge == 3, "UD QP with 3 receive SGEs: %s", strerror(errno));
		struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
		CHECK(!ibv_modify_qp(h, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) &&
		      !ibv_modify_qp(h, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR }, IBV_QP_STATE),
		      "h to RTR");
		for (int round = 0; round < 5; round++) { /* past the 2 slots */
			memset(rcv, 0xa5, 2 * LEN);
			struct ibv_sge sl[3] = { { (uintptr_t)rcv + 7, 30, mr->lkey },
						 { (uintptr_t)rcv + 1000, 50, mr->lkey },
						 { (uintptr_t)rcv2 + 3, 1024, mr->lkey } };
			struct ibv_recv_wr r = { .wr_id = 600 + round, .sg_list = sl, .num_sge = 3 }, *rb;
			EXPECT_RET(ibv_post_recv(h, &r, &rb), 0);
			fill(snd, 200, 20 + round);
			EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 60 + round, snd, 200, ah, h->qp_num, QKEY, 1), 0);
			rw = send_and_recv(cq, 60 + round);
			check_recv(&rw, 600 + round, 200, a->qp_num, h->qp_num, 0);
			char whole[GRH + 200];
			memcpy(whole, rcv + 7, 30);
			memcpy(whole + 30, rcv + 1000, 50);
			memcpy(whole + 80, rcv2 + 3, GRH + 200 - 80);
			check_grh(whole, snd, 200, 0);
			CHECK((unsigned char)rcv[6] == 0xa5 && (unsigned char)rcv[37] == 0xa5 &&
			      (unsigned char)rcv[1050] == 0xa5 && (unsigned char)rcv2[3 + 160] == 0xa5,
			      "nothing written outside the list");
		}
		/* A list too short for the GRH area and the message. */
		struct ibv_sge sl[2] = { { (uintptr_t)rcv, 30, mr->lkey }, { (uintptr_t)rcv + 100, 30, mr->lkey } };
		struct ibv_recv_wr r = { .wr_id = 700, .sg_list = sl, .num_sge = 2 }, *rb;
		EXPECT_RET(ibv_post_recv(h, &r, &rb), 0);
		EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 70, snd, 100, ah, h->qp_num, QKEY, 1), 0);
		rw = send_and_recv(cq, 70);
		CHECK(rw.wr_id == 700 && rw.status == IBV_WC_LOC_QP_OP_ERR, "short list: %s",
		      ibv_wc_status_str(rw.status));
		struct ibv_sge four[4] = { sl[0], sl[1], sl[0], sl[1] };
		r.sg_list = four;
		r.num_sge = 4;
		EXPECT_RET(ibv_post_recv(h, &r, &rb), EINVAL);
		CHECK(!ibv_destroy_qp(h), "destroy h");
	}

	/* The extended API: ibv_wr_set_ud_addr + ibv_wr_send on a UD QP of
	 * ibv_create_qp_ex, into a QP whose CQ is an extended one. */
	struct ibv_cq_init_attr_ex cqa = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
					   IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_QP_NUM |
					   IBV_WC_EX_WITH_SL };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqa);
	CHECK(cqx, "ibv_create_cq_ex: %s", strerror(errno));
	struct ibv_qp *d = ud_qp(pd, ibv_cq_ex_to_cq(cqx), 30);
	struct ibv_qp_init_attr_ex xa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .pd = pd,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
	};
	struct ibv_qp *x = ibv_create_qp_ex(ctx, &xa);
	CHECK(x, "ibv_create_qp_ex UD: %s", strerror(errno));
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	CHECK(!ibv_modify_qp(x, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) &&
	      !ibv_modify_qp(x, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR }, IBV_QP_STATE) &&
	      !ibv_modify_qp(x, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 5 },
			     IBV_QP_STATE | IBV_QP_SQ_PSN), "extended UD QP to RTS");
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(x);
	CHECK(qx, "ibv_qp_to_qp_ex");
	fill(snd + 3000, 500, 11);
	ud_recv(d, mr, 300, rcv, GRH + 1024);
	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_ud_addr(qx, ah, d->qp_num, QKEY);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)snd + 3000, 500);
	EXPECT_RET(ibv_wr_complete(qx), 0);
	wc = wait_wc(cq);
	CHECK(wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND &&
	      wc.qp_num == x->qp_num, "extended UD send completion: %s", ibv_wc_status_str(wc.status));
	struct ibv_poll_cq_attr pa = { 0 };
	time_t end = time(NULL) + 20;
	int r;
	while ((r = ibv_start_poll(cqx, &pa)) == ENOENT && time(NULL) < end)
		;
	CHECK(r == 0, "ibv_start_poll: %d", r);
	CHECK(cqx->wr_id == 300 && cqx->status == IBV_WC_SUCCESS &&
	      ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_byte_len(cqx) == GRH + 500 &&
	      ibv_wc_read_src_qp(cqx) == x->qp_num && ibv_wc_read_qp_num(cqx) == d->qp_num &&
	      (ibv_wc_read_wc_flags(cqx) & IBV_WC_GRH) && ibv_wc_read_sl(cqx) == 0xa,
	      "extended CQ: wr %llu byte_len %u src_qp %#x flags %#x", (unsigned long long)cqx->wr_id,
	      ibv_wc_read_byte_len(cqx), ibv_wc_read_src_qp(cqx), ibv_wc_read_wc_flags(cqx));
	ibv_end_poll(cqx);
	check_grh(rcv, snd + 3000, 500, 0);
	/* The extended API refuses an RC operation on a UD QP. */
	ibv_wr_start(qx);
	qx->wr_id = 8;
	ibv_wr_rdma_write(qx, 1, 0);
	EXPECT_RET(ibv_wr_complete(qx), EOPNOTSUPP);

	/* A receive buffer too short for the GRH area and the payload: a
	 * local QP operation error, the QP in ERROR. */
	ud_recv(d, mr, 301, rcv, GRH + 10);
	EXPECT_RET(ud_send(a, mr, IBV_WR_SEND, 10, snd, 100, ah, d->qp_num, QKEY, 1), 0);
	wc = wait_wc(cq);
	CHECK(wc.wr_id == 10 && wc.status == IBV_WC_SUCCESS, "send 10");
	end = time(NULL) + 20;
	while ((r = ibv_start_poll(cqx, &pa)) == ENOENT && time(NULL) < end)
		;
	CHECK(r == 0 && cqx->wr_id == 301 && cqx->status == IBV_WC_LOC_QP_OP_ERR,
	      "a short UD receive: %s", ibv_wc_status_str(cqx->status));
	ibv_end_poll(cqx);
	memset(&m, 0, sizeof(m));
	struct ibv_qp_init_attr qi;
	CHECK(!ibv_query_qp(d, &m, IBV_QP_STATE, &qi) && m.qp_state == IBV_QPS_ERR,
	      "the QP of a short receive is in ERROR (%d)", m.qp_state);

	if (getenv("UD_HOLD")) {
		printf("hold\n");
		fflush(stdout);
		while (getchar() != EOF)
			;
	}
	CHECK(!ibv_destroy_qp(a) && !ibv_destroy_qp(b) && !ibv_destroy_qp(d) && !ibv_destroy_qp(x) &&
	      !ibv_destroy_qp(g),
	      "destroy UD QPs");
	EXPECT_RET(ibv_destroy_ah(ah), 0);
	CHECK(!ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) && !ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)),
	      "dereg/destroy cq");
	EXPECT_RET(ibv_dealloc_pd(pd), 0);
	return 0;
}

/* Whether an asynchronous event arrives within `ms`. */
static int async_event_within(int ms)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

static int srq_check(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_device_attr da;
	CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
	CHECK(da.max_srq > 0 && da.max_srq_wr >= 1024 && da.max_srq_sge == 27,
	      "SRQ limits: max_srq %d max_srq_wr %d max_srq_sge %d", da.max_srq, da.max_srq_wr,
	      da.max_srq_sge);

	struct side a1, a2, b;
	side_open(&a1, all);
	side_open(&a2, all);
	side_open(&b, all);

	/* rxe's creation checks. */
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 0, .max_sge = 1 } };
	EXPECT_NULL_ERRNO(ibv_create_srq(b.pd, &si), EINVAL);
	si.attr.max_wr = da.max_srq_wr + 1;
	EXPECT_NULL_ERRNO(ibv_create_srq(b.pd, &si), EINVAL);
	si.attr.max_wr = 8;
	si.attr.max_sge = da.max_srq_sge + 1;
	EXPECT_NULL_ERRNO(ibv_create_srq(b.pd, &si), EINVAL);
	si.attr.max_sge = 1;
	EXPECT_NULL_ERRNO(ibv_create_srq(NULL, &si), EINVAL);
	EXPECT_NULL_ERRNO(ibv_create_srq(b.pd, NULL), EINVAL);
	/* ibv_create_srq_ex: a basic SRQ of a PD is ibv_create_srq's; other
	 * types (XRC) have no create_srq_ex to go to. */
	struct ibv_srq_init_attr_ex sx = { .attr = { .max_wr = 4, .max_sge = 1 },
					   .comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE,
					   .srq_type = IBV_SRQT_BASIC, .pd = b.pd };
	struct ibv_srq *basic = ibv_create_srq_ex(ctx, &sx);
	CHECK(basic, "ibv_create_srq_ex of a basic SRQ: %s", strerror(errno));
	EXPECT_RET(ibv_destroy_srq(basic), 0);
	sx.srq_type = IBV_SRQT_XRC;
	EXPECT_NULL_ERRNO(ibv_create_srq_ex(ctx, &sx), EOPNOTSUPP);

	si.srq_context = &si;
	struct ibv_srq *srq = ibv_create_srq(b.pd, &si);
	CHECK(srq, "ibv_create_srq: %s", strerror(errno));
	CHECK(si.attr.max_wr >= 8 && srq->pd == b.pd && srq->context == ctx &&
	      srq->srq_context == &si, "the SRQ's fields");
	struct ibv_srq_attr sa;
	EXPECT_RET(ibv_query_srq(srq, &sa), 0);
	CHECK(sa.max_wr == si.attr.max_wr && sa.max_sge >= 1 && sa.srq_limit == 0,
	      "ibv_query_srq: %u %u %u", sa.max_wr, sa.max_sge, sa.srq_limit);

	/* Two QPs of b on the SRQ, each connected to a QP of its own. */
	struct ibv_qp_init_attr ia = {
		.send_cq = b.cq, .recv_cq = b.cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *b1 = ibv_create_qp(b.pd, &ia);
	CHECK(b1, "ibv_create_qp on an SRQ: %s", strerror(errno));
	CHECK(b1->srq == srq, "qp->srq");
	struct ibv_qp *b2 = ibv_create_qp(b.pd, &ia);
	CHECK(b2, "ibv_create_qp on an SRQ: %s", strerror(errno));
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	EXPECT_RET(ibv_query_qp(b1, &qa, 0, &qi), 0);
	CHECK(qi.srq == srq, "ibv_query_qp names the SRQ");
	connect_qp(a1.qp, b1->qp_num, all);
	connect_qp(b1, a1.qp->qp_num, all);
	connect_qp(a2.qp, b2->qp_num, all);
	connect_qp(b2, a2.qp->qp_num, all);

	/* The QPs have no receive queue of their own (rxe: EINVAL). */
	struct ibv_sge rs = { .addr = (uintptr_t)b.buf, .length = 1024, .lkey = b.mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 99, .sg_list = &rs, .num_sge = 1 }, *bad = NULL;
	EXPECT_RET(ibv_post_recv(b1, &rw, &bad), EINVAL);
	CHECK(bad == &rw, "bad_wr of the refused post_recv");

	/* Eight receives, each 1024 bytes of b's buffer, posted as a list;
	 * a ninth finds it full (ENOMEM) and one of two SGEs is refused. */
	struct ibv_sge sg[9];
	struct ibv_recv_wr w[9];
	for (int i = 0; i < 9; i++) {
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)b.buf + i * 800, .length = 800,
					  .lkey = b.mr->lkey };
		w[i] = (struct ibv_recv_wr){ .wr_id = 100 + i, .sg_list = &sg[i], .num_sge = 1,
					     .next = i < 7 ? &w[i + 1] : NULL };
	}
	struct ibv_recv_wr two = { .wr_id = 7, .sg_list = sg, .num_sge = 2 };
	bad = NULL;
	EXPECT_RET(ibv_post_srq_recv(srq, &two, &bad), EINVAL);
	CHECK(bad == &two, "bad_wr of the refused SGE list");
	bad = NULL;
	EXPECT_RET(ibv_post_srq_recv(srq, &w[0], &bad), 0);
	EXPECT_RET(ibv_post_srq_recv(srq, &w[8], &bad), ENOMEM);
	CHECK(bad == &w[8], "bad_wr of the post to a full SRQ");

	/* modify: a limit beyond max_wr is refused; 6 arms it. */
	struct ibv_srq_attr m = { .srq_limit = si.attr.max_wr + 1 };
	EXPECT_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), EINVAL);
	m.srq_limit = 6;
	EXPECT_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
	EXPECT_RET(ibv_query_srq(srq, &sa), 0);
	CHECK(sa.srq_limit == 6, "armed: srq_limit %u", sa.srq_limit);
	CHECK(!async_event_within(100), "no event before the limit");

	/* Three SENDs, from a1, a2, a1: receives 100, 101, 102 in turn; the
	 * third leaves 5 < 6 posted. */
	struct side *from[3] = { &a1, &a2, &a1 };
	struct ibv_qp *to[3] = { b1, b2, b1 };
	for (int i = 0; i < 3; i++) {
		fill(from[i]->buf + 1000, 300 + i, 20 + i);
		post(from[i], IBV_WR_SEND, 1, 1000, 300 + i, NULL, 0);
		expect(from[i], 1, IBV_WC_SEND, IBV_WC_SUCCESS);
		struct ibv_wc wc = wait_wc(b.cq);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		      wc.wr_id == (uint64_t)(100 + i) && wc.byte_len == (uint32_t)(300 + i) &&
		      wc.qp_num == to[i]->qp_num,
		      "receive %d: status %d wr_id %llu len %u qp %u", i, wc.status,
		      (unsigned long long)wc.wr_id, wc.byte_len, wc.qp_num);
		CHECK(!memcmp(b.buf + i * 800, from[i]->buf + 1000, 300 + i),
		      "receive %d: bytes differ", i);
	}
	CHECK(async_event_within(5000), "no limit event");
	struct ibv_async_event ev;
	EXPECT_RET(ibv_get_async_event(ctx, &ev), 0);
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq,
	      "event %d (%s) on %p", ev.event_type, ibv_event_type_str(ev.event_type),
	      (void *)ev.element.srq);
	ibv_ack_async_event(&ev);
	CHECK(srq->events_completed == 1, "acked");
	EXPECT_RET(ibv_query_srq(srq, &sa), 0);
	CHECK(sa.srq_limit == 0, "disarmed: srq_limit %u", sa.srq_limit);
	/* Disarmed: another SEND raises nothing. */
	post(&a2, IBV_WR_SEND, 2, 1000, 10, NULL, 0);
	expect(&a2, 2, IBV_WC_SEND, IBV_WC_SUCCESS);
	struct ibv_wc wc = wait_wc(b.cq);
	CHECK(wc.wr_id == 103 && wc.qp_num == b2->qp_num, "fourth receive");
	CHECK(!async_event_within(200), "a second event while disarmed");

	/* Resize: max_wr below the 4 posted is refused, 12 gives room. */
	m.max_wr = 3;
	EXPECT_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), EINVAL);
	m.max_wr = 12;
	EXPECT_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0);
	EXPECT_RET(ibv_query_srq(srq, &sa), 0);
	CHECK(sa.max_wr >= 12, "resized: max_wr %u", sa.max_wr);
	EXPECT_RET(ibv_post_srq_recv(srq, &w[8], &bad), 0);

	/* SGE lists (rxe: up to max_srq_sge, 27): an SRQ of c's, one QP on
	 * it connected to a3. A receive of three pieces laid out backwards in
	 * c's buffer takes a 2500-byte SEND (three packets at MTU 1024) in
	 * list order; one of 27 pieces of 10 bytes a 270-byte SEND; 28 SGEs
	 * are refused (EINVAL); the gaps stay untouched. */
	struct side a3, c;
	side_open(&a3, all);
	side_open(&c, all);
	struct ibv_srq_init_attr li = { .attr = { .max_wr = 4, .max_sge = da.max_srq_sge } };
	struct ibv_srq *ls = ibv_create_srq(c.pd, &li);
	CHECK(ls, "ibv_create_srq of %d SGEs: %s", da.max_srq_sge, strerror(errno));
	EXPECT_RET(ibv_query_srq(ls, &sa), 0);
	CHECK(sa.max_sge == (uint32_t)da.max_srq_sge, "max_sge %u", sa.max_sge);
	ia.srq = ls;
	ia.send_cq = ia.recv_cq = c.cq;
	struct ibv_qp *c1 = ibv_create_qp(c.pd, &ia);
	CHECK(c1, "ibv_create_qp on the list SRQ: %s", strerror(errno));
	connect_qp(a3.qp, c1->qp_num, all);
	connect_qp(c1, a3.qp->qp_num, all);
	memset(c.buf, 0, LEN);
	struct ibv_sge pieces[28];
	const uint32_t plen[3] = { 900, 700, 1000 };
	size_t end = 2600 + 3 * 50;
	for (int i = 0; i < 3; i++) {
		end -= plen[i] + 50;
		pieces[i] = (struct ibv_sge){ .addr = (uintptr_t)c.buf + end, .length = plen[i],
					      .lkey = c.mr->lkey };
	}
	struct ibv_recv_wr lw = { .wr_id = 300, .sg_list = pieces, .num_sge = 3 };
	EXPECT_RET(ibv_post_srq_recv(ls, &lw, &bad), 0);
	fill(a3.buf + 1000, 2500, 77);
	post(&a3, IBV_WR_SEND, 1, 1000, 2500, NULL, 0);
	expect(&a3, 1, IBV_WC_SEND, IBV_WC_SUCCESS);
	wc = wait_wc(c.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 300 && wc.byte_len == 2500 &&
	      wc.qp_num == c1->qp_num,
	      "list receive: status %d wr_id %llu len %u", wc.status,
	      (unsigned long long)wc.wr_id, wc.byte_len);
	size_t at = 0;
	for (int i = 0; i < 3; i++) {
		size_t n = plen[i] < 2500 - at ? plen[i] : 2500 - at;
		CHECK(!memcmp((char *)(uintptr_t)pieces[i].addr, a3.buf + 1000 + at, n),
		      "piece %d: bytes differ", i);
		at += n;
		char *gap = (char *)(uintptr_t)pieces[i].addr + plen[i];
		for (int k = 0; k < 50; k++)
			CHECK(gap[k] == 0, "gap after piece %d written", i);
	}
	for (int i = 0; i < 28; i++)
		pieces[i] = (struct ibv_sge){ .addr = (uintptr_t)c.buf + 4000 + i * 20,
					      .length = 10, .lkey = c.mr->lkey };
	lw = (struct ibv_recv_wr){ .wr_id = 301, .sg_list = pieces, .num_sge = 28 };
	bad = NULL;
	EXPECT_RET(ibv_post_srq_recv(ls, &lw, &bad), EINVAL);
	CHECK(bad == &lw, "bad_wr of 28 SGEs");
	lw.num_sge = 27;
	EXPECT_RET(ibv_post_srq_recv(ls, &lw, &bad), 0);
	fill(a3.buf + 1000, 270, 78);
	post(&a3, IBV_WR_SEND, 2, 1000, 270, NULL, 0);
	expect(&a3, 2, IBV_WC_SEND, IBV_WC_SUCCESS);
	wc = wait_wc(c.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 301 && wc.byte_len == 270,
	      "27-piece receive: status %d wr_id %llu len %u", wc.status,
	      (unsigned long long)wc.wr_id, wc.byte_len);
	for (int i = 0; i < 27; i++) {
		CHECK(!memcmp(c.buf + 4000 + i * 20, a3.buf + 1000 + i * 10, 10),
		      "piece %d of 27: bytes differ", i);
		for (int k = 10; k < 20; k++)
			CHECK(c.buf[4000 + i * 20 + k] == 0, "gap after piece %d of 27", i);
	}

	/* A QP on an SRQ that goes to the error state raises
	 * IBV_EVENT_QP_LAST_WQE_REACHED once, its element the QP (IBA
	 * 10.3.1, 11.6.3). */
	CHECK(!async_event_within(100), "an event before the error");
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	EXPECT_RET(ibv_modify_qp(c1, &err, IBV_QP_STATE), 0);
	CHECK(async_event_within(5000), "no last WQE event");
	EXPECT_RET(ibv_get_async_event(ctx, &ev), 0);
	CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == c1,
	      "event %d (%s) on %p", ev.event_type, ibv_event_type_str(ev.event_type),
	      (void *)ev.element.qp);
	ibv_ack_async_event(&ev);
	CHECK(c1->events_completed == 1, "last WQE event acked");
	CHECK(!async_event_within(200), "a second last WQE event");
	CHECK(!ibv_destroy_qp(c1), "destroy c1");

	/* UC and UD QPs on an SRQ (the kernel and rxe allow both): created
	 * with no receive queue (ibv_post_recv EINVAL); a datagram to the UD
	 * one takes the SRQ's list receive, the GRH area and the payload
	 * scattered across its two pieces. */
	struct ibv_qp_init_attr ua = {
		.send_cq = c.cq, .recv_cq = c.cq, .srq = ls, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *cuc = ibv_create_qp(c.pd, &ua);
	CHECK(cuc && cuc->srq == ls && ua.cap.max_recv_wr == 0,
	      "a UC QP on an SRQ: %s", cuc ? "caps" : strerror(errno));
	bad = NULL;
	EXPECT_RET(ibv_post_recv(cuc, &rw, &bad), EINVAL);
	ua.qp_type = IBV_QPT_UD;
	ua.cap.max_recv_wr = 4;
	struct ibv_qp *cud = ibv_create_qp(c.pd, &ua);
	CHECK(cud && cud->srq == ls && ua.cap.max_recv_wr == 0,
	      "a UD QP on an SRQ: %s", cud ? "caps" : strerror(errno));
	EXPECT_RET(ibv_post_recv(cud, &rw, &bad), EINVAL);
	struct ibv_qp_attr ud_a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	CHECK(!ibv_modify_qp(cud, &ud_a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	      "UD on SRQ: INIT");
	ud_a.qp_state = IBV_QPS_RTR;
	CHECK(!ibv_modify_qp(cud, &ud_a, IBV_QP_STATE), "UD on SRQ: RTR");
	ud_a.qp_state = IBV_QPS_RTS;
	ud_a.sq_psn = 3;
	CHECK(!ibv_modify_qp(cud, &ud_a, IBV_QP_STATE | IBV_QP_SQ_PSN), "UD on SRQ: RTS");
	struct ibv_qp *ua3 = ud_qp(a3.pd, a3.cq, 5);
	struct ibv_ah_attr aha = { .is_global = 1, .port_num = 1 };
	aha.grh.dgid = gid1;
	aha.grh.sgid_index = 1;
	aha.grh.hop_limit = 64;
	struct ibv_ah *ah3 = ibv_create_ah(a3.pd, &aha);
	CHECK(ah3, "ibv_create_ah: %s", strerror(errno));
	struct ibv_sge up[2] = {
		{ .addr = (uintptr_t)c.buf + 6000, .length = GRH + 50, .lkey = c.mr->lkey },
		{ .addr = (uintptr_t)c.buf + 6300, .length = 200, .lkey = c.mr->lkey },
	};
	memset(c.buf + 6000, 0, 600);
	lw = (struct ibv_recv_wr){ .wr_id = 400, .sg_list = up, .num_sge = 2 };
	EXPECT_RET(ibv_post_srq_recv(ls, &lw, &bad), 0);
	fill(a3.buf + 1000, 150, 79);
	CHECK(!ud_send(ua3, a3.mr, IBV_WR_SEND, 9, a3.buf + 1000, 150, ah3, cud->qp_num, QKEY, 1),
	      "UD send to the QP on the SRQ");
	wc = wait_wc(a3.cq);
	CHECK(wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS, "UD send completion");
	wc = wait_wc(c.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 400 && wc.byte_len == GRH + 150 &&
	      wc.qp_num == cud->qp_num && wc.src_qp == ua3->qp_num && (wc.wc_flags & IBV_WC_GRH),
	      "UD receive from the SRQ: status %d wr_id %llu len %u qp %u",
	      wc.status, (unsigned long long)wc.wr_id, wc.byte_len, wc.qp_num);
	CHECK((unsigned char)c.buf[6000 + 20] == 0x45, "the GRH area holds the IPv4 header");
	CHECK(!memcmp(c.buf + 6000 + GRH, a3.buf + 1000, 50) &&
	      !memcmp(c.buf + 6300, a3.buf + 1000 + 50, 100),
	      "UD payload scattered across the SRQ list");
	for (int k = GRH + 50; k < 300; k++)
		CHECK(c.buf[6000 + k] == 0, "the gap between the pieces written at %d", k);
	EXPECT_RET(ibv_destroy_srq(ls), EBUSY);
	CHECK(!ibv_destroy_ah(ah3) && !ibv_destroy_qp(ua3) && !ibv_destroy_qp(cud) &&
	      !ibv_destroy_qp(cuc), "destroy the UC/UD QPs");
	EXPECT_RET(ibv_destroy_srq(ls), 0);
	ia.send_cq = ia.recv_cq = b.cq;
	ia.srq = srq;

	/* Busy while a QP uses it; bad handles. */
	EXPECT_RET(ibv_destroy_srq(srq), EBUSY);
	struct ibv_srq fake = { .context = ctx };
	bad = NULL;
	EXPECT_RET(ibv_post_srq_recv(&fake, &w[8], &bad), EINVAL);
	CHECK(bad == &w[8], "bad_wr of a post to no SRQ");
	EXPECT_RET(ibv_query_srq(&fake, &sa), EINVAL);
	EXPECT_RET(ibv_modify_srq(&fake, &m, IBV_SRQ_LIMIT), EINVAL);
	EXPECT_RET(ibv_modify_srq(srq, NULL, IBV_SRQ_LIMIT), EINVAL);
	EXPECT_RET(ibv_query_srq(srq, NULL), EINVAL);
	EXPECT_RET(ibv_destroy_srq(&fake), EINVAL);
	EXPECT_RET(ibv_destroy_srq(NULL), EINVAL);
	ia.srq = &fake;
	EXPECT_NULL_ERRNO(ibv_create_qp(b.pd, &ia), EINVAL);
	EXPECT_RET(ibv_dealloc_pd(b.pd), EBUSY);

	CHECK(!ibv_destroy_qp(b1), "destroy b1");
	EXPECT_RET(ibv_destroy_srq(srq), EBUSY);
	CHECK(!ibv_destroy_qp(b2), "destroy b2");
	EXPECT_RET(ibv_destroy_srq(srq), 0);
	EXPECT_RET(ibv_query_srq(srq, &sa), EINVAL);
	EXPECT_RET(ibv_destroy_srq(srq), EINVAL);
	ia.srq = srq;
	EXPECT_NULL_ERRNO(ibv_create_qp(b.pd, &ia), EINVAL);

	CHECK(!ibv_destroy_qp(a1.qp) && !ibv_destroy_qp(a2.qp) && !ibv_destroy_qp(b.qp),
	      "destroy qp");
	CHECK(!ibv_dereg_mr(a1.mr) && !ibv_dereg_mr(a2.mr) && !ibv_dereg_mr(b.mr), "dereg");
	CHECK(!ibv_destroy_cq(a1.cq) && !ibv_destroy_cq(a2.cq) && !ibv_destroy_cq(b.cq),
	      "destroy cq");
	CHECK(!ibv_dealloc_pd(a1.pd) && !ibv_dealloc_pd(a2.pd) && !ibv_dealloc_pd(b.pd),
	      "dealloc pd");
	CHECK(!ibv_destroy_qp(a3.qp) && !ibv_destroy_qp(c.qp), "destroy a3, c");
	CHECK(!ibv_dereg_mr(a3.mr) && !ibv_dereg_mr(c.mr), "dereg a3, c");
	CHECK(!ibv_destroy_cq(a3.cq) && !ibv_destroy_cq(c.cq), "destroy cq a3, c");
	CHECK(!ibv_dealloc_pd(a3.pd) && !ibv_dealloc_pd(c.pd), "dealloc pd a3, c");
	return 0;
}

static int two_contexts(void)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n == 1, "expected one device, got %d", n);
	struct ibv_context *c2 = ibv_open_device(list[0]);
	CHECK(c2, "a second ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(list);
	CHECK(c2 != ctx && c2->async_fd >= 0 && c2->async_fd != ctx->async_fd &&
	      c2->cmd_fd != ctx->cmd_fd,
	      "each context its own descriptors: async_fd %d and %d, cmd_fd %d and %d",
	      ctx->async_fd, c2->async_fd, ctx->cmd_fd, c2->cmd_fd);

	/* The receiver: a QP of c2 on an SRQ of c2 with two receives and the
	 * limit at 2; the sender: a QP of the first context. */
	struct side a;
	side_open(&a, all);
	struct ibv_pd *pd2 = ibv_alloc_pd(c2);
	struct ibv_cq *cq2 = ibv_create_cq(c2, 16, NULL, NULL, 0);
	CHECK(pd2 && cq2, "pd/cq of the second context: %s", strerror(errno));
	char *buf2 = calloc(1, LEN);
	struct ibv_mr *mr2 = ibv_reg_mr(pd2, buf2, LEN, all);
	CHECK(mr2, "ibv_reg_mr in the second context: %s", strerror(errno));
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd2, &si);
	CHECK(srq && srq->context == c2, "ibv_create_srq in the second context: %s",
	      strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = cq2, .recv_cq = cq2, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *b = ibv_create_qp(pd2, &ia);
	CHECK(b && b->context == c2, "ibv_create_qp in the second context: %s", strerror(errno));
	connect_qp(a.qp, b->qp_num, all);
	connect_qp(b, a.qp->qp_num, all);
	struct ibv_sge sg[2];
	struct ibv_recv_wr w[2], *bad = NULL;
	for (int i = 0; i < 2; i++) {
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)buf2 + i * 1024, .length = 1024,
					  .lkey = mr2->lkey };
		w[i] = (struct ibv_recv_wr){ .wr_id = 10 + i, .sg_list = &sg[i], .num_sge = 1,
					     .next = i == 0 ? &w[1] : NULL };
	}
	EXPECT_RET(ibv_post_srq_recv(srq, &w[0], &bad), 0);
	struct ibv_srq_attr m = { .srq_limit = 2 };
	EXPECT_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);

	fill(a.buf, 100, 7);
	post(&a, IBV_WR_SEND, 1, 0, 100, NULL, 0);
	expect(&a, 1, IBV_WC_SEND, IBV_WC_SUCCESS);
	struct ibv_wc wc = wait_wc(cq2);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 10 && wc.qp_num == b->qp_num &&
	      !memcmp(buf2, a.buf, 100), "the SEND into the second context's SRQ");
	struct pollfd p2 = { .fd = c2->async_fd, .events = POLLIN };
	CHECK(poll(&p2, 1, 5000) == 1, "no limit event on the second context's async_fd");
	CHECK(!async_event_within(200), "the second context's event on the first's async_fd");
	struct ibv_async_event ev;
	EXPECT_RET(ibv_get_async_event(c2, &ev), 0);
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq,
	      "event %s on %p", ibv_event_type_str(ev.event_type), (void *)ev.element.srq);
	ibv_ack_async_event(&ev);

	/* Closing the second context leaves the first working. */
	CHECK(!ibv_destroy_qp(b) && !ibv_destroy_srq(srq) && !ibv_dereg_mr(mr2) &&
	      !ibv_destroy_cq(cq2) && !ibv_dealloc_pd(pd2), "the second context's objects");
	EXPECT_RET(ibv_close_device(c2), 0);
	struct ibv_qp *again = create_qp(a.pd, a.cq);
	CHECK(!ibv_destroy_qp(again) && !ibv_destroy_qp(a.qp) && !ibv_dereg_mr(a.mr) &&
	      !ibv_destroy_cq(a.cq) && !ibv_dealloc_pd(a.pd), "the first context after");
	free(buf2);
	return 0;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2, "usage: %s loopback|access|checks|bad-input|windows|sgl|ud|srq|contexts", argv[0]);
	open_device();
	int r;
	if (!strcmp(argv[1], "loopback"))
		r = loopback();
	else if (!strcmp(argv[1], "access"))
		r = access_flags();
	else if (!strcmp(argv[1], "checks"))
		r = checks();
	else if (!strcmp(argv[1], "bad-input"))
		r = bad_input();
	else if (!strcmp(argv[1], "windows"))
		r = windows();
	else if (!strcmp(argv[1], "sgl"))
		r = sgl();
	else if (!strcmp(argv[1], "ud"))
		r = ud();
	else if (!strcmp(argv[1], "srq"))
		r = srq_check();
	else if (!strcmp(argv[1], "contexts"))
		r = two_contexts();
	else
		FAIL("unknown check %s", argv[1]);
	CHECK(!ibv_close_device(ctx), "ibv_close_device");
	printf("ok\n");
	return r;
}
