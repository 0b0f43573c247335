/*
 * freight's C ABI.
 *
 * Conventions, the same for every function:
 *  - Objects are opaque handles that the caller owns from the *_create that
 *    returned them to the *_destroy that frees them (destroying NULL does
 *    nothing). A handle keeps what it needs alive: a node stays valid after
 *    its context's handle is destroyed.
 *  - A function that can fail returns a freight_status and writes its result
 *    to an out pointer only on success. On failure, freight_last_error() gives
 *    the calling thread's message.
 *  - No panic or exception crosses the boundary: a bug in freight is
 *    FREIGHT_ERROR_INTERNAL.
 *  - Strings are NUL-terminated UTF-8. A NULL handle or string where one is
 *    required is FREIGHT_ERROR_INVALID_ARGUMENT, never a crash.
 *
 * Link with -lfreight_c (libfreight_c.so or libfreight_c.a, built by
 * `cargo build --release -p freight-c`). Every function declared here is
 * checked against the library's exported symbols by the crate's tests.
 */
#ifndef FREIGHT_FREIGHT_H
#define FREIGHT_FREIGHT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a call came to. New codes are added at the end; a value never
 * changes meaning. */
typedef enum freight_status {
  FREIGHT_OK = 0,
  /* A NULL handle, string or out pointer, or a string that is not UTF-8. */
  FREIGHT_ERROR_INVALID_ARGUMENT = 1,
  /* A node name or namespace breaks ROS 2's naming rules. */
  FREIGHT_ERROR_NAME = 2,
  /* An environment variable freight reads (ROS_DOMAIN_ID, ...) has a value
   * it cannot use. */
  FREIGHT_ERROR_ENVIRONMENT = 3,
  /* The shared-memory plane refused (a full or unwritable /dev/shm, too many
   * open files, ...). */
  FREIGHT_ERROR_SHARED_MEMORY = 4,
  /* A configuration (a large-data stream, a DDS setting) cannot be applied. */
  FREIGHT_ERROR_CONFIGURATION = 5,
  /* A bug in freight (a panic, caught at the boundary): please report it. */
  FREIGHT_ERROR_INTERNAL = 6
} freight_status;

/* The calling thread's last error message: valid until that thread's next
 * failed call, empty before the first. Never NULL. */
const char *freight_last_error(void);

/* The name of a status constant ("FREIGHT_ERROR_NAME"), "?" for an unknown
 * value. A static string. */
const char *freight_status_name(int32_t status);

/* freight's version ("0.1.0"), a static string. */
const char *freight_version(void);

/* ---- Context: one process's freight on one ROS domain ------------------- */

typedef struct freight_context freight_context;

/* freight_context_options.domain_id that reads ROS_DOMAIN_ID (default 0). */
#define FREIGHT_DOMAIN_FROM_ENV UINT32_MAX

typedef struct freight_context_options {
  /* The ROS domain (0..232), or FREIGHT_DOMAIN_FROM_ENV. */
  uint32_t domain_id;
  /* Shared memory only, no network plane (DDS): nothing leaves the host and
   * stock ROS 2 nodes do not see this context's topics. */
  bool local_only;
} freight_context_options;

/* A context on the domain of ROS_DOMAIN_ID with the network plane on, as
 * rclcpp's default context. */
freight_status freight_context_create(freight_context **out);

/* A context with explicit options. */
freight_status freight_context_create_with(const freight_context_options *options, freight_context **out);

/* The context's ROS domain; UINT32_MAX for NULL. */
uint32_t freight_context_domain_id(const freight_context *ctx);

void freight_context_destroy(freight_context *ctx);

/* ---- Node: a named participant of the ROS graph ------------------------- */

typedef struct freight_node freight_node;

/* The node `name` in `namespace_` (NULL or "" for the root, "/"). */
freight_status freight_node_create(const freight_context *ctx, const char *name, const char *namespace_,
                                   freight_node **out);

/* The node's name and namespace ("/" for the root); NULL for a NULL node.
 * Valid while the node lives. */
const char *freight_node_name(const freight_node *node);
const char *freight_node_namespace(const freight_node *node);

/* The node leaves the ROS graph. */
void freight_node_destroy(freight_node *node);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FREIGHT_FREIGHT_H */
