/* The C ABI from C: contexts, nodes, errors. Prints what the Rust test
 * (tests/programs.rs) checks; exits non-zero at the first surprise. */
#include <freight/freight.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define EXPECT(cond)                                                          \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: %s failed (last error: %s)\n", __FILE__, __LINE__, \
              #cond, freight_last_error());                                   \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main(void) {
  printf("layout %zu %zu %zu\n", sizeof(freight_context_options), offsetof(freight_context_options, domain_id),
         offsetof(freight_context_options, local_only));

  /* ROS_DOMAIN_ID comes from the test's environment. */
  freight_context_options options = {FREIGHT_DOMAIN_FROM_ENV, true};
  freight_context *ctx = NULL;
  EXPECT(freight_context_create_with(&options, &ctx) == FREIGHT_OK);
  printf("domain %u\n", freight_context_domain_id(ctx));

  freight_node *node = NULL;
  EXPECT(freight_node_create(ctx, "front_lidar", "/sensors", &node) == FREIGHT_OK);
  /* The node keeps what it needs of the context. */
  freight_context_destroy(ctx);
  printf("node %s %s\n", freight_node_namespace(node), freight_node_name(node));
  freight_node_destroy(node);

  EXPECT(freight_context_create_with(&options, &ctx) == FREIGHT_OK);
  freight_node *bad = NULL;
  freight_status s = freight_node_create(ctx, "9lives", NULL, &bad);
  EXPECT(s == FREIGHT_ERROR_NAME && bad == NULL);
  printf("bad name %s: %s\n", freight_status_name(s), freight_last_error());
  s = freight_node_create(NULL, "x", NULL, &bad);
  printf("null context %s: %s\n", freight_status_name(s), freight_last_error());
  EXPECT(freight_node_create(ctx, "x", NULL, NULL) == FREIGHT_ERROR_INVALID_ARGUMENT);
  freight_context_destroy(ctx);
  freight_context_destroy(NULL);
  freight_node_destroy(NULL);
  printf("version %s\n", freight_version());
  return 0;
}
