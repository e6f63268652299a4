/* Programs attached to one roce-xdp service that try to use what is not
 * theirs (cli/tests/shared_engine.rs). Each prints one line saying what
 * happened and exits 0 when the outcome is the one a shared engine must
 * give (every other exit: a bug, the line says which).
 *
 *   hold      registers 8 KiB (a pattern in it), makes an RC QP connected
 *             to itself, prints "hold lkey=0x.. rkey=0x.. qpn=0x..
 *             addr=0x..", then waits for a line on stdin: then checks its
 *             pattern is intact and that an RDMA WRITE of its own (QP to
 *             itself) completes and moves the bytes, and prints "ok".
 *   foreign LKEY QPN
 *             registers nothing, connects an RC QP to QP number QPN (the
 *             device's own GID: another process of the host), posts a SEND
 *             and an RDMA WRITE gathering from lkey LKEY (another process's
 *             key): each must fail, by errno or an error completion.
 *   munmap    registers 64 KiB of an anonymous mapping, unmaps it, and
 *             posts an RDMA WRITE from it to it (QP to itself): it may
 *             crash (it hurts only itself) or complete with an error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define GID_INDEX 1
#define HOLD_BYTES 8192

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static union ibv_gid gid;

static void die(const char *what)
{
	printf("FAIL %s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(3);
}

static void open_device(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n < 1)
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	if (ibv_query_gid(ctx, 1, GID_INDEX, &gid))
		die("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp");
}

/* INIT, RTR to `remote` on the device's own GID, RTS. */
static void connect_qp(uint32_t remote)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* One completion within 5 s; 0 if none came. */
static int poll_one(struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			return 0;
		usleep(100);
	}
}

static int hold(void)
{
	uint8_t *buf = aligned_alloc(4096, HOLD_BYTES);

	if (!buf)
		die("aligned_alloc");
	for (int i = 0; i < HOLD_BYTES; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, HOLD_BYTES,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr");
	connect_qp(qp->qp_num);
	printf("hold lkey=0x%x rkey=0x%x qpn=0x%x addr=0x%" PRIx64 "\n", mr->lkey,
	       mr->rkey, qp->qp_num, (uint64_t)(uintptr_t)buf);
	fflush(stdout);

	char line[64];
	if (!fgets(line, sizeof(line), stdin) && ferror(stdin))
		die("reading stdin");
	for (int i = 0; i < HOLD_BYTES; i++) {
		if (buf[i] != (uint8_t)(i * 7 + 3)) {
			printf("FAIL byte %d of the region changed: 0x%02x\n", i, buf[i]);
			return 1;
		}
	}
	struct ibv_wc wc;
	int stray = ibv_poll_cq(cq, 1, &wc);
	if (stray != 0) {
		printf("FAIL a completion nobody posted for (%d, status %s)\n", stray,
		       stray > 0 ? ibv_wc_status_str(wc.status) : "-");
		return 1;
	}
	/* Still working: the first 256 bytes written over the second half. */
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 256, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 7,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { .remote_addr = (uintptr_t)buf + HOLD_BYTES / 2, .rkey = mr->rkey },
	}, *bad;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send of its own write");
	if (!poll_one(&wc)) {
		printf("FAIL its own write did not complete\n");
		return 1;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 7) {
		printf("FAIL its own write: %s (wr_id %" PRIu64 ")\n",
		       ibv_wc_status_str(wc.status), wc.wr_id);
		return 1;
	}
	if (memcmp(buf, buf + HOLD_BYTES / 2, 256)) {
		printf("FAIL its own write moved other bytes\n");
		return 1;
	}
	printf("ok\n");
	return 0;
}

/* Posts `opcode` gathering from `lkey`; 0 if it failed as it must. */
static int foreign_post(enum ibv_wr_opcode opcode, uint32_t lkey, const char *what)
{
	static uint8_t local[256];
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = sizeof(local), .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = opcode,
		.wr.rdma = { .remote_addr = 0x10000, .rkey = lkey },
	}, *bad;
	int rc = ibv_post_send(qp, &wr, &bad);
	if (rc) {
		printf("%s: ibv_post_send refused it: %s\n", what, strerror(rc));
		return 0;
	}
	struct ibv_wc wc;
	if (!poll_one(&wc)) {
		printf("FAIL %s: posted, and no completion came\n", what);
		return 2;
	}
	if (wc.status == IBV_WC_SUCCESS) {
		printf("FAIL %s: completed successfully with another process's lkey\n", what);
		return 1;
	}
	printf("%s: completion %s\n", what, ibv_wc_status_str(wc.status));
	return 0;
}

static int foreign(uint32_t lkey, uint32_t remote)
{
	connect_qp(remote);
	int rc = foreign_post(IBV_WR_SEND, lkey, "send");
	if (rc)
		return rc;
	/* The QP is in error after a failed work request: a fresh one. */
	if (ibv_destroy_qp(qp))
		die("ibv_destroy_qp");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp");
	connect_qp(remote);
	return foreign_post(IBV_WR_RDMA_WRITE, lkey, "rdma write");
}

static int unmapped(void)
{
	size_t len = 64 * 1024;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	memset(p, 0x5a, len);
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	connect_qp(qp->qp_num);
	if (munmap(p, len))
		die("munmap");
	printf("munmapped\n");
	fflush(stdout);
	struct ibv_sge sge = { .addr = (uintptr_t)p, .length = len / 2, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 9,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { .remote_addr = (uintptr_t)p + len / 2, .rkey = mr->rkey },
	}, *bad;
	int rc = ibv_post_send(qp, &wr, &bad);
	if (rc) {
		printf("ibv_post_send refused it: %s\n", strerror(rc));
		return 0;
	}
	struct ibv_wc wc;
	if (!poll_one(&wc)) {
		printf("no completion\n");
		return 0;
	}
	printf("completion %s\n", ibv_wc_status_str(wc.status));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s hold | foreign LKEY QPN | munmap\n", argv[0]);
		return 64;
	}
	open_device();
	if (!strcmp(argv[1], "hold"))
		return hold();
	if (!strcmp(argv[1], "foreign") && argc == 4)
		return foreign((uint32_t)strtoul(argv[2], NULL, 0),
			       (uint32_t)strtoul(argv[3], NULL, 0));
	if (!strcmp(argv[1], "munmap"))
		return unmapped();
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 64;
}
