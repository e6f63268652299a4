/* The extended verbs on the drop-in libibverbs, as a verbs program sees
 * them (compiled against rdma-core's verbs.h by tests/verbs_drop_in.rs,
 * run under `roce-xdp exec`): QPs of ibv_create_qp_ex posting through
 * ibv_wr_*, CQs of ibv_create_cq_ex polled through ibv_start_poll /
 * ibv_next_poll / ibv_end_poll and read with ibv_wc_read_*. One check a
 * subcommand; each prints "ok" and exits 0 when everything holds, else
 * "FAIL: ..." and exits 1.
 *
 *   traffic    two RC QPs of the one device connected to each other, all
 *              send operations enabled: SEND, SEND_WITH_IMM, WRITE,
 *              WRITE_WITH_IMM, READ, CMP_SWP, FETCH_ADD, ATOMIC_WRITE
 *              (IBV_WC_ATOMIC_WRITE, the device's
 *              IB_UVERBS_DEVICE_ATOMIC_WRITE as rxe) built with
 *              ibv_wr_*, a batch of three in one ibv_wr_start /
 *              ibv_wr_complete, every completion read with the
 *              ibv_wc_read_* accessors (opcode, byte_len, imm, qp_num,
 *              wc_flags) and every byte checked; ibv_wr_abort posts
 *              nothing; the extended CQ also serves ibv_poll_cq and a
 *              completion channel armed by ibv_req_notify_cq;
 *   refusals   rxe's errnos: unsupported wc_flags, CQ flags and
 *              attributes, send_ops_flags (ATOMIC_WRITE on UC), create
 *              flags and QP attributes;
 *              no PD; a QP of ibv_create_qp (or of ibv_create_qp_ex with
 *              only a PD) is no ibv_qp_ex; a NULL or destroyed QP; a
 *              builder the QP was not created with (EOPNOTSUPP), more
 *              requests than the send queue or SGEs than the QP holds,
 *              inline data over max_inline_data (ENOSPC), a setter before
 *              any builder and ibv_wr_complete without ibv_wr_start
 *              (EINVAL); an empty CQ answers ENOENT;
 *   inline     SENDs and WRITEs whose data is given by
 *              ibv_wr_set_inline_data / ibv_wr_set_inline_data_list (the
 *              program's buffers overwritten right after the call);
 *   sge-list   a SEND and a WRITE gathering three SGEs through
 *              ibv_wr_set_sge_list.
 * The last two need a post path with SGE lists and inline data copied at
 * post time (the device's max_sge above 1); on a device with max_sge 1
 * they check the refusal instead, and say so.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, " (line %d)\n", __LINE__); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)
#define EXPECT_NULL_ERRNO(call, err) do { errno = 0; void *p_ = (void *)(call); \
	CHECK(!p_ && errno == (err), #call ": expected NULL with errno %d, got %p errno %d", \
	      (err), p_, errno); } while (0)
#define EXPECT_RET(call, want) do { int r_ = (call); \
	CHECK(r_ == (want), #call ": expected %d, got %d", (want), r_); } while (0)

#define LEN 16384
#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define RC_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
		IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV | \
		IBV_QP_EX_WITH_ATOMIC_WRITE)
/* IB_UVERBS_DEVICE_ATOMIC_WRITE of device_cap_flags_ex (rdma-core's
 * kernel-headers/rdma/ib_user_verbs.h; not in every installed header). */
#define DEVICE_ATOMIC_WRITE (1ULL << 40)
#define WC_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
		  IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
		  IBV_WC_EX_WITH_DLID_PATH_BITS)

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
	struct ibv_comp_channel *channel;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	char *buf;
};

static struct ibv_cq_ex *create_cq_ex(struct ibv_comp_channel *ch, void *cq_context)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 64, .cq_context = cq_context, .channel = ch, .wc_flags = WC_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS, .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq, "ibv_create_cq_ex: %s", strerror(errno));
	CHECK(ibv_cq_ex_to_cq(cq)->cq_context == cq_context && ibv_cq_ex_to_cq(cq)->cqe == 64 &&
	      ibv_cq_ex_to_cq(cq)->context == ctx, "the extended CQ is an ibv_cq");
	return cq;
}

static struct ibv_qp *create_qp_ex(struct ibv_pd *pd, struct ibv_cq_ex *cq, uint64_t ops,
				   uint32_t max_send_wr, uint32_t max_sge, uint32_t max_inline)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = max_send_wr, .max_recv_wr = 16, .max_send_sge = max_sge,
			 .max_recv_sge = 1, .max_inline_data = max_inline },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = ops,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(qp, "ibv_create_qp_ex: %s", strerror(errno));
	CHECK(qp->state == IBV_QPS_RESET && qp->pd == pd, "a new QP is in RESET, in its PD");
	return qp;
}

static void side_open(struct side *s, int with_channel, uint64_t ops, uint32_t max_sge,
		      uint32_t max_inline)
{
	s->pd = ibv_alloc_pd(ctx);
	CHECK(s->pd, "ibv_alloc_pd: %s", strerror(errno));
	s->channel = NULL;
	if (with_channel) {
		s->channel = ibv_create_comp_channel(ctx);
		CHECK(s->channel, "ibv_create_comp_channel: %s", strerror(errno));
	}
	s->cq = create_cq_ex(s->channel, s);
	s->buf = aligned_alloc(64, LEN);
	memset(s->buf, 0, LEN);
	s->mr = ibv_reg_mr(s->pd, s->buf, LEN, ALL_ACCESS);
	CHECK(s->mr, "ibv_reg_mr: %s", strerror(errno));
	s->qp = create_qp_ex(s->pd, s->cq, ops, 16, max_sge, max_inline);
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	CHECK(s->qpx && &s->qpx->qp_base == s->qp, "ibv_qp_to_qp_ex of an extended QP");
}

static void side_close(struct side *s)
{
	CHECK(!ibv_destroy_qp(s->qp), "ibv_destroy_qp");
	CHECK(!ibv_dereg_mr(s->mr), "ibv_dereg_mr");
	CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(s->cq)), "ibv_destroy_cq of an extended CQ");
	if (s->channel)
		CHECK(!ibv_destroy_comp_channel(s->channel), "ibv_destroy_comp_channel");
	CHECK(!ibv_dealloc_pd(s->pd), "ibv_dealloc_pd");
	free(s->buf);
}

/* RESET -> INIT -> RTR -> RTS towards `dest` on this device's GID 1. */
static void connect_qp(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = ALL_ACCESS };
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
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.sq_psn = 100;
	a.max_rd_atomic = 4;
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), "RTS");
}

static void pair_open(struct side *a, struct side *b, uint64_t ops, uint32_t max_sge,
		      uint32_t max_inline)
{
	side_open(a, 1, ops, max_sge, max_inline);
	side_open(b, 0, ops, max_sge, max_inline);
	connect_qp(a->qp, b->qp->qp_num);
	connect_qp(b->qp, a->qp->qp_num);
}

/* A completion as the ibv_wc_read_* accessors give it. */
struct cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, imm, qp_num, vendor_err;
	unsigned int wc_flags;
};

static struct cqe read_cqe(struct ibv_cq_ex *cq)
{
	struct cqe c = {
		.wr_id = cq->wr_id, .status = cq->status,
		.opcode = ibv_wc_read_opcode(cq), .byte_len = ibv_wc_read_byte_len(cq),
		.imm = be32toh(ibv_wc_read_imm_data(cq)), .qp_num = ibv_wc_read_qp_num(cq),
		.vendor_err = ibv_wc_read_vendor_err(cq), .wc_flags = ibv_wc_read_wc_flags(cq),
	};
	/* RoCE: no LIDs, SL 0. */
	CHECK(ibv_wc_read_slid(cq) == 0 && ibv_wc_read_sl(cq) == 0 &&
	      ibv_wc_read_dlid_path_bits(cq) == 0, "LID fields of a RoCE completion");
	return c;
}

/* Up to `n` completions of one ibv_start_poll .. ibv_end_poll (waiting
 * for the first up to 20 s); returns how many. */
static int poll_ex(struct ibv_cq_ex *cq, struct cqe *out, int n)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	time_t end = time(NULL) + 20;
	int r;
	while ((r = ibv_start_poll(cq, &attr)) == ENOENT) {
		CHECK(time(NULL) < end, "no completion within 20 s");
	}
	CHECK(r == 0, "ibv_start_poll: %d", r);
	int got = 0;
	out[got++] = read_cqe(cq);
	while (got < n && (r = ibv_next_poll(cq)) == 0)
		out[got++] = read_cqe(cq);
	CHECK(got == n || r == ENOENT, "ibv_next_poll: %d", r);
	ibv_end_poll(cq);
	return got;
}

static struct cqe wait_one(struct ibv_cq_ex *cq)
{
	struct cqe c;
	poll_ex(cq, &c, 1);
	return c;
}

static void expect(struct ibv_cq_ex *cq, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t qp_num)
{
	struct cqe c = wait_one(cq);
	CHECK(c.wr_id == wr_id && c.status == IBV_WC_SUCCESS && c.opcode == op &&
	      c.qp_num == qp_num && c.vendor_err == 0,
	      "wr %llu (wanted %llu): status %s, opcode %d (wanted %d), qp %u (wanted %u)",
	      (unsigned long long)c.wr_id, (unsigned long long)wr_id, ibv_wc_status_str(c.status),
	      c.opcode, op, c.qp_num, qp_num);
}

static void expect_recv(struct side *s, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t len,
			int with_imm, uint32_t imm)
{
	struct cqe c = wait_one(s->cq);
	CHECK(c.wr_id == wr_id && c.status == IBV_WC_SUCCESS && c.opcode == op &&
	      c.byte_len == len && c.qp_num == s->qp->qp_num,
	      "receive %llu: status %s opcode %d len %u qp %u", (unsigned long long)c.wr_id,
	      ibv_wc_status_str(c.status), c.opcode, c.byte_len, c.qp_num);
	CHECK(!!(c.wc_flags & IBV_WC_WITH_IMM) == with_imm, "receive %llu: wc_flags %#x",
	      (unsigned long long)wr_id, c.wc_flags);
	if (with_imm)
		CHECK(c.imm == imm, "receive %llu: imm %#x, wanted %#x", (unsigned long long)wr_id,
		      c.imm, imm);
}

static void post_recv(struct side *s, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	CHECK(!ibv_post_recv(s->qp, &wr, &bad), "ibv_post_recv");
}

static void fill(char *p, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(seed + i * 7);
}

static void start(struct side *s, uint64_t wr_id)
{
	ibv_wr_start(s->qpx);
	s->qpx->wr_id = wr_id;
	s->qpx->wr_flags = IBV_SEND_SIGNALED;
}

#define REMOTE(s, off) (s)->mr->rkey, (uintptr_t)(s)->buf + (off)
#define LOCAL(s, off, len) (s)->mr->lkey, (uintptr_t)(s)->buf + (off), (len)

static int traffic(void)
{
	struct side a, b;
	pair_open(&a, &b, RC_OPS, 1, 0);
	uint32_t aq = a.qp->qp_num;
	struct cqe c;

	/* An empty CQ: ENOENT, and no lock left held. */
	EXPECT_RET(ibv_start_poll(a.cq, &(struct ibv_poll_cq_attr){ 0 }), ENOENT);
	EXPECT_RET(ibv_start_poll(a.cq, &(struct ibv_poll_cq_attr){ 0 }), ENOENT);

	/* SEND a -> b. */
	fill(a.buf, 1500, 1);
	post_recv(&b, 100, 8000, 2000);
	start(&a, 1);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 0, 1500));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 1, IBV_WC_SEND, aq);
	expect_recv(&b, 100, IBV_WC_RECV, 1500, 0, 0);
	CHECK(!memcmp(b.buf + 8000, a.buf, 1500), "SEND: bytes differ");

	/* SEND_WITH_IMM a -> b. */
	fill(a.buf + 2000, 700, 2);
	post_recv(&b, 101, 10000, 1000);
	start(&a, 2);
	ibv_wr_send_imm(a.qpx, htobe32(0x12345678));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 2000, 700));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 2, IBV_WC_SEND, aq);
	expect_recv(&b, 101, IBV_WC_RECV, 700, 1, 0x12345678);
	CHECK(!memcmp(b.buf + 10000, a.buf + 2000, 700), "SEND_WITH_IMM: bytes differ");

	/* WRITE 3000 bytes (three packets) a -> b. */
	fill(a.buf, 3000, 3);
	start(&a, 3);
	ibv_wr_rdma_write(a.qpx, REMOTE(&b, 100));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 0, 3000));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 3, IBV_WC_RDMA_WRITE, aq);
	CHECK(!memcmp(b.buf + 100, a.buf, 3000), "WRITE: bytes differ");

	/* WRITE_WITH_IMM: consumes a receive of b, which names the length. */
	fill(a.buf + 4000, 1200, 4);
	post_recv(&b, 102, 12000, 16);
	start(&a, 4);
	ibv_wr_rdma_write_imm(a.qpx, REMOTE(&b, 5000), htobe32(0xfeedbeef));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 4000, 1200));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 4, IBV_WC_RDMA_WRITE, aq);
	expect_recv(&b, 102, IBV_WC_RECV_RDMA_WITH_IMM, 1200, 1, 0xfeedbeef);
	CHECK(!memcmp(b.buf + 5000, a.buf + 4000, 1200), "WRITE_WITH_IMM: bytes differ");

	/* READ b's bytes back into a. */
	start(&a, 5);
	ibv_wr_rdma_read(a.qpx, REMOTE(&b, 100));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 6000, 3000));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	c = wait_one(a.cq);
	CHECK(c.wr_id == 5 && c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_RDMA_READ &&
	      c.byte_len == 3000 && c.qp_num == aq, "READ completion: status %d len %u",
	      c.status, c.byte_len);
	CHECK(!memcmp(a.buf + 6000, b.buf + 100, 3000), "READ: bytes differ");

	/* CMP_SWP on b's word at 14000: 7 == 7, so 99 goes in. */
	uint64_t v = 7, orig, now;
	memcpy(b.buf + 14000, &v, 8);
	start(&a, 6);
	ibv_wr_atomic_cmp_swp(a.qpx, REMOTE(&b, 14000), 7, 99);
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 14100, 8));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	c = wait_one(a.cq);
	CHECK(c.wr_id == 6 && c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_COMP_SWAP &&
	      c.byte_len == 8, "CMP_SWP completion: status %d opcode %d", c.status, c.opcode);
	memcpy(&orig, a.buf + 14100, 8);
	memcpy(&now, b.buf + 14000, 8);
	CHECK(orig == 7 && now == 99, "CMP_SWP: orig %llu now %llu", (unsigned long long)orig,
	      (unsigned long long)now);

	/* FETCH_ADD 5 on the same word. */
	start(&a, 7);
	ibv_wr_atomic_fetch_add(a.qpx, REMOTE(&b, 14000), 5);
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 14200, 8));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	c = wait_one(a.cq);
	CHECK(c.wr_id == 7 && c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_FETCH_ADD &&
	      c.byte_len == 8, "FETCH_ADD completion: status %d opcode %d", c.status, c.opcode);
	memcpy(&orig, a.buf + 14200, 8);
	memcpy(&now, b.buf + 14000, 8);
	CHECK(orig == 99 && now == 104, "FETCH_ADD: orig %llu now %llu",
	      (unsigned long long)orig, (unsigned long long)now);

	/* ATOMIC_WRITE: the 8 bytes at `aw` (copied at the call, as rxe's
	 * wr_atomic_write does: overwritten right after) stored at b's word
	 * 14008, its neighbours untouched; the device says it has it. */
	struct ibv_device_attr_ex dx;
	CHECK(!ibv_query_device_ex(ctx, NULL, &dx), "ibv_query_device_ex");
	CHECK(dx.device_cap_flags_ex & DEVICE_ATOMIC_WRITE,
	      "device_cap_flags_ex %#llx without ATOMIC_WRITE",
	      (unsigned long long)dx.device_cap_flags_ex);
	CHECK((dx.device_cap_flags_ex & 0xffffffffULL) == dx.orig_attr.device_cap_flags,
	      "device_cap_flags_ex holds device_cap_flags");
	unsigned char aw[9] = { 0xee, 1, 2, 3, 4, 5, 6, 7, 8 }, want[24];
	memset(b.buf + 14000, 0x77, 24);
	start(&a, 8);
	ibv_wr_atomic_write(a.qpx, REMOTE(&b, 14008), aw + 1); /* unaligned source */
	memset(aw, 0, sizeof(aw));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	c = wait_one(a.cq);
	CHECK(c.wr_id == 8 && c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_ATOMIC_WRITE &&
	      c.byte_len == 8 && c.qp_num == aq, "ATOMIC_WRITE completion: status %s opcode %d len %u",
	      ibv_wc_status_str(c.status), c.opcode, c.byte_len);
	memset(want, 0x77, 24);
	for (int i = 0; i < 8; i++)
		want[8 + i] = i + 1;
	CHECK(!memcmp(b.buf + 14000, want, 24), "ATOMIC_WRITE: bytes differ");

	/* A batch: three WRITEs, each with its own wr_id and flags (the
	 * middle one unsignaled), in one start/complete; polled with
	 * ibv_next_poll. */
	fill(a.buf, 3 * 512, 5);
	ibv_wr_start(a.qpx);
	for (int i = 0; i < 3; i++) {
		a.qpx->wr_id = 20 + i;
		a.qpx->wr_flags = i == 1 ? 0 : IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(a.qpx, REMOTE(&b, 1000 + 512 * i));
		ibv_wr_set_sge(a.qpx, LOCAL(&a, 512 * i, 512));
	}
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	struct cqe cs[4];
	int got = 0;
	for (time_t end = time(NULL) + 20; got < 2 && time(NULL) < end;)
		got += poll_ex(a.cq, cs + got, 4 - got);
	CHECK(got == 2 && cs[0].wr_id == 20 && cs[1].wr_id == 22 &&
	      cs[0].status == IBV_WC_SUCCESS && cs[1].status == IBV_WC_SUCCESS,
	      "batch: %d completions", got);
	CHECK(!memcmp(b.buf + 1000, a.buf, 3 * 512), "batch: bytes differ");

	/* ibv_wr_abort posts nothing: b's bytes stay, no completion comes. */
	memset(a.buf, 0x5a, 256);
	start(&a, 30);
	ibv_wr_rdma_write(a.qpx, REMOTE(&b, 1000));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 0, 256));
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 0, 16));
	ibv_wr_abort(a.qpx);
	/* A WRITE after it, whose completion comes first if nothing else was
	 * posted. */
	start(&a, 31);
	ibv_wr_rdma_write(a.qpx, REMOTE(&b, 9000));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 300, 8));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 31, IBV_WC_RDMA_WRITE, aq);
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	EXPECT_RET(ibv_start_poll(a.cq, &(struct ibv_poll_cq_attr){ 0 }), ENOENT);
	fill(a.buf, 3 * 512, 5);
	CHECK(!memcmp(b.buf + 1000, a.buf, 3 * 512), "an aborted WRITE changed bytes");

	/* The extended CQ with ibv_poll_cq and its completion channel. */
	CHECK(!ibv_req_notify_cq(ibv_cq_ex_to_cq(a.cq), 0), "ibv_req_notify_cq");
	start(&a, 40);
	ibv_wr_rdma_write(a.qpx, REMOTE(&b, 9000));
	ibv_wr_set_sge(a.qpx, LOCAL(&a, 300, 8));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	struct pollfd pfd = { .fd = a.channel->fd, .events = POLLIN };
	CHECK(poll(&pfd, 1, 20000) == 1, "no completion event within 20 s");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(!ibv_get_cq_event(a.channel, &ev_cq, &ev_ctx), "ibv_get_cq_event");
	CHECK(ev_cq == ibv_cq_ex_to_cq(a.cq) && ev_ctx == &a, "the event names the extended CQ");
	ibv_ack_cq_events(ev_cq, 1);
	struct ibv_wc wc;
	int n = 0;
	for (time_t end = time(NULL) + 20; n == 0 && time(NULL) < end;)
		n = ibv_poll_cq(ibv_cq_ex_to_cq(a.cq), 1, &wc);
	CHECK(n == 1 && wc.wr_id == 40 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_RDMA_WRITE && wc.qp_num == aq,
	      "ibv_poll_cq on the extended CQ: %d", n);

	/* b's receive queue: nothing left over. */
	EXPECT_RET(ibv_start_poll(b.cq, &(struct ibv_poll_cq_attr){ 0 }), ENOENT);
	side_close(&a);
	side_close(&b);
	return 0;
}

static int refusals(void)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	struct ibv_cq_ex *cq = create_cq_ex(NULL, NULL);

	/* CQs: rxe's wc_flags (no timestamps, VLAN, flow tag, tag matching),
	 * no IGNORE_OVERRUN, known attributes only, no parent domain. */
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EOPNOTSUPP);
	ca.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EOPNOTSUPP);
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EOPNOTSUPP);
	ca.comp_mask = 1 << 7;
	ca.flags = 0;
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EOPNOTSUPP);
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = pd;
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);
	ca.comp_mask = 0;
	ca.cqe = 1 << 30; /* over max_cqe: rxe_cq_chk_attr */
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);
	ca.cqe = 16;
	ca.channel = (struct ibv_comp_channel *)pd; /* no channel */
	EXPECT_NULL_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);

	/* QPs: rxe's check_qp_init_attr. */
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd, .send_ops_flags = IBV_QP_EX_WITH_TSO,
	};
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EOPNOTSUPP);
	/* ATOMIC_WRITE is RC's (rxe RXE_SUP_UC_QP_SEND_OPS_FLAGS lacks it). */
	ia.qp_type = IBV_QPT_UC;
	ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EOPNOTSUPP);
	ia.qp_type = IBV_QPT_UD;
	ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EOPNOTSUPP);
	ia.qp_type = IBV_QPT_RC;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
	ia.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ia.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EOPNOTSUPP);
	ia.create_flags = 0;
	ia.comp_mask |= IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EOPNOTSUPP);
	ia.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; /* no PD */
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EINVAL);
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.pd = (struct ibv_pd *)cq; /* no PD */
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EINVAL);
	ia.pd = pd;
	ia.cap.max_send_wr = 1 << 30; /* over max_qp_wr */
	EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EINVAL);
	ia.cap.max_send_wr = 4;

	/* Only a PD (ibv_create_qp underneath), or ibv_create_qp: no
	 * ibv_qp_ex; NULL and destroyed QPs: none either. */
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	struct ibv_qp *plain = ibv_create_qp_ex(ctx, &ia);
	CHECK(plain, "ibv_create_qp_ex with a PD only: %s", strerror(errno));
	CHECK(!ibv_qp_to_qp_ex(plain), "a QP of ibv_create_qp is no ibv_qp_ex");
	CHECK(!ibv_destroy_qp(plain), "destroy");
	errno = 0;
	CHECK(!ibv_qp_to_qp_ex(plain) && errno == EINVAL, "a destroyed QP");
	errno = 0;
	CHECK(!ibv_qp_to_qp_ex(NULL) && errno == EINVAL, "a NULL QP");

	/* A QP with SEND alone, 4 requests, 1 SGE, 16 inline bytes. */
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
		       IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ia.create_flags = 0;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
	ia.cap.max_inline_data = 16;
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
	CHECK(qp, "ibv_create_qp_ex: %s", strerror(errno));
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	CHECK(qpx, "ibv_qp_to_qp_ex");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	CHECK(!ibv_query_qp(qp, &qa, IBV_QP_CAP, &qia), "ibv_query_qp");
	uint32_t max_sge = qa.cap.max_send_sge, max_wr = qa.cap.max_send_wr;
	uint32_t max_inline = qa.cap.max_inline_data;
	static char data[4096];
	struct ibv_sge sges[64] = { { 0 } };

	/* Builders the QP was not created with. */
	ibv_wr_start(qpx);
	ibv_wr_rdma_write(qpx, 1, 0x1000);
	EXPECT_RET(ibv_wr_complete(qpx), EOPNOTSUPP);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_atomic_fetch_add(qpx, 1, 0x1000, 1);
	EXPECT_RET(ibv_wr_complete(qpx), EOPNOTSUPP);
	ibv_wr_start(qpx);
	ibv_wr_send_imm(qpx, 0);
	EXPECT_RET(ibv_wr_complete(qpx), EOPNOTSUPP);
	ibv_wr_start(qpx);
	ibv_wr_atomic_write(qpx, 1, 0x1000, data);
	EXPECT_RET(ibv_wr_complete(qpx), EOPNOTSUPP);
	/* More requests than the send queue holds. */
	ibv_wr_start(qpx);
	for (uint32_t i = 0; i <= max_wr; i++)
		ibv_wr_send(qpx);
	EXPECT_RET(ibv_wr_complete(qpx), ENOSPC);
	/* More SGEs than the QP has. */
	CHECK(max_sge < 64, "max_send_sge %u", max_sge);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge_list(qpx, max_sge + 1, sges);
	EXPECT_RET(ibv_wr_complete(qpx), ENOSPC);
	/* More inline data than max_inline_data (at least the 16 asked
	 * for), in one buffer or a list. */
	CHECK(max_inline >= 16 && max_inline < sizeof(data), "max_inline_data %u", max_inline);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, data, max_inline + 1);
	EXPECT_RET(ibv_wr_complete(qpx), ENOSPC);
	struct ibv_data_buf bufs[2] = { { data, 10 }, { data, max_inline - 9 } };
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data_list(qpx, 2, bufs);
	EXPECT_RET(ibv_wr_complete(qpx), ENOSPC);
	/* A setter before any builder; complete without start. */
	ibv_wr_start(qpx);
	ibv_wr_set_sge(qpx, 1, 0x1000, 8);
	EXPECT_RET(ibv_wr_complete(qpx), EINVAL);
	EXPECT_RET(ibv_wr_complete(qpx), EINVAL);
	/* An empty batch completes; an abort then a start work. */
	ibv_wr_start(qpx);
	EXPECT_RET(ibv_wr_complete(qpx), 0);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_abort(qpx);
	/* Nothing of the refused batches was posted (the QP is in RESET:
	 * a post would have been refused, not completed). */
	EXPECT_RET(ibv_start_poll(cq, &(struct ibv_poll_cq_attr){ 0 }), ENOENT);
	/* A poll attribute with a comp_mask. */
	EXPECT_RET(ibv_start_poll(cq, &(struct ibv_poll_cq_attr){ .comp_mask = 1 }), EINVAL);

	/* A CQ of ibv_create_cq has the polling ops too (not on rxe). */
	struct ibv_cq *plain_cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	CHECK(plain_cq, "ibv_create_cq");
	EXPECT_RET(ibv_start_poll((struct ibv_cq_ex *)plain_cq, &(struct ibv_poll_cq_attr){ 0 }),
		   ENOENT);
	CHECK(!ibv_destroy_cq(plain_cq), "destroy cq");

	CHECK(!ibv_destroy_qp(qp), "destroy qp");
	EXPECT_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	CHECK(!ibv_dealloc_pd(pd), "dealloc pd");
	return 0;
}

/* The device's max_sge: 1 while the post path carries one SGE a request
 * and takes inline data from a registered buffer, more once it gathers
 * SGE lists and copies inline data at post time. */
static int device_max_sge(void)
{
	struct ibv_device_attr da;
	CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
	return da.max_sge;
}

static int inline_data(void)
{
	if (device_max_sge() == 1) {
		/* The post path below refuses data without a key. */
		struct side a, b;
		pair_open(&a, &b, RC_OPS, 1, 256);
		char src[16] = { 0 };
		start(&a, 1);
		a.qpx->wr_flags |= IBV_SEND_INLINE;
		ibv_wr_send(a.qpx);
		ibv_wr_set_inline_data(a.qpx, src, sizeof(src));
		EXPECT_RET(ibv_wr_complete(a.qpx), EINVAL);
		side_close(&a);
		side_close(&b);
		printf("the post path takes no inline data without a key (max_sge 1): refused\n");
		return 0;
	}
	struct side a, b;
	pair_open(&a, &b, RC_OPS, 1, 256);
	uint32_t aq = a.qp->qp_num;
	char src[256], want[256];

	/* SEND of 200 inline bytes; the buffer is overwritten at once. */
	fill(src, 200, 11);
	memcpy(want, src, 200);
	post_recv(&b, 100, 8000, 1000);
	start(&a, 1);
	a.qpx->wr_flags |= IBV_SEND_INLINE;
	ibv_wr_send(a.qpx);
	ibv_wr_set_inline_data(a.qpx, src, 200);
	memset(src, 0, sizeof(src));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 1, IBV_WC_SEND, aq);
	expect_recv(&b, 100, IBV_WC_RECV, 200, 0, 0);
	CHECK(!memcmp(b.buf + 8000, want, 200), "inline SEND: bytes differ");

	/* WRITE of three inline buffers (a list), one after the other. */
	char x[40], y[1], z[100];
	fill(x, sizeof(x), 12);
	fill(y, sizeof(y), 13);
	fill(z, sizeof(z), 14);
	memcpy(want, x, 40);
	memcpy(want + 40, y, 1);
	memcpy(want + 41, z, 100);
	struct ibv_data_buf list[3] = { { x, 40 }, { y, 1 }, { z, 100 } };
	start(&a, 2);
	a.qpx->wr_flags |= IBV_SEND_INLINE;
	ibv_wr_rdma_write(a.qpx, REMOTE(&b, 3000));
	ibv_wr_set_inline_data_list(a.qpx, 3, list);
	memset(x, 0, sizeof(x));
	memset(z, 0, sizeof(z));
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 2, IBV_WC_RDMA_WRITE, aq);
	CHECK(!memcmp(b.buf + 3000, want, 141), "inline WRITE list: bytes differ");

	side_close(&a);
	side_close(&b);
	return 0;
}

static int sge_list(void)
{
	if (device_max_sge() < 3) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_cq_ex *cq = create_cq_ex(NULL, NULL);
		struct ibv_qp_init_attr_ex ia = {
			.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
			.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4, .max_send_sge = 3 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = pd, .send_ops_flags = RC_OPS,
		};
		EXPECT_NULL_ERRNO(ibv_create_qp_ex(ctx, &ia), EINVAL);
		CHECK(!ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) && !ibv_dealloc_pd(pd), "cleanup");
		printf("the device has max_sge %d: a QP of 3 SGEs is refused\n", device_max_sge());
		return 0;
	}
	struct side a, b;
	pair_open(&a, &b, RC_OPS, 3, 0);
	uint32_t aq = a.qp->qp_num;

	/* SEND gathering 100 + 1 + 1400 bytes from three places. */
	fill(a.buf, 4000, 21);
	struct ibv_sge sg[3] = {
		{ (uintptr_t)a.buf + 0, 100, a.mr->lkey },
		{ (uintptr_t)a.buf + 500, 1, a.mr->lkey },
		{ (uintptr_t)a.buf + 2000, 1400, a.mr->lkey },
	};
	char want[1501];
	memcpy(want, a.buf, 100);
	memcpy(want + 100, a.buf + 500, 1);
	memcpy(want + 101, a.buf + 2000, 1400);
	post_recv(&b, 100, 8000, 2000);
	start(&a, 1);
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge_list(a.qpx, 3, sg);
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 1, IBV_WC_SEND, aq);
	expect_recv(&b, 100, IBV_WC_RECV, 1501, 0, 0);
	CHECK(!memcmp(b.buf + 8000, want, 1501), "SEND from an SGE list: bytes differ");

	/* The same three as a WRITE. */
	start(&a, 2);
	ibv_wr_rdma_write(a.qpx, REMOTE(&b, 11000));
	ibv_wr_set_sge_list(a.qpx, 3, sg);
	EXPECT_RET(ibv_wr_complete(a.qpx), 0);
	expect(a.cq, 2, IBV_WC_RDMA_WRITE, aq);
	CHECK(!memcmp(b.buf + 11000, want, 1501), "WRITE from an SGE list: bytes differ");

	side_close(&a);
	side_close(&b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s traffic|refusals|inline|sge-list\n", argv[0]);
		return 2;
	}
	open_device();
	int r;
	if (!strcmp(argv[1], "traffic"))
		r = traffic();
	else if (!strcmp(argv[1], "refusals"))
		r = refusals();
	else if (!strcmp(argv[1], "inline"))
		r = inline_data();
	else if (!strcmp(argv[1], "sge-list"))
		r = sge_list();
	else
		FAIL("unknown check %s", argv[1]);
	CHECK(!ibv_close_device(ctx), "ibv_close_device");
	printf("ok\n");
	return r;
}
