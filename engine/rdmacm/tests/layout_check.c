/* Compares the drop-in librdmacm's structure layouts with rdma-core's
 * rdma_cma.h (and the verbs.h structures it reads). tests/layout.rs
 * generates layout_values.h: one CHECK(expr, value) per offset and size
 * src/abi.rs's LAYOUT lists. */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static int failures;

#define CHECK(expr, value)                                                     \
	do {                                                                   \
		if ((size_t)(expr) != (size_t)(value)) {                       \
			printf("MISMATCH %s: header %zu, drop-in %zu\n", #expr, \
			       (size_t)(expr), (size_t)(value));               \
			failures++;                                            \
		} else {                                                       \
			printf("ok %s = %zu\n", #expr, (size_t)(expr));        \
		}                                                              \
	} while (0)

int main(void)
{
#include "layout_values.h"
	/* The ops the inline verbs call through. */
	CHECK(offsetof(struct ibv_context_ops, poll_cq), 8 * 11);
	CHECK(offsetof(struct ibv_context_ops, post_send), 8 * 25);
	CHECK(offsetof(struct ibv_context_ops, post_recv), 8 * 26);
	CHECK(offsetof(struct ibv_send_wr, wr.ud.remote_qpn), offsetof(struct ibv_send_wr, wr) + 8);
	CHECK(offsetof(struct ibv_send_wr, wr.ud.remote_qkey), offsetof(struct ibv_send_wr, wr) + 12);
	printf("%d mismatches\n", failures);
	return failures != 0;
}
