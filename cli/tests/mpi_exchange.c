/*
 * mpi_exchange: two MPI ranks move messages of several sizes between them
 * and check every byte (run by cli/tests/ucx_mpi.rs, one rank per network
 * namespace, each under `roce-xdp exec`, with Open MPI's UCX PML).
 *
 * For each size, from 0 bytes to 4 MiB:
 *   - blocking: rank 0 sends a pattern, rank 1 checks it and sends back
 *     another, rank 0 checks that;
 *   - non-blocking: 8 messages in flight each way at once (MPI_Isend /
 *     MPI_Irecv), each with its own pattern, all checked;
 * then an MPI_Bcast and an MPI_Allreduce over 1 Mi doubles, and one-sided
 * MPI_Put / MPI_Get through a window (UCX's RDMA WRITE and READ).
 * Prints "mpi_exchange: ok, N bytes checked" on rank 0 and exits 0, or
 * names the first wrong byte and aborts the job.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INFLIGHT 8

static int rank;
static unsigned long long checked;

/* The byte at offset i of message `tag` of `size` bytes, sent by `from`. */
static unsigned char pattern(size_t i, size_t size, int tag, int from)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)size * 31 ^
		     (uint64_t)tag << 40 ^ (uint64_t)from << 56;
	x ^= x >> 29;
	return (unsigned char)(x ^ (x >> 8));
}

static void fill(unsigned char *buf, size_t size, int tag, int from)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = pattern(i, size, tag, from);
}

static void check(const unsigned char *buf, size_t size, int tag, int from, const char *what)
{
	for (size_t i = 0; i < size; i++) {
		if (buf[i] != pattern(i, size, tag, from)) {
			fprintf(stderr,
				"mpi_exchange: rank %d: %s of %zu bytes (tag %d): byte %zu is %#x, wanted %#x\n",
				rank, what, size, tag, i, buf[i], pattern(i, size, tag, from));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	checked += size;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 0, 1, 7, 64, 1000, 4096, 8192, 65536, 100000, 1 << 20, 4 << 20 };
	int n;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n != 2) {
		fprintf(stderr, "mpi_exchange: run with 2 ranks, not %d\n", n);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int peer = 1 - rank;
	size_t max = 4 << 20;
	unsigned char *snd = malloc(max * INFLIGHT), *rcv = malloc(max * INFLIGHT);
	if (!snd || !rcv)
		MPI_Abort(MPI_COMM_WORLD, 3);

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k];
		/* Blocking, there and back. */
		if (rank == 0) {
			fill(snd, size, 1, 0);
			MPI_Send(snd, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
			memset(rcv, 0, size);
			MPI_Recv(rcv, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			check(rcv, size, 2, 1, "MPI_Recv");
		} else {
			memset(rcv, 0, size);
			MPI_Status st;
			MPI_Recv(rcv, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &st);
			int count;
			MPI_Get_count(&st, MPI_BYTE, &count);
			if ((size_t)count != size) {
				fprintf(stderr, "mpi_exchange: received %d bytes, wanted %zu\n", count, size);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
			check(rcv, size, 1, 0, "MPI_Recv");
			fill(snd, size, 2, 1);
			MPI_Send(snd, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
		}
		/* Non-blocking, INFLIGHT messages each way at once. */
		MPI_Request req[2 * INFLIGHT];
		for (int m = 0; m < INFLIGHT; m++) {
			memset(rcv + m * size, 0, size);
			MPI_Irecv(rcv + m * size, (int)size, MPI_BYTE, peer, 100 + m, MPI_COMM_WORLD, &req[m]);
		}
		for (int m = 0; m < INFLIGHT; m++) {
			fill(snd + m * size, size, 100 + m, rank);
			MPI_Isend(snd + m * size, (int)size, MPI_BYTE, peer, 100 + m, MPI_COMM_WORLD,
				  &req[INFLIGHT + m]);
		}
		MPI_Waitall(2 * INFLIGHT, req, MPI_STATUSES_IGNORE);
		for (int m = 0; m < INFLIGHT; m++)
			check(rcv + m * size, size, 100 + m, peer, "MPI_Irecv");
	}

	/* Collectives over 1 Mi doubles. */
	size_t nd = 1 << 20;
	double *d = (double *)snd, *sum = (double *)rcv;
	for (size_t i = 0; i < nd; i++)
		d[i] = rank == 0 ? (double)i : 0.0;
	MPI_Bcast(d, (int)nd, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	for (size_t i = 0; i < nd; i++)
		if (d[i] != (double)i) {
			fprintf(stderr, "mpi_exchange: rank %d: MPI_Bcast element %zu is %g\n", rank, i, d[i]);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	for (size_t i = 0; i < nd; i++)
		d[i] = (double)(i * (rank + 1));
	MPI_Allreduce(d, sum, (int)nd, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	for (size_t i = 0; i < nd; i++)
		if (sum[i] != (double)(3 * i)) {
			fprintf(stderr, "mpi_exchange: rank %d: MPI_Allreduce element %zu is %g\n", rank, i,
				sum[i]);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	checked += 2 * nd * sizeof(double);

	/* One-sided: each rank puts a pattern into the other's window, then
	 * gets the other's own pattern back out of it. */
	size_t wsize = 1 << 20;
	unsigned char *wbuf;
	MPI_Win win;
	MPI_Alloc_mem((MPI_Aint)(2 * wsize), MPI_INFO_NULL, &wbuf);
	fill(wbuf + wsize, wsize, 300, rank);
	MPI_Win_create(wbuf, (MPI_Aint)(2 * wsize), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	fill(snd, wsize, 200, rank);
	MPI_Win_fence(0, win);
	MPI_Put(snd, (int)wsize, MPI_BYTE, peer, 0, (int)wsize, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	check(wbuf, wsize, 200, peer, "MPI_Put");
	memset(rcv, 0, wsize);
	MPI_Get(rcv, (int)wsize, MPI_BYTE, peer, (MPI_Aint)wsize, (int)wsize, MPI_BYTE, win);
	MPI_Win_fence(0, win);
	check(rcv, wsize, 300, peer, "MPI_Get");
	MPI_Win_free(&win);
	MPI_Free_mem(wbuf);

	unsigned long long total = 0;
	MPI_Reduce(&checked, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_exchange: ok, %llu bytes checked\n", total);
	free(snd);
	free(rcv);
	MPI_Finalize();
	return 0;
}
