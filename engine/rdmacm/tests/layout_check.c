/* Compares the drop-in librdmacm's structure layouts with rdma-core's
 * rdma_cma.h. tests/layout.rs generates layout_values.h: one
 * CHECK(expr, value) per offset and size src/abi.rs's LAYOUT lists. The
 * CHECK macro is the verbs ABI crate's (engine/verbs-abi/tests/
 * layout_check.h), which also checks the verbs.h structures. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include "layout_check.h"

int main(void)
{
#include "layout_values.h"
	printf("%d mismatches\n", failures);
	return failures != 0;
}
