/* RDMA READ or WRITE goodput the way transfer engines drive verbs
 * (Mooncake's transfer engine, UCX with a progress thread): several
 * threads post, another one polls.
 *
 * - T posting threads (-t, default 4), each posting batches of B (-b,
 *   default 16) signaled RDMA READs or WRITEs (-o read|write) of S bytes
 *   (-s, default 65536) as one chained ibv_post_send, then waiting until
 *   the batch completed before posting the next, as Mooncake's
 *   transfer_engine_bench's submission threads do (submit a batch, wait
 *   for its transfers);
 * - Q RC QPs (-q, default T): thread t posts on QP t % Q; threads sharing
 *   a QP take its mutex around ibv_post_send (Mooncake's workers share an
 *   endpoint's QPs under the endpoint's lock);
 * - one polling thread drains the one CQ all QPs share with ibv_poll_cq
 *   (64 at a time, Mooncake's batch) in a loop and hands each completion
 *   back to its thread (an atomic counter per thread);
 * - how a posting thread waits for its batch (-w): spin (re-read the
 *   counter, as the submission threads of Mooncake's transfer_engine_bench
 *   do in their getTransferStatus loop; the default), yield (sched_yield
 *   between looks), block (futex on the counter; the poller wakes it when
 *   the batch is complete).
 * Besides its goodput it reports, per batch, the time from its post to
 * its last completion handed back (the verbs provider's and the
 * poller's part) and from then to its thread's next post (the posting
 * thread's: how long it took that thread to see its batch complete).
 *
 * Without HOST it is the server: passive, it registers its memory,
 * answers the client's connection (a TCP exchange of QP numbers, PSNs,
 * GIDs, the region's address and rkey, in host byte order: both sides on
 * one host or hosts of the same byte order) and waits until the client
 * closes it. With HOST it is the client: it runs -D seconds (default 2)
 * and prints its goodput, a line for people and one JSON line
 * ("bw_avg_mbps" in MB/s of 2^20 bytes, as perftest and roce-xdp's tools
 * report; "gbps" in 10^9 bits/s).
 *
 * -c (READ): each thread clears its blocks before posting a batch and
 * checks, once the batch completed, that they hold the server's bytes
 * (byte i of the server's region is i * 7 + 1, modulo 256).
 *
 * Usage: threaded_rdma_bw [-o read|write] [-t T] [-q Q] [-b B] [-s S]
 *        [-D SECS] [-w spin|yield|block] [-c] [-p PORT] [-x GID_INDEX] [HOST]
 * Build: cc -O2 -pthread threaded_rdma_bw.c -o threaded_rdma_bw -libverbs
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/futex.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define MAX_QPS 64
#define MAX_THREADS 64
#define MAX_BATCH 256
#define POLL_BATCH 64
#define MAGIC 0x74726477u /* "trdw" */

enum wait_mode { WAIT_SPIN, WAIT_YIELD, WAIT_BLOCK };

struct opts {
	int read;
	int threads, qps, batch;
	uint64_t size;
	int seconds;
	enum wait_mode wait;
	const char *port;
	int gid_index;
	const char *host;
	int check;
};

/* What each side tells the other. */
struct hello {
	uint32_t magic;
	uint32_t qps;
	uint64_t bytes; /* the client: how much the server registers */
	uint64_t addr;  /* the server: its region */
	uint32_t rkey;
	uint32_t mtu;   /* enum ibv_mtu: the sender's active MTU */
	uint8_t gid[16];
	uint32_t qpn[MAX_QPS];
	uint32_t psn[MAX_QPS];
};

/* One posting thread, on a cache line of its own. */
struct poster {
	_Alignas(64) _Atomic uint32_t done; /* completions handed back (wraps) */
	_Atomic uint32_t posted;            /* work requests posted (wraps) */
	_Atomic uint32_t waiting;           /* blocked in futex on `done` */
	_Atomic uint64_t completed_ns;      /* when the poller handed back a batch's last */
	uint64_t batches;
	uint64_t batch_ns;    /* sum over batches: post -> last completion handed back */
	uint64_t handback_ns; /* sum: last completion handed back -> next post */
	int index;
	pthread_t thread;
};

static struct opts o = {
	.read = 1, .threads = 4, .qps = 0, .batch = 16, .size = 65536,
	.seconds = 2, .wait = WAIT_SPIN, .port = "18597", .gid_index = 1,
};
static struct ibv_qp *qp[MAX_QPS];
static pthread_mutex_t qp_lock[MAX_QPS];
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static char *buf;
static uint64_t remote_addr;
static uint32_t remote_rkey;
static struct poster posters[MAX_THREADS];
static atomic_int stop_posting, stop_polling, failed;

#define DIE(...) do { fprintf(stderr, "threaded_rdma_bw: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static double now_s(void)
{
	return now_ns() / 1e9;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	struct timespec ms = { 0, 1000000 }; /* look again after 1 ms anyway */
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ms, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void usage(const char *me)
{
	fprintf(stderr,
		"usage: %s [-o read|write] [-t threads] [-q qps] [-b batch] [-s bytes] [-D secs]\n"
		"          [-w spin|yield|block] [-c] [-p port] [-x gid_index] [HOST]\n", me);
	exit(2);
}

static void parse(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "o:t:q:b:s:D:w:cp:x:h")) != -1) {
		switch (c) {
		case 'o':
			if (!strcmp(optarg, "read")) o.read = 1;
			else if (!strcmp(optarg, "write")) o.read = 0;
			else usage(argv[0]);
			break;
		case 't': o.threads = atoi(optarg); break;
		case 'q': o.qps = atoi(optarg); break;
		case 'b': o.batch = atoi(optarg); break;
		case 's': o.size = strtoull(optarg, NULL, 0); break;
		case 'D': o.seconds = atoi(optarg); break;
		case 'w':
			if (!strcmp(optarg, "spin")) o.wait = WAIT_SPIN;
			else if (!strcmp(optarg, "yield")) o.wait = WAIT_YIELD;
			else if (!strcmp(optarg, "block")) o.wait = WAIT_BLOCK;
			else usage(argv[0]);
			break;
		case 'c': o.check = 1; break;
		case 'p': o.port = optarg; break;
		case 'x': o.gid_index = atoi(optarg); break;
		default: usage(argv[0]);
		}
	}
	if (optind < argc)
		o.host = argv[optind];
	if (o.qps == 0)
		o.qps = o.threads;
	if (o.threads < 1 || o.threads > MAX_THREADS || o.qps < 1 || o.qps > MAX_QPS ||
	    o.batch < 1 || o.batch > MAX_BATCH || o.size < 1 || o.seconds < 1)
		usage(argv[0]);
}

static void full_io(int fd, void *p, size_t n, int writing)
{
	char *c = p;
	while (n) {
		ssize_t r = writing ? write(fd, c, n) : read(fd, c, n);
		if (r <= 0)
			DIE("TCP exchange: %s", r ? strerror(errno) : "connection closed");
		c += r;
		n -= (size_t)r;
	}
}

static int tcp_connect(void)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	if (getaddrinfo(o.host, o.port, &hints, &ai))
		DIE("cannot resolve %s", o.host);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
		DIE("Couldn't connect to %s:%s: %s", o.host, o.port, strerror(errno));
	freeaddrinfo(ai);
	return fd;
}

static int tcp_accept(void)
{
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(o.port)) };
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (void *)&a, sizeof(a)) || listen(lfd, 1))
		DIE("listening on port %s: %s", o.port, strerror(errno));
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		DIE("accept: %s", strerror(errno));
	close(lfd);
	return fd;
}

/* The device, a PD, the shared CQ, `n` RC QPs in INIT, the region. */
static struct ibv_pd *open_side(int n, uint64_t bytes, struct hello *me)
{
	int count = 0;
	struct ibv_device **list = ibv_get_device_list(&count);
	if (!list || count < 1)
		DIE("no RDMA device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		DIE("ibv_open_device: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		DIE("ibv_alloc_pd: %s", strerror(errno));
	struct ibv_port_attr port;
	union ibv_gid gid;
	if (ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, o.gid_index, &gid))
		DIE("port 1 / GID %d: %s", o.gid_index, strerror(errno));
	if (posix_memalign((void **)&buf, 4096, bytes))
		DIE("out of memory");
	for (uint64_t i = 0; i < bytes; i++)
		buf[i] = (char)(i * 7 + 1);
	mr = ibv_reg_mr(pd, buf, bytes,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	int depth = o.batch * ((o.threads + n - 1) / n);
	cq = ibv_create_cq(ctx, depth * n + POLL_BATCH, NULL, NULL, 0);
	if (!cq)
		DIE("ibv_create_cq: %s", strerror(errno));
	memset(me, 0, sizeof(*me));
	me->magic = MAGIC;
	me->qps = n;
	me->mtu = port.active_mtu;
	me->addr = (uintptr_t)buf;
	me->rkey = mr->rkey;
	memcpy(me->gid, gid.raw, 16);
	srand48(getpid() ^ (long)time(NULL));
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = depth, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};
		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i])
			DIE("ibv_create_qp: %s", strerror(errno));
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_WRITE,
		};
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
			DIE("QP to INIT: %s", strerror(errno));
		me->qpn[i] = qp[i]->qp_num;
		me->psn[i] = lrand48() & 0xffffff;
		pthread_mutex_init(&qp_lock[i], NULL);
	}
	return pd;
}

/* Every QP to RTR then RTS, connected to the peer's QP of the same index. */
static void connect_qps(const struct hello *me, const struct hello *peer)
{
	enum ibv_mtu mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu;
	for (uint32_t i = 0; i < me->qps; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = mtu,
			.dest_qp_num = peer->qpn[i], .rq_psn = peer->psn[i],
			.max_dest_rd_atomic = 16, .min_rnr_timer = 12,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .sgid_index = o.gid_index, .hop_limit = 64 } },
		};
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
			DIE("QP to RTR: %s", strerror(errno));
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = me->psn[i];
		a.max_rd_atomic = 16;
		if (ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
			DIE("QP to RTS: %s", strerror(errno));
	}
}

static int server(void)
{
	int fd = tcp_accept();
	struct hello peer, me;
	full_io(fd, &peer, sizeof(peer), 0);
	if (peer.magic != MAGIC || peer.qps < 1 || peer.qps > MAX_QPS)
		DIE("the client speaks another protocol");
	open_side(peer.qps, peer.bytes, &me);
	connect_qps(&me, &peer);
	full_io(fd, &me, sizeof(me), 1);
	/* Passive: the client reads or writes our memory until it closes. */
	char c;
	while (read(fd, &c, 1) > 0)
		;
	return 0;
}

/* Hands completions back to their threads until told to stop. */
static void *poll_loop(void *arg)
{
	(void)arg;
	struct ibv_wc wc[POLL_BATCH];
	while (!atomic_load_explicit(&stop_polling, memory_order_relaxed)) {
		int n = ibv_poll_cq(cq, POLL_BATCH, wc);
		if (n < 0) {
			fprintf(stderr, "threaded_rdma_bw: ibv_poll_cq failed\n");
			atomic_store(&failed, 1);
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			struct poster *p = &posters[wc[i].wr_id >> 32];
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "threaded_rdma_bw: thread %d: %s\n", p->index,
					ibv_wc_status_str(wc[i].status));
				atomic_store(&failed, 1);
			}
			/* Only this thread writes `done`: the batch's time first,
			 * then the count that publishes it. */
			uint32_t d = atomic_load_explicit(&p->done, memory_order_relaxed) + 1;
			if (d == atomic_load_explicit(&p->posted, memory_order_relaxed))
				atomic_store_explicit(&p->completed_ns, now_ns(), memory_order_relaxed);
			atomic_store_explicit(&p->done, d, memory_order_release);
			if (o.wait == WAIT_BLOCK &&
			    atomic_load_explicit(&p->waiting, memory_order_acquire))
				futex_wake(&p->done);
		}
	}
	return NULL;
}

/* The server's byte at offset `off` of its region. */
static char server_byte(uint64_t off)
{
	return (char)(off * 7 + 1);
}

/* -c: whether block `off` (of this thread's batch) holds the server's bytes. */
static int block_holds_servers(uint64_t off)
{
	for (uint64_t j = 0; j < o.size; j++)
		if (buf[off + j] != server_byte(off + j)) {
			fprintf(stderr, "threaded_rdma_bw: byte %llu of the region: 0x%02x, not 0x%02x\n",
				(unsigned long long)(off + j), (unsigned char)buf[off + j],
				(unsigned char)server_byte(off + j));
			return 0;
		}
	return 1;
}

static void *post_loop(void *arg)
{
	struct poster *p = arg;
	int k = p->index % o.qps;
	int shared = o.threads > o.qps;
	struct ibv_sge sge[MAX_BATCH];
	struct ibv_send_wr wr[MAX_BATCH], *bad;
	uint64_t last_post = 0;
	while (!atomic_load_explicit(&stop_posting, memory_order_relaxed) &&
	       !atomic_load_explicit(&failed, memory_order_relaxed)) {
		for (int i = 0; i < o.batch; i++) {
			/* Block i of this thread: slot i * T + t, here and there. */
			uint64_t off = o.size * ((uint64_t)i * o.threads + p->index);
			sge[i] = (struct ibv_sge){ .addr = (uintptr_t)buf + off,
						   .length = (uint32_t)o.size, .lkey = mr->lkey };
			wr[i] = (struct ibv_send_wr){
				.wr_id = ((uint64_t)p->index << 32) | (p->posted + (uint32_t)i),
				.next = i + 1 < o.batch ? &wr[i + 1] : NULL,
				.sg_list = &sge[i], .num_sge = 1,
				.opcode = o.read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = remote_addr + off, .rkey = remote_rkey },
			};
		}
		if (o.check && o.read)
			for (int i = 0; i < o.batch; i++)
				memset(buf + sge[i].addr - (uintptr_t)buf, 0, o.size);
		/* The counter's target first: the poller compares with it. */
		uint32_t target = p->posted + (uint32_t)o.batch;
		atomic_store_explicit(&p->posted, target, memory_order_relaxed);
		uint64_t t = now_ns();
		if (last_post) {
			uint64_t c = atomic_load_explicit(&p->completed_ns, memory_order_relaxed);
			p->batch_ns += c - last_post;
			p->handback_ns += t - c;
		}
		last_post = t;
		if (shared)
			pthread_mutex_lock(&qp_lock[k]);
		int r = ibv_post_send(qp[k], wr, &bad);
		if (shared)
			pthread_mutex_unlock(&qp_lock[k]);
		if (r) {
			fprintf(stderr, "threaded_rdma_bw: ibv_post_send: %s\n", strerror(r));
			atomic_store(&failed, 1);
			break;
		}
		for (;;) {
			uint32_t d = atomic_load_explicit(&p->done, memory_order_acquire);
			if (d == target || atomic_load_explicit(&failed, memory_order_relaxed))
				break;
			if (o.wait == WAIT_YIELD) {
				sched_yield();
			} else if (o.wait == WAIT_BLOCK) {
				atomic_store(&p->waiting, 1);
				d = atomic_load_explicit(&p->done, memory_order_acquire);
				if (d != target)
					futex_wait(&p->done, d);
				atomic_store(&p->waiting, 0);
			}
		}
		if (o.check && o.read && !atomic_load(&failed))
			for (int i = 0; i < o.batch; i++)
				if (!block_holds_servers(sge[i].addr - (uintptr_t)buf))
					atomic_store(&failed, 1);
		p->batches++;
	}
	return NULL;
}

static int client(void)
{
	uint64_t bytes = o.size * (uint64_t)o.batch * o.threads;
	struct hello me, peer;
	open_side(o.qps, bytes, &me);
	me.bytes = bytes;
	int fd = tcp_connect();
	full_io(fd, &me, sizeof(me), 1);
	full_io(fd, &peer, sizeof(peer), 0);
	if (peer.magic != MAGIC || peer.qps != me.qps)
		DIE("the server speaks another protocol");
	remote_addr = peer.addr;
	remote_rkey = peer.rkey;
	connect_qps(&me, &peer);

	pthread_t poller;
	pthread_create(&poller, NULL, poll_loop, NULL);
	double t0 = now_s();
	for (int t = 0; t < o.threads; t++) {
		posters[t].index = t;
		pthread_create(&posters[t].thread, NULL, post_loop, &posters[t]);
	}
	while (now_s() - t0 < o.seconds && !atomic_load(&failed))
		usleep(10000);
	atomic_store(&stop_posting, 1);
	uint64_t batches = 0, timed = 0, batch_ns = 0, handback_ns = 0;
	for (int t = 0; t < o.threads; t++) {
		pthread_join(posters[t].thread, NULL);
		batches += posters[t].batches;
		/* The first batch of each thread has no previous one. */
		timed += posters[t].batches ? posters[t].batches - 1 : 0;
		batch_ns += posters[t].batch_ns;
		handback_ns += posters[t].handback_ns;
	}
	double batch_us = timed ? batch_ns / 1e3 / timed : 0;
	double handback_us = timed ? handback_ns / 1e3 / timed : 0;
	double secs = now_s() - t0;
	atomic_store(&stop_polling, 1);
	pthread_join(poller, NULL);
	close(fd);
	if (atomic_load(&failed))
		return 1;

	static const char *wait_names[] = { "spin", "yield", "block" };
	double moved = (double)batches * o.batch * o.size;
	double mbps = moved / secs / 1048576.0, gbps = moved * 8 / secs / 1e9;
	printf("%s %llu B, %d threads, %d QPs, batches of %d (%s): %llu batches in %.2f s, "
	       "%.2f MB/s, %.3f Gb/s; per batch: %.1f us from its post to its last completion "
	       "handed back, then %.1f us to the thread's next post\n",
	       o.read ? "READ" : "WRITE", (unsigned long long)o.size, o.threads, o.qps, o.batch,
	       wait_names[o.wait], (unsigned long long)batches, secs, mbps, gbps, batch_us,
	       handback_us);
	printf("{\"op\":\"%s\",\"bytes\":%llu,\"threads\":%d,\"qps\":%d,\"batch\":%d,"
	       "\"wait\":\"%s\",\"batches\":%llu,\"seconds\":%.4f,\"bw_avg_mbps\":%.3f,"
	       "\"gbps\":%.4f,\"batch_us\":%.1f,\"handback_us\":%.1f}\n",
	       o.read ? "read" : "write", (unsigned long long)o.size, o.threads, o.qps, o.batch,
	       wait_names[o.wait], (unsigned long long)batches, secs, mbps, gbps, batch_us,
	       handback_us);
	return 0;
}

int main(int argc, char **argv)
{
	parse(argc, argv);
	return o.host ? client() : server();
}
