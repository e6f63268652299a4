/* The layout checks' CHECK macro, shared by this crate's layout_check.c
 * and the drop-in librdmacm's (engine/rdmacm/tests/layout_check.c). */
#include <stddef.h>
#include <stdio.h>

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
