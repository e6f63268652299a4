/* Compares the drop-in's structure layouts with rdma-core's verbs.h.
 * tests/layout.rs generates layout_values.h: one CHECK(expr, value) per
 * offset and size the Rust side (src/abi.rs, LAYOUT) uses. */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/verbs.h>

static int failures;

#define CHECK(expr, value)                                                     \
	do {                                                                   \
		if ((size_t)(expr) != (size_t)(value)) {                       \
			printf("MISMATCH %s: verbs.h %zu, drop-in %zu\n", #expr,       \
			       (size_t)(expr), (size_t)(value));               \
			failures++;                                            \
		} else {                                                       \
			printf("ok %s = %zu\n", #expr, (size_t)(expr));        \
		}                                                              \
	} while (0)

int main(void)
{
#include "layout_values.h"
	/* The ops the inline verbs call through sit where the shell fills them. */
	CHECK(offsetof(struct ibv_context, ops) +
		      offsetof(struct ibv_context_ops, post_send),
	      offsetof(struct ibv_context, ops) + 8 * 25);
	CHECK(offsetof(struct verbs_context, context) + sizeof(struct ibv_context),
	      sizeof(struct verbs_context));
	printf("%d mismatches\n", failures);
	return failures != 0;
}
