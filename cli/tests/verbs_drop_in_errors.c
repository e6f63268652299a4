/* Bad use and QP errors through the drop-in, as a verbs program sees them
 * (compiled against rdma-core's verbs.h by tests/verbs_drop_in.rs, run
 * under `roce-xdp exec`):
 * - an unsupported verb (ibv_import_pd), called twice, returns NULL with
 *   EOPNOTSUPP both times (the drop-in prints its line once);
 * - memory on the stack registers;
 * - a signal whose handler was installed without SA_RESTART ends a
 *   blocking ibv_get_cq_event and ibv_get_async_event with EINTR, as
 *   read(2) on rdma-core's files does (qperf's latency tests leave their
 *   loop that way), and it reaches the program's thread, not one of the
 *   drop-in's;
 * - an RC QP connected to a peer without an engine, retry_cnt 0, gets a
 *   RETRY_EXC_ERR completion and an IBV_EVENT_QP_FATAL async event for
 *   that QP.
 * Usage: verbs_drop_in_errors PEER_IPV4. Exit 0 and "ok" when all hold. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); return 1; } while (0)

static volatile sig_atomic_t alarms;
static pthread_t main_thread;
static volatile sig_atomic_t alarm_on_another_thread;

static void on_alarm(int signo)
{
	(void)signo;
	alarms++;
	if (!pthread_equal(pthread_self(), main_thread))
		alarm_on_another_thread = 1;
}

/* Arms a one-shot SIGALRM in 200 ms. */
static void alarm_soon(void)
{
	struct itimerval t = { .it_value = { .tv_sec = 0, .tv_usec = 200000 } };
	setitimer(ITIMER_REAL, &t, NULL);
}

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
	char buf[64] = "on the stack";
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!pd || !mr)
		FAIL("pd/mr: %s", strerror(errno));

	for (int i = 0; i < 2; i++) {
		errno = 0;
		if (ibv_import_pd(ctx, 1) || errno != EOPNOTSUPP)
			FAIL("ibv_import_pd: expected NULL with EOPNOTSUPP, errno %d", errno);
	}

	/* qperf's way: sigaction without SA_RESTART, a timer, then a wait for
	 * a completion that never comes. */
	main_thread = pthread_self();
	struct sigaction act = { .sa_handler = on_alarm };
	sigemptyset(&act.sa_mask);
	if (sigaction(SIGALRM, &act, NULL))
		FAIL("sigaction: %s", strerror(errno));
	struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
	struct ibv_cq *quiet = channel ? ibv_create_cq(ctx, 4, NULL, channel, 0) : NULL;
	if (!quiet || ibv_req_notify_cq(quiet, 0))
		FAIL("channel/cq: %s", strerror(errno));
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	alarm_soon();
	errno = 0;
	if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) != -1 || errno != EINTR)
		FAIL("ibv_get_cq_event under a signal: expected -1 with EINTR, errno %d", errno);
	struct ibv_async_event none;
	alarm_soon();
	errno = 0;
	if (ibv_get_async_event(ctx, &none) != -1 || errno != EINTR)
		FAIL("ibv_get_async_event under a signal: expected -1 with EINTR, errno %d", errno);
	if (alarms != 2 || alarm_on_another_thread)
		FAIL("%d alarms, %s on the program's thread", (int)alarms,
		     alarm_on_another_thread ? "not all" : "all");
	if (ibv_destroy_cq(quiet) || ibv_destroy_comp_channel(channel))
		FAIL("destroying the quiet CQ and its channel");

	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;
	if (!qp)
		FAIL("cq/qp: %s", strerror(errno));

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x123;
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
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 1;
	a.retry_cnt = 0;
	a.rnr_retry = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS");

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("ibv_post_send");
	struct ibv_wc wc;
	int got = 0;
	time_t end = time(NULL) + 30;
	while (!got && time(NULL) < end)
		got = ibv_poll_cq(cq, 1, &wc);
	if (got != 1 || wc.wr_id != 7 || wc.status != IBV_WC_RETRY_EXC_ERR)
		FAIL("expected a RETRY_EXC_ERR completion, got %d (status %s)", got,
		     got ? ibv_wc_status_str(wc.status) : "-");

	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev))
		FAIL("ibv_get_async_event: %s", strerror(errno));
	if (ev.event_type != IBV_EVENT_QP_FATAL || ev.element.qp != qp)
		FAIL("expected IBV_EVENT_QP_FATAL for the QP, got event %d", ev.event_type);
	ibv_ack_async_event(&ev);

	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		FAIL("cleanup");
	ibv_free_device_list(list);
	printf("ok\n");
	return 0;
}
