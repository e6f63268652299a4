/* The drop-in librdmacm's API, run by cli/tests/rdmacm_api.rs under
 * `roce-xdp exec` in two namespaces:
 *   rdmacm_api server ADDR PORT   (listens on PORT: TCP, PORT: UDP, PORT+2: sync ep)
 *   rdmacm_api client ADDR PORT   (ADDR: the server's)
 *   rdmacm_api args ADDR          (argument checks and errnos, EINTR; ADDR: our own)
 *   rdmacm_api listen PORT SECS   (a listener that waits SECS and exits)
 *   rdmacm_api garbage ADDR N     (N malformed MADs to QP 1 of ADDR)
 *   rdmacm_api slow-server PORT DELAY  (accepts one connection DELAY s after its REQ)
 *   rdmacm_api slow-client ADDR PORT HOLD  (connects, holds it HOLD s)
 * Every check prints "FAIL ..." and exits 1 when it does not hold; each
 * side prints "ok <step>" as it passes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <rdma/rdma_verbs.h>

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);   \
			printf(__VA_ARGS__);                                   \
			printf(" (errno %d %s)\n", errno, strerror(errno));   \
			exit(1);                                               \
		}                                                              \
	} while (0)
#define ERRNO_IS(call, e)                                                      \
	do {                                                                   \
		errno = 0;                                                     \
		long r_ = (long)(call);                                        \
		CHECK(r_ == -1 && errno == (e), "%s: want -1/%s, got %ld/%d",  \
		      #call, #e, r_, errno);                                   \
	} while (0)

static const char CLIENT_PD[] = "hello from the client";
static const char SERVER_PD[] = "hello from the server";
static const char REJECT_PD[] = "go away";
static const char UDP_PD[] = "udp hello";
#define MSG 64

static struct sockaddr_in sin_of(const char *a, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	CHECK(inet_pton(AF_INET, a, &s.sin_addr) == 1, "address %s", a);
	return s;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, int type)
{
	struct rdma_cm_event *e;
	CHECK(rdma_get_cm_event(ch, &e) == 0, "get_cm_event");
	CHECK(e->event == type, "got %s (status %d), want %s",
	      rdma_event_str(e->event), e->status, rdma_event_str(type));
	return e;
}

/* A PD, CQ and QP of `type` on id->verbs, with one registered buffer. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[2 * MSG + 40];
	/* A completion polled while waiting for the other kind (below). */
	struct ibv_wc early;
	int has_early;
};

static void make_qp(struct conn *c, enum ibv_qp_type type)
{
	CHECK(c->id->verbs, "id->verbs set");
	CHECK(c->id->port_num == 1, "port_num %d", c->id->port_num);
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = ibv_create_cq(c->id->verbs, 16, NULL, NULL, 0);
	CHECK(c->pd && c->cq, "pd/cq");
	struct ibv_qp_init_attr a = {
		.send_cq = c->cq, .recv_cq = c->cq, .qp_type = type,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_all = 1,
	};
	CHECK(rdma_create_qp(c->id, c->pd, &a) == 0, "create_qp");
	CHECK(c->id->qp && c->id->qp->state == (type == IBV_QPT_UD ? IBV_QPS_RTS : IBV_QPS_INIT),
	      "qp state %d", c->id->qp->state);
	c->mr = ibv_reg_mr(c->pd, c->buf, sizeof c->buf, IBV_ACCESS_LOCAL_WRITE);
	CHECK(c->mr, "reg_mr");
}

static void post_recv(struct conn *c, int len)
{
	struct ibv_sge s = { (uintptr_t)c->buf, len, c->mr->lkey };
	struct ibv_recv_wr w = { .wr_id = 1, .sg_list = &s, .num_sge = 1 }, *bad;
	CHECK(ibv_post_recv(c->id->qp, &w, &bad) == 0, "post_recv");
}

/* The next successful completion of kind `op` (IBV_WC_SEND or
 * IBV_WC_RECV). The send and receive queues share the CQ, and nothing
 * orders their completions: the peer's reply can complete a receive
 * before the ACK of our own SEND arrives (an engine may send that ACK
 * after its own next request). A completion of the other kind that comes
 * first is kept for the next call. */
static struct ibv_wc wait_wc(struct conn *c, enum ibv_wc_opcode op)
{
	if (c->has_early && c->early.opcode == op) {
		c->has_early = 0;
		return c->early;
	}
	struct ibv_wc wc;
	int n;
	for (int i = 0; i < 5000000; i++) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		CHECK(n >= 0, "poll_cq");
		if (n == 1) {
			CHECK(wc.status == IBV_WC_SUCCESS, "wc status %s", ibv_wc_status_str(wc.status));
			if (wc.opcode == op)
				return wc;
			CHECK(!c->has_early, "two completions of opcode %d before one of %d", wc.opcode, op);
			c->early = wc;
			c->has_early = 1;
			continue;
		}
		usleep(1);
	}
	CHECK(0, "no completion");
	return wc;
}

static void send_msg(struct conn *c, const char *data, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	memcpy(c->buf + MSG + 40, data, MSG);
	struct ibv_sge s = { (uintptr_t)(c->buf + MSG + 40), MSG, c->mr->lkey };
	struct ibv_send_wr w = { .wr_id = 2, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	if (ah) {
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = qpn;
		w.wr.ud.remote_qkey = qkey;
	}
	CHECK(ibv_post_send(c->id->qp, &w, &bad) == 0, "post_send");
	CHECK(wait_wc(c, IBV_WC_SEND).wr_id == 2, "send completion");
}

static void fill(char *m, char seed)
{
	for (int i = 0; i < MSG; i++)
		m[i] = seed + i % 23;
}

static int server(const char *addr, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch, "channel");
	struct rdma_cm_id *tcp, *udp, *sync_listen;
	CHECK(rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP) == 0, "create tcp");
	CHECK(rdma_create_id(ch, &udp, NULL, RDMA_PS_UDP) == 0, "create udp");
	struct sockaddr_in any = sin_of("0.0.0.0", port);
	CHECK(rdma_bind_addr(tcp, (struct sockaddr *)&any) == 0, "bind tcp");
	CHECK(tcp->verbs == NULL, "wildcard bind: no device yet");
	CHECK(rdma_bind_addr(udp, (struct sockaddr *)&any) == 0, "bind udp (another port space)");
	CHECK(rdma_listen(tcp, 4) == 0 && rdma_listen(udp, 4) == 0, "listen");
	/* The synchronous passive endpoint (rdma_server's path). */
	char service[16];
	snprintf(service, sizeof service, "%d", port + 2);
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	CHECK(rdma_getaddrinfo(addr, service, &hints, &res) == 0, "getaddrinfo passive");
	struct ibv_qp_init_attr ep_attr = { .cap = { 1, 1, 1, 1, 16 }, .sq_sig_all = 1 };
	CHECK(rdma_create_ep(&sync_listen, res, NULL, &ep_attr) == 0, "create_ep passive");
	rdma_freeaddrinfo(res);
	CHECK(sync_listen->verbs, "bound to the device's address: verbs set");
	CHECK(rdma_listen(sync_listen, 1) == 0, "listen sync");
	printf("listening\n");
	fflush(stdout);

	/* 1. Connect, private data both ways, data, disconnect. */
	struct rdma_cm_event *e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(e->listen_id == tcp && e->id != tcp, "listen_id / new id");
	CHECK(e->param.conn.private_data_len == 56, "REQ private data length %d (92 - 36)",
	      e->param.conn.private_data_len);
	CHECK(memcmp(e->param.conn.private_data, CLIENT_PD, sizeof CLIENT_PD) == 0, "REQ private data");
	for (int i = sizeof CLIENT_PD; i < 56; i++)
		CHECK(((const char *)e->param.conn.private_data)[i] == 0, "REQ private data tail");
	CHECK(e->param.conn.initiator_depth == 1 && e->param.conn.responder_resources == 1,
	      "depths %d %d", e->param.conn.initiator_depth, e->param.conn.responder_resources);
	CHECK(e->param.conn.retry_count == 5 && e->param.conn.rnr_retry_count == 6, "retries %d %d",
	      e->param.conn.retry_count, e->param.conn.rnr_retry_count);
	struct conn c = { .id = e->id };
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(c.id);
	struct sockaddr_in *local = (struct sockaddr_in *)rdma_get_local_addr(c.id);
	CHECK(peer->sin_family == AF_INET && ntohs(peer->sin_port) == ntohs(rdma_get_dst_port(c.id)),
	      "peer address");
	CHECK(ntohs(local->sin_port) == port && rdma_get_src_port(c.id) == htons(port), "local port");
	rdma_ack_cm_event(e);
	make_qp(&c, IBV_QPT_RC);
	post_recv(&c, MSG);
	struct rdma_conn_param p = { .private_data = SERVER_PD, .private_data_len = sizeof SERVER_PD,
				     .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	CHECK(rdma_accept(c.id, &p) == 0, "accept");
	CHECK(c.id->qp->state == IBV_QPS_RTS, "RTS after accept");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	printf("ok established\n");
	char want[MSG];
	fill(want, 'a');
	CHECK(wait_wc(&c, IBV_WC_RECV).byte_len == MSG && memcmp(c.buf, want, MSG) == 0, "client's message");
	fill(want, 'A');
	send_msg(&c, want, NULL, 0, 0);
	e = expect(ch, RDMA_CM_EVENT_DISCONNECTED);
	CHECK(e->id == c.id, "disconnected id");
	rdma_ack_cm_event(e);
	CHECK(rdma_disconnect(c.id) == 0, "disconnect after DREQ (DREP)");
	rdma_destroy_qp(c.id);
	CHECK(rdma_destroy_id(c.id) == 0, "destroy");
	printf("ok disconnected\n");

	/* 2. Reject with private data. */
	e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *r = e->id;
	rdma_ack_cm_event(e);
	CHECK(rdma_reject(r, REJECT_PD, sizeof REJECT_PD) == 0, "reject");
	CHECK(rdma_destroy_id(r) == 0, "destroy rejected");
	printf("ok rejected\n");

	/* 3. UDP port space: SIDR. */
	e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(e->listen_id == udp, "UDP request on the UDP listener");
	CHECK(memcmp(e->param.ud.private_data, UDP_PD, sizeof UDP_PD) == 0, "SIDR_REQ private data");
	CHECK(e->param.ud.private_data_len == 216 - 36, "SIDR_REQ private data length %d",
	      e->param.ud.private_data_len);
	struct conn u = { .id = e->id };
	rdma_ack_cm_event(e);
	make_qp(&u, IBV_QPT_UD);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	CHECK(ibv_query_qp(u.id->qp, &qa, IBV_QP_QKEY, &qia) == 0 && qa.qkey == RDMA_UDP_QKEY,
	      "UD qkey %x", qa.qkey);
	post_recv(&u, MSG + 40);
	struct rdma_conn_param up = { .private_data = SERVER_PD, .private_data_len = sizeof SERVER_PD };
	CHECK(rdma_accept(u.id, &up) == 0, "accept UD (SIDR_REP)");
	fill(want, 'u');
	struct ibv_wc wc = wait_wc(&u, IBV_WC_RECV);
	CHECK(wc.byte_len == MSG + 40 && memcmp(u.buf + 40, want, MSG) == 0, "UD datagram");
	rdma_destroy_qp(u.id);
	CHECK(rdma_destroy_id(u.id) == 0, "destroy UD");
	printf("ok udp\n");

	/* 4. The synchronous endpoint. */
	struct rdma_cm_id *s;
	CHECK(rdma_get_request(sync_listen, &s) == 0, "get_request");
	CHECK(s->qp && s->pd && s->send_cq && s->recv_cq && s->send_cq_channel, "ep resources");
	struct ibv_mr *mr = rdma_reg_msgs(s, c.buf, MSG);
	CHECK(mr, "reg_msgs");
	CHECK(rdma_post_recv(s, NULL, c.buf, MSG, mr) == 0, "post_recv");
	CHECK(rdma_accept(s, NULL) == 0, "sync accept (waits for ESTABLISHED)");
	CHECK(rdma_get_recv_comp(s, &wc) == 1 && wc.byte_len == MSG, "sync recv");
	fill(want, 's');
	CHECK(memcmp(c.buf, want, MSG) == 0, "sync data");
	CHECK(rdma_disconnect(s) == 0, "sync disconnect");
	rdma_dereg_mr(mr);
	rdma_destroy_ep(s);
	rdma_destroy_ep(sync_listen);
	printf("ok sync\n");
	rdma_destroy_id(tcp);
	rdma_destroy_id(udp);
	rdma_destroy_event_channel(ch);
	printf("server done\n");
	return 0;
}

/* Resolves and routes a new id of `ps` toward addr:port on `ch`. */
static struct rdma_cm_id *resolved(struct rdma_event_channel *ch, const char *addr, int port, int ps)
{
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, ps) == 0, "create_id");
	struct sockaddr_in dst = sin_of(addr, port);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve_addr");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK(rdma_resolve_route(id, 2000) == 0, "resolve_route");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	CHECK(id->route.num_paths == 1 && id->route.path_rec, "path record");
	return id;
}

static int client(const char *addr, int port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch, "channel");
	struct rdma_cm_event *e;
	struct conn c;
	struct rdma_conn_param p = { .private_data = CLIENT_PD, .private_data_len = sizeof CLIENT_PD,
				     .responder_resources = 1, .initiator_depth = 1,
				     .retry_count = 5, .rnr_retry_count = 6 };
	/* 1. Until the server listens, REQs get REJ "invalid service ID". */
	for (int tries = 0;; tries++) {
		memset(&c, 0, sizeof c);
		c.id = resolved(ch, addr, port, RDMA_PS_TCP);
		make_qp(&c, IBV_QPT_RC);
		post_recv(&c, MSG);
		CHECK(rdma_connect(c.id, &p) == 0, "connect");
		CHECK(rdma_get_cm_event(ch, &e) == 0, "event");
		if (e->event == RDMA_CM_EVENT_ESTABLISHED)
			break;
		CHECK(e->event == RDMA_CM_EVENT_REJECTED && e->status == 8 && tries < 100,
		      "%s status %d", rdma_event_str(e->event), e->status);
		rdma_ack_cm_event(e);
		rdma_destroy_qp(c.id);
		rdma_destroy_id(c.id);
		usleep(200000);
	}
	CHECK(e->param.conn.private_data_len == 196, "REP private data length %d",
	      e->param.conn.private_data_len);
	CHECK(memcmp(e->param.conn.private_data, SERVER_PD, sizeof SERVER_PD) == 0, "REP private data");
	rdma_ack_cm_event(e);
	CHECK(c.id->qp->state == IBV_QPS_RTS, "RTS after ESTABLISHED");
	printf("ok established\n");
	char m[MSG];
	fill(m, 'a');
	send_msg(&c, m, NULL, 0, 0);
	fill(m, 'A');
	struct ibv_wc wc = wait_wc(&c, IBV_WC_RECV);
	CHECK(wc.byte_len == MSG && memcmp(c.buf, m, MSG) == 0, "server's message");
	CHECK(rdma_disconnect(c.id) == 0, "disconnect");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(c.id);
	rdma_destroy_id(c.id);
	printf("ok disconnected\n");

	/* 2. Rejected with the server's private data. */
	memset(&c, 0, sizeof c);
	c.id = resolved(ch, addr, port, RDMA_PS_TCP);
	make_qp(&c, IBV_QPT_RC);
	CHECK(rdma_connect(c.id, &p) == 0, "connect");
	e = expect(ch, RDMA_CM_EVENT_REJECTED);
	CHECK(e->status == 28, "REJ reason %d (consumer)", e->status);
	CHECK(e->param.conn.private_data_len == 148 &&
	      memcmp(e->param.conn.private_data, REJECT_PD, sizeof REJECT_PD) == 0, "REJ private data");
	rdma_ack_cm_event(e);
	CHECK(c.id->qp->state == IBV_QPS_ERR, "QP in error after REJ");
	rdma_destroy_qp(c.id);
	rdma_destroy_id(c.id);
	printf("ok rejected\n");

	/* 3. No listener: REJ reason 8, invalid service ID. */
	struct rdma_cm_id *id = resolved(ch, addr, port + 1, RDMA_PS_TCP);
	struct rdma_conn_param q = { .qp_num = 0x123, .responder_resources = 1, .initiator_depth = 1 };
	CHECK(rdma_connect(id, &q) == 0, "connect without a QP");
	e = expect(ch, RDMA_CM_EVENT_REJECTED);
	CHECK(e->status == 8, "REJ reason %d", e->status);
	rdma_ack_cm_event(e);
	rdma_destroy_id(id);
	printf("ok no listener\n");

	/* 4. No route: ADDR_ERROR. */
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
	struct sockaddr_in far = sin_of("10.200.200.200", port);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&far, 2000) == 0, "resolve_addr (async)");
	e = expect(ch, RDMA_CM_EVENT_ADDR_ERROR);
	CHECK(e->status == -ENETUNREACH, "ADDR_ERROR status %d", e->status);
	rdma_ack_cm_event(e);
	rdma_destroy_id(id);
	printf("ok addr error\n");

	/* 5. UDP port space: SIDR, then a datagram to the server's QP. */
	struct conn u = { .id = resolved(ch, addr, port, RDMA_PS_UDP) };
	make_qp(&u, IBV_QPT_UD);
	struct rdma_conn_param up = { .private_data = UDP_PD, .private_data_len = sizeof UDP_PD };
	CHECK(rdma_connect(u.id, &up) == 0, "connect UD (SIDR_REQ)");
	e = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(e->param.ud.qkey == RDMA_UDP_QKEY && e->param.ud.qp_num != 0, "SIDR_REP qpn %x qkey %x",
	      e->param.ud.qp_num, e->param.ud.qkey);
	CHECK(e->param.ud.private_data_len == 136 &&
	      memcmp(e->param.ud.private_data, SERVER_PD, sizeof SERVER_PD) == 0, "SIDR_REP private data");
	CHECK(e->param.ud.ah_attr.is_global == 1 && e->param.ud.ah_attr.port_num == 1, "ah_attr");
	struct ibv_ah *ah = ibv_create_ah(u.pd, &e->param.ud.ah_attr);
	CHECK(ah, "ah from param.ud");
	uint32_t rqpn = e->param.ud.qp_num, rqkey = e->param.ud.qkey;
	rdma_ack_cm_event(e);
	fill(m, 'u');
	send_msg(&u, m, ah, rqpn, rqkey);
	ibv_destroy_ah(ah);
	rdma_destroy_qp(u.id);
	rdma_destroy_id(u.id);
	printf("ok udp\n");

	/* 6. The synchronous path: rdma_getaddrinfo + rdma_create_ep. */
	char service[16];
	snprintf(service, sizeof service, "%d", port + 2);
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	CHECK(rdma_getaddrinfo(addr, service, &hints, &res) == 0, "getaddrinfo");
	CHECK(res->ai_dst_addr && !res->ai_src_addr && res->ai_qp_type == IBV_QPT_RC, "addrinfo");
	struct ibv_qp_init_attr attr = { .cap = { 1, 1, 1, 1, 16 }, .sq_sig_all = 1 };
	struct rdma_cm_id *s;
	for (int tries = 0;; tries++) {
		CHECK(rdma_create_ep(&s, res, NULL, &attr) == 0, "create_ep");
		CHECK(s->qp && s->qp->state == IBV_QPS_INIT, "ep QP");
		if (rdma_connect(s, NULL) == 0)
			break;
		CHECK(errno == ECONNREFUSED && tries < 100, "sync connect");
		rdma_destroy_ep(s);
		usleep(200000);
	}
	rdma_freeaddrinfo(res);
	fill(m, 's');
	struct ibv_mr *mr = rdma_reg_msgs(s, m, MSG);
	CHECK(mr && rdma_post_send(s, NULL, m, MSG, mr, 0) == 0, "sync send");
	CHECK(rdma_get_send_comp(s, &wc) == 1, "sync send completion");
	CHECK(rdma_disconnect(s) == 0, "sync disconnect");
	rdma_dereg_mr(mr);
	rdma_destroy_ep(s);
	printf("ok sync\n");
	rdma_destroy_event_channel(ch);
	printf("client done\n");
	return 0;
}

static volatile sig_atomic_t alarms, alarms_elsewhere;
static pthread_t main_thread;

static void on_alarm(int signo)
{
	(void)signo;
	alarms++;
	if (!pthread_equal(pthread_self(), main_thread))
		alarms_elsewhere++;
}

static int args(const char *own)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch, "channel");
	struct rdma_cm_id *id, *id2;
	ERRNO_IS(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP), EINVAL);
	ERRNO_IS(rdma_create_id(ch, &id, NULL, RDMA_PS_IPOIB), EPROTONOSUPPORT);
	ERRNO_IS(rdma_create_id(ch, &id, NULL, 0x999), EINVAL);
	ERRNO_IS(rdma_create_id((void *)&own, &id, NULL, RDMA_PS_TCP), EINVAL);
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "create");
	CHECK(rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP) == 0, "create");
	ERRNO_IS(rdma_bind_addr(id, NULL), EINVAL);
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	ERRNO_IS(rdma_bind_addr(id, (struct sockaddr *)&un), EAFNOSUPPORT);
	struct sockaddr_in other = sin_of("10.123.1.1", 0);
	ERRNO_IS(rdma_bind_addr(id, (struct sockaddr *)&other), EADDRNOTAVAIL);
	ERRNO_IS(rdma_resolve_route(id, 100), EINVAL);
	ERRNO_IS(rdma_connect(id, NULL), EINVAL);
	ERRNO_IS(rdma_accept(id, NULL), EINVAL);
	ERRNO_IS(rdma_reject(id, NULL, 0), EINVAL);
	ERRNO_IS(rdma_disconnect(id), EINVAL);
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC, .cap = { 1, 1, 1, 1, 0 } };
	ERRNO_IS(rdma_create_qp(id, NULL, &qa), EINVAL);
	/* A loopback address binds as the wildcard (the kernel's
	 * cma_any_addr): a port, no device. */
	struct rdma_cm_id *lo;
	CHECK(rdma_create_id(ch, &lo, NULL, RDMA_PS_TCP) == 0, "create");
	struct sockaddr_in lo4 = sin_of("127.0.0.1", 0);
	CHECK(rdma_bind_addr(lo, (struct sockaddr *)&lo4) == 0, "bind 127.0.0.1");
	CHECK(lo->verbs == NULL && rdma_get_src_port(lo) != 0, "loopback bind: port, no device");
	CHECK(rdma_destroy_id(lo) == 0, "destroy");
	CHECK(rdma_create_id(ch, &lo, NULL, RDMA_PS_TCP) == 0, "create");
	struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	CHECK(rdma_bind_addr(lo, (struct sockaddr *)&lo6) == 0, "bind ::1");
	CHECK(lo->verbs == NULL && rdma_get_src_port(lo) != 0, "::1 bind: port, no device");
	CHECK(rdma_destroy_id(lo) == 0, "destroy");
	/* rdma_getaddrinfo with hints only (librdmacm: an entry copying them). */
	struct rdma_addrinfo *hr, hh = { .ai_flags = RAI_PASSIVE, .ai_src_addr = (struct sockaddr *)&lo4,
					 .ai_src_len = sizeof lo4, .ai_port_space = RDMA_PS_TCP };
	CHECK(rdma_getaddrinfo(NULL, NULL, &hh, &hr) == 0, "getaddrinfo(NULL, NULL, hints)");
	CHECK(hr->ai_src_addr && hr->ai_flags == RAI_PASSIVE && hr->ai_port_space == RDMA_PS_TCP &&
	      ((struct sockaddr_in *)hr->ai_src_addr)->sin_addr.s_addr == lo4.sin_addr.s_addr,
	      "hints copied");
	rdma_freeaddrinfo(hr);
	struct sockaddr_in mine = sin_of(own, 0);
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&mine) == 0, "bind own address, port 0");
	CHECK(rdma_get_src_port(id) != 0, "ephemeral port");
	CHECK(id->verbs && id->port_num == 1, "verbs after binding the device's address");
	ERRNO_IS(rdma_bind_addr(id, (struct sockaddr *)&mine), EINVAL);
	struct sockaddr_in same = sin_of(own, ntohs(rdma_get_src_port(id)));
	ERRNO_IS(rdma_bind_addr(id2, (struct sockaddr *)&same), EADDRINUSE);
	int n = -1;
	struct ibv_context **devs = rdma_get_devices(&n);
	CHECK(devs && n == 1 && devs[0] == id->verbs && devs[1] == NULL, "get_devices %d", n);
	rdma_free_devices(devs);
	uint8_t tos = 32;
	int one = 1;
	ERRNO_IS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, sizeof one), EINVAL);
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) == 0, "TOS");
	ERRNO_IS(rdma_set_option(id, RDMA_OPTION_ID, 77, &one, sizeof one), ENOSYS);
	CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one) == 0,
	      "REUSEADDR on a bound id");
	ERRNO_IS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, 1), EINVAL);
	ERRNO_IS(rdma_join_multicast(id, (struct sockaddr *)&mine, NULL), ENOSYS);
	ERRNO_IS(rsocket(AF_INET, SOCK_STREAM, 0), ENOSYS);
	/* Events. */
	struct rdma_cm_event *e;
	ERRNO_IS(rdma_get_cm_event(ch, NULL), EINVAL);
	ERRNO_IS(rdma_get_cm_event((void *)&own, &e), EINVAL);
	ERRNO_IS(rdma_ack_cm_event((void *)&own), EINVAL);
	/* A signal whose handler has no SA_RESTART ends a blocking wait with
	 * EINTR, and it is handled on this thread, not the CM thread. */
	main_thread = pthread_self();
	struct sigaction act = { .sa_handler = on_alarm };
	sigemptyset(&act.sa_mask);
	CHECK(sigaction(SIGALRM, &act, NULL) == 0, "sigaction");
	struct itimerval soon = { .it_value = { .tv_sec = 0, .tv_usec = 200000 } };
	CHECK(setitimer(ITIMER_REAL, &soon, NULL) == 0, "setitimer");
	ERRNO_IS(rdma_get_cm_event(ch, &e), EINTR);
	CHECK(alarms == 1 && alarms_elsewhere == 0, "%d alarms, %d on another thread", (int)alarms,
	      (int)alarms_elsewhere);
	int fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "nonblocking");
	ERRNO_IS(rdma_get_cm_event(ch, &e), EAGAIN);
	struct sockaddr_in dst = sin_of(own, 9);
	CHECK(rdma_resolve_addr(id2, NULL, (struct sockaddr *)&dst, 100) == 0, "resolve own address");
	CHECK(rdma_get_cm_event(ch, &e) == 0 && e->event == RDMA_CM_EVENT_ADDR_RESOLVED && e->id == id2,
	      "event on a nonblocking channel");
	CHECK(rdma_ack_cm_event(e) == 0, "ack");
	ERRNO_IS(rdma_ack_cm_event(e), EINVAL);
	CHECK(strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED") == 0, "str");
	CHECK(strcmp(rdma_event_str(99), "UNKNOWN EVENT") == 0, "str");
	/* Address info. */
	struct rdma_addrinfo *res;
	ERRNO_IS(rdma_getaddrinfo(NULL, NULL, NULL, &res), EINVAL);
	struct rdma_addrinfo h = { .ai_flags = RAI_NUMERICHOST };
	errno = 0;
	CHECK(rdma_getaddrinfo("not-a-number", "1", &h, &res) == -1, "numeric host only");
	CHECK(rdma_getaddrinfo("localhost", "7471", NULL, &res) == 0, "named host");
	CHECK(res->ai_dst_addr && ((struct sockaddr_in *)res->ai_dst_addr)->sin_port == htons(7471) &&
	      res->ai_port_space == RDMA_PS_TCP, "localhost:7471");
	rdma_freeaddrinfo(res);
	struct rdma_addrinfo hu = { .ai_qp_type = IBV_QPT_UD, .ai_flags = RAI_PASSIVE };
	CHECK(rdma_getaddrinfo(NULL, "7174", &hu, &res) == 0 && res->ai_src_addr &&
	      res->ai_port_space == RDMA_PS_UDP, "passive UD");
	rdma_freeaddrinfo(res);
	ERRNO_IS(rdma_destroy_id((void *)&own), EINVAL);
	CHECK(rdma_destroy_id(id) == 0 && rdma_destroy_id(id2) == 0, "destroy");
	ERRNO_IS(rdma_destroy_id(id), EINVAL);
	rdma_destroy_event_channel(ch);
	/* A thread that waits on a channel another thread destroys (rping's CM
	 * thread as its main thread ends) keeps waiting, as in the kernel's
	 * closed file, until a signal: no EINVAL, no read of a closed fd. */
	struct rdma_event_channel *gone = rdma_create_event_channel();
	CHECK(gone, "channel");
	rdma_destroy_event_channel(gone);
	CHECK(setitimer(ITIMER_REAL, &soon, NULL) == 0, "setitimer");
	ERRNO_IS(rdma_get_cm_event(gone, &e), EINTR);
	CHECK(alarms == 2, "%d alarms", (int)alarms);
	printf("args done\n");
	return 0;
}

/* A listener on the wildcard that waits `secs` and exits: the CM runs
 * (and `roce-xdp stats` shows its counters) meanwhile. */
static int listen_only(int port, int secs)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	CHECK(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0, "create");
	struct sockaddr_in any = sin_of("0.0.0.0", port);
	CHECK(rdma_bind_addr(id, (struct sockaddr *)&any) == 0 && rdma_listen(id, 1) == 0, "listen");
	printf("listening\n");
	sleep(secs);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("listen done\n");
	return 0;
}

/* `n` MADs of 256 bytes with base version 0x42 (no CM MAD) from a UD QP
 * to QP 1 (Q_Key 0x80010000) of addr's IPv4-mapped GID. */
static int garbage(const char *addr, int n)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch, "channel");
	struct rdma_cm_id *id;
	CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0, "create");
	struct sockaddr_in dst = sin_of(addr, 9);
	CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0, "resolve_addr");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	CHECK(pd && cq, "pd/cq");
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { 4, 4, 1, 1, 0 }, .sq_sig_all = 1 };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	CHECK(qp, "create_qp");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x80010000 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0, "INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "RTR");
	a.qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "RTS");
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	ah_attr.grh.dgid.raw[10] = 0xff;
	ah_attr.grh.dgid.raw[11] = 0xff;
	memcpy(&ah_attr.grh.dgid.raw[12], &dst.sin_addr, 4);
	ah_attr.grh.sgid_index = 1;
	ah_attr.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(pd, &ah_attr);
	CHECK(ah, "create_ah");
	static char mad[256];
	memset(mad, 0x5a, sizeof mad);
	mad[0] = 0x42; /* base version: not 1 */
	struct ibv_mr *mr = ibv_reg_mr(pd, mad, sizeof mad, 0);
	CHECK(mr, "reg_mr");
	for (int i = 0; i < n; i++) {
		struct ibv_sge sg = { (uintptr_t)mad, sizeof mad, mr->lkey };
		struct ibv_send_wr w = { .wr_id = i, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND },
				   *bad;
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = 1;
		w.wr.ud.remote_qkey = 0x80010000;
		CHECK(ibv_post_send(qp, &w, &bad) == 0, "post_send");
		struct ibv_wc wc;
		int got;
		while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
			usleep(100);
		CHECK(got == 1 && wc.status == IBV_WC_SUCCESS, "send completion");
	}
	printf("sent %d\n", n);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* Accepts one connection `delay` s after its REQ arrived (beyond the
 * peer's REQ timeout), then waits for the client's disconnect. */
static int slow_server(int port, int delay)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l;
	CHECK(ch && rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0, "create");
	struct sockaddr_in any = sin_of("0.0.0.0", port);
	CHECK(rdma_bind_addr(l, (struct sockaddr *)&any) == 0 && rdma_listen(l, 1) == 0, "listen");
	printf("listening\n");
	struct rdma_cm_event *e = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct conn c = { .id = e->id };
	rdma_ack_cm_event(e);
	make_qp(&c, IBV_QPT_RC);
	post_recv(&c, MSG);
	sleep(delay);
	struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	CHECK(rdma_accept(c.id, &p) == 0, "accept");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
	printf("ok slow established\n");
	char want[MSG];
	fill(want, 'm');
	CHECK(wait_wc(&c, IBV_WC_RECV).byte_len == MSG && memcmp(c.buf, want, MSG) == 0, "client's message");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_disconnect(c.id);
	rdma_destroy_qp(c.id);
	rdma_destroy_id(c.id);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	printf("server done\n");
	return 0;
}

static int slow_client(const char *addr, int port, int hold)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	CHECK(ch, "channel");
	struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	struct conn c;
	struct rdma_cm_event *e;
	for (int tries = 0;; tries++) {
		memset(&c, 0, sizeof c);
		c.id = resolved(ch, addr, port, RDMA_PS_TCP);
		make_qp(&c, IBV_QPT_RC);
		CHECK(rdma_connect(c.id, &p) == 0, "connect");
		CHECK(rdma_get_cm_event(ch, &e) == 0, "event");
		if (e->event == RDMA_CM_EVENT_ESTABLISHED)
			break;
		CHECK(e->event == RDMA_CM_EVENT_REJECTED && e->status == 8 && tries < 100,
		      "%s status %d", rdma_event_str(e->event), e->status);
		rdma_ack_cm_event(e);
		rdma_destroy_qp(c.id);
		rdma_destroy_id(c.id);
		usleep(200000);
	}
	rdma_ack_cm_event(e);
	printf("ok slow established\n");
	char m[MSG];
	fill(m, 'm');
	send_msg(&c, m, NULL, 0, 0);
	sleep(hold);
	CHECK(rdma_disconnect(c.id) == 0, "disconnect");
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(c.id);
	rdma_destroy_id(c.id);
	rdma_destroy_event_channel(ch);
	printf("client done\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "args"))
		return args(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "listen"))
		return listen_only(atoi(argv[2]), atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "garbage"))
		return garbage(argv[2], atoi(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "slow-server"))
		return slow_server(atoi(argv[2]), atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "slow-client"))
		return slow_client(argv[2], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: %s server|client ADDR PORT | args ADDR\n", argv[0]);
	return 2;
}
