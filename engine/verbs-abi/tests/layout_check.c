/* Compares the drop-ins' verbs structure layouts with rdma-core's verbs.h.
 * tests/layout.rs generates layout_values.h: one CHECK(expr, value) per
 * offset, size and constant the Rust side (src/lib.rs, LAYOUT) uses. */
#include <infiniband/verbs.h>
#include "layout_check.h"

int main(void)
{
#include "layout_values.h"
	/* The ops the inline verbs call through sit where the shell fills them. */
	CHECK(offsetof(struct ibv_context, ops) +
		      offsetof(struct ibv_context_ops, post_send),
	      offsetof(struct ibv_context, ops) + 8 * 25);
	CHECK(offsetof(struct ibv_context_ops, poll_cq), 8 * 11);
	CHECK(offsetof(struct ibv_context_ops, post_recv), 8 * 26);
	CHECK(offsetof(struct ibv_send_wr, wr.ud.remote_qpn), offsetof(struct ibv_send_wr, wr) + 8);
	CHECK(offsetof(struct ibv_send_wr, wr.ud.remote_qkey), offsetof(struct ibv_send_wr, wr) + 12);
	CHECK(offsetof(struct verbs_context, context) + sizeof(struct ibv_context),
	      sizeof(struct verbs_context));
	printf("%d mismatches\n", failures);
	return failures != 0;
}
