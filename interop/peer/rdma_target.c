/*
 * rdma_target: the passive side of roce-xdp's RDMA WRITE / READ interop
 * test on a stock libibverbs device (Soft-RoCE rxe in the test VM).
 *
 * It exposes one registered buffer of SIZE * ITERS bytes and lets the peer
 * (`roce-xdp interop rdma-client`) WRITE into it or READ from it; it posts no work
 * requests itself. Written for roce-xdp (interop/README.md); the exchange is
 * defined in engine/src/oob/rdma_target.rs:
 *
 *   client -> target  QQQQQQ:PPPPPP:<32 hex GID>:<16 hex VA>:RRRRRRRR:LLLLLLLL\n
 *   target -> client  the same line for the target's QP and buffer
 *   (the client WRITEs / READs)
 *   client -> target  done\n
 *   target -> client  ok <bytes>\n  or  bad <offset> <got> <want>\n
 *
 * Buffer contents: byte k is pattern(k) = (k * 2654435761 mod 2^32) >> 24.
 * -o read: the buffer is filled with the pattern (and must still hold it at
 * the end); -o write: it starts zeroed and must hold the pattern at the end.
 *
 * With -c HOST the roles swap: this program is the active side (it WRITEs
 * into / READs from the buffer of `roce-xdp interop rdma-target` on HOST, ITERS
 * requests of SIZE bytes, up to 16 in flight, request i at offset i * SIZE),
 * sends the first address line and "done", and reads the verdict; for READ
 * it also checks what it read.
 *
 * Build: gcc -O2 -o rdma_target rdma_target.c -libverbs
 * Usage: rdma_target -o write|read [-c HOST] [-s SIZE] [-n ITERS] [-m MTU]
 *                    [-g GIDX] [-p PORT] [-d DEV]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_LEN 128
#define WINDOW 16

static uint8_t pattern(uint64_t k)
{
	return (uint8_t)(((uint32_t)k * 2654435761u) >> 24);
}

static int fail(const char *what)
{
	fprintf(stderr, "rdma_target: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Reads one '\n'-terminated line (without the newline). */
static int read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	while (n + 1 < cap) {
		char c;
		ssize_t r = read(fd, &c, 1);
		if (r <= 0)
			return -1;
		if (c == '\n') {
			buf[n] = 0;
			return 0;
		}
		buf[n++] = c;
	}
	return -1;
}

static int write_all(int fd, const char *s)
{
	size_t len = strlen(s);
	while (len) {
		ssize_t w = write(fd, s, len);
		if (w <= 0)
			return -1;
		s += w;
		len -= (size_t)w;
	}
	return 0;
}

static enum ibv_mtu mtu_enum(int mtu)
{
	switch (mtu) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	return 0;
}

/*
 * -c mode, after the exchange: ITERS WRITEs / READs of SIZE bytes, up to
 * WINDOW in flight, then "done", then the peer's verdict.
 */
static int run_client(int fd, struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, uint8_t *buf,
		      unsigned long size, unsigned long iters, int is_read, unsigned long long rva,
		      unsigned rrkey, unsigned rlen)
{
	if ((unsigned long long)size * iters > rlen) {
		fprintf(stderr, "rdma_target: the peer's buffer (%u bytes) is smaller than -s * -n\n", rlen);
		return 1;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long posted = 0, done = 0;
	while (done < iters) {
		while (posted < iters && posted - done < WINDOW) {
			struct ibv_sge sge = { .addr = (uintptr_t)buf + posted * size,
					       .length = (uint32_t)size, .lkey = mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = posted, .sg_list = &sge, .num_sge = 1,
				.opcode = is_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = rva + posted * size, .rkey = rrkey },
			}, *bad;
			if (ibv_post_send(qp, &wr, &bad))
				return fail("ibv_post_send");
			posted++;
		}
		struct ibv_wc wc[WINDOW];
		int n = ibv_poll_cq(cq, WINDOW, wc);
		if (n < 0)
			return fail("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "Failed status %s (%d) for wr_id %llu\n",
					ibv_wc_status_str(wc[i].status), wc[i].status,
					(unsigned long long)wc[i].wr_id);
				return 1;
			}
			done++;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	size_t len = size * iters;
	printf("%s: %zu bytes in %.2f seconds = %.2f Mbit/sec\n", is_read ? "READ" : "WRITE", len, secs,
	       len * 8 / secs / 1e6);
	int rc = 0;
	if (is_read) {
		size_t k;
		for (k = 0; k < len && buf[k] == pattern(k); k++)
			;
		if (k < len) {
			printf("READ: data mismatch at offset %zu: got %u, want %u\n", k, buf[k], pattern(k));
			rc = 1;
		} else {
			printf("READ: verified %zu bytes read from the peer\n", len);
		}
	}
	char line[LINE_MAX_LEN];
	if (write_all(fd, "done\n") || read_line(fd, line, sizeof line)) {
		fprintf(stderr, "rdma_target: no verdict from the peer\n");
		return 1;
	}
	printf("peer: %s\n", line);
	if (strncmp(line, "ok ", 3))
		rc = 1;
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	const char *op = NULL, *devname = NULL, *host = NULL;
	unsigned long size = 4096, iters = 10;
	int mtu = 1024, gidx = 1, port = 18515, opt;

	while ((opt = getopt(argc, argv, "o:c:s:n:m:g:p:d:")) != -1) {
		switch (opt) {
		case 'o': op = optarg; break;
		case 'c': host = optarg; break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = strtoul(optarg, NULL, 0); break;
		case 'm': mtu = atoi(optarg); break;
		case 'g': gidx = atoi(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'd': devname = optarg; break;
		default:
			fprintf(stderr, "usage: %s -o write|read [-s SIZE] [-n ITERS] [-m MTU] [-g GIDX] [-p PORT] [-d DEV]\n", argv[0]);
			return 2;
		}
	}
	int is_read = op && !strcmp(op, "read");
	if (!op || (!is_read && strcmp(op, "write")) || !mtu_enum(mtu) || !size || !iters) {
		fprintf(stderr, "rdma_target: need -o write|read, a valid -m, -s > 0 and -n > 0\n");
		return 2;
	}
	size_t len = size * iters;

	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "rdma_target: no RDMA device %s\n", devname ? devname : "");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		return fail("ibv_open_device");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		return fail("ibv_query_gid");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	uint8_t *buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	if (!pd || !buf)
		return fail("ibv_alloc_pd / buffer");
	for (size_t k = 0; k < len; k++)
		buf[k] = (is_read == !host) ? pattern(k) : 0;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * WINDOW, NULL, NULL, 0);
	if (!mr || !cq)
		return fail("ibv_reg_mr / ibv_create_cq");
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = WINDOW, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	if (!qp)
		return fail("ibv_create_qp");
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return fail("modify QP to INIT");

	srand48(time(NULL) ^ getpid());
	unsigned my_psn = lrand48() & 0xffffff;

	int fd;
	if (host) {
		char portstr[16];
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
		snprintf(portstr, sizeof portstr, "%d", port);
		if (getaddrinfo(host, portstr, &hints, &ai)) {
			fprintf(stderr, "rdma_target: cannot resolve %s\n", host);
			return 1;
		}
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
			return fail("connect");
		freeaddrinfo(ai);
	} else {
		int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
		if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1))
			return fail("bind/listen");
		fd = accept(ls, NULL, NULL);
		if (fd < 0)
			return fail("accept");
		close(ls);
	}
	char gidhex[33];
	for (int i = 0; i < 16; i++)
		sprintf(gidhex + 2 * i, "%02x", gid.raw[i]);
	char myline[LINE_MAX_LEN];
	snprintf(myline, sizeof myline, "%06x:%06x:%s:%016llx:%08x:%08x\n", qp->qp_num, my_psn, gidhex,
		 (unsigned long long)(uintptr_t)buf, mr->rkey, (unsigned)len);
	if (host && write_all(fd, myline))
		return fail("write address");

	char line[LINE_MAX_LEN];
	unsigned rqpn, rpsn, rrkey, rlen;
	unsigned long long rva;
	char rgid[33];
	if (read_line(fd, line, sizeof line) ||
	    sscanf(line, "%6x:%6x:%32[0-9a-f]:%16llx:%8x:%8x", &rqpn, &rpsn, rgid, &rva, &rrkey, &rlen) != 6 ||
	    strlen(rgid) != 32) {
		fprintf(stderr, "rdma_target: bad address line \"%s\"\n", line);
		return 1;
	}
	union ibv_gid dgid;
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(rgid + 2 * i, "%2x", &v);
		dgid.raw[i] = (uint8_t)v;
	}

	struct ibv_qp_attr r = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu_enum(mtu), .dest_qp_num = rqpn,
		.rq_psn = rpsn, .max_dest_rd_atomic = 16, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = dgid, .sgid_index = gidx, .hop_limit = 1 } },
	};
	if (ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return fail("modify QP to RTR");
	struct ibv_qp_attr s = {
		.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
		.sq_psn = my_psn, .max_rd_atomic = host ? WINDOW : 1,
	};
	if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return fail("modify QP to RTS");

	printf("  local address:  QPN 0x%06x, PSN 0x%06x, GID %s, VA 0x%016llx, RKey 0x%08x, len %zu\n",
	       qp->qp_num, my_psn, gidhex, (unsigned long long)(uintptr_t)buf, mr->rkey, len);
	printf("  remote address: QPN 0x%06x, PSN 0x%06x, GID %s, VA 0x%016llx, RKey 0x%08x, len %u\n",
	       rqpn, rpsn, rgid, rva, rrkey, rlen);
	fflush(stdout);
	if (host)
		return run_client(fd, qp, cq, mr, buf, size, iters, is_read, rva, rrkey, rlen);
	if (write_all(fd, myline))
		return fail("write address");

	if (read_line(fd, line, sizeof line) || strcmp(line, "done")) {
		fprintf(stderr, "rdma_target: expected \"done\" from the client\n");
		return 1;
	}
	int rc = 0;
	for (size_t k = 0; k < len; k++) {
		if (buf[k] != pattern(k)) {
			snprintf(line, sizeof line, "bad %zu %u %u\n", k, buf[k], pattern(k));
			rc = 1;
			break;
		}
	}
	if (!rc)
		snprintf(line, sizeof line, "ok %zu\n", len);
	write_all(fd, line);
	printf("%s %zu bytes: %s", is_read ? "read-target" : "write-target", len, line);
	close(fd);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return rc;
}
