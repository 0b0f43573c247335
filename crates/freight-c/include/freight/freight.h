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
 *  - A message crosses as its small fields in CDR, each buffer field written
 *    as its ordinal (a uint32), plus its buffers as memory ranges: what the
 *    C++ types of freight/msgs/<package>.hpp write and read. Endpoints are of
 *    freight's built-in message and service types, named as ROS 2 names
 *    them ("sensor_msgs/msg/Image", "std_srvs/srv/SetBool"), or of types
 *    registered first with their definition (freight_type_register: a
 *    user's own .msg and .srv files; the C++ API registers its types).
 *
 * Link with -lfreight_c (libfreight_c.so or libfreight_c.a, built by
 * `cargo build --release -p freight-c`). Every function declared here is
 * checked against the library's exported symbols by the crate's tests.
 */
#ifndef FREIGHT_FREIGHT_H
#define FREIGHT_FREIGHT_H

#include <stdbool.h>
#include <stddef.h>
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
  FREIGHT_ERROR_INTERNAL = 6,
  /* A message type freight does not know by that name. */
  FREIGHT_ERROR_TYPE = 7,
  /* A publisher or subscription could not be made (another type on the
   * topic, a limit, a backend that is not there, ...). */
  FREIGHT_ERROR_CREATE = 8,
  /* A loan could not be made (no room in /dev/shm, a wrong buffer count, ...). */
  FREIGHT_ERROR_LOAN = 9,
  /* A message could not be published. */
  FREIGHT_ERROR_PUBLISH = 10,
  /* A message could not be taken. */
  FREIGHT_ERROR_TAKE = 11,
  /* The CDR of a message's fields does not decode as its type. */
  FREIGHT_ERROR_DECODE = 12,
  /* A callback reported a failure (a C++ exception); the spin stopped. */
  FREIGHT_ERROR_CALLBACK = 13,
  /* A service call got no reply in time; a pending call stays pending. */
  FREIGHT_ERROR_TIMEOUT = 14,
  /* A service has no server, or every server went away before it answered. */
  FREIGHT_ERROR_NO_SERVER = 15
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

/* ---- QoS ----------------------------------------------------------------- */

typedef struct freight_qos {
  /* Keep the last `depth` messages; 0 keeps all. */
  uint32_t depth;
  /* Reliable (true) or best effort. */
  bool reliable;
  /* Transient local: late subscriptions get what was last published. */
  bool transient_local;
} freight_qos;

/* rclcpp::QoS(depth): keep last `depth`, reliable, volatile. */
freight_qos freight_qos_keep_last(uint32_t depth);

/* rclcpp::SensorDataQoS(): keep last 5, best effort, volatile. */
freight_qos freight_qos_sensor_data(void);

/* ---- Message types ------------------------------------------------------- */

/* Registers the message type `type_name` ("my_msgs/msg/Scan") with its
 * `definition`: the ros2msg text of the type and of every type it uses, as
 * rosbag2 records it and as a C++ type generated by `freight msg cpp` holds it
 * (T::DEFINITION). Endpoints of the type can be made after. Its buffer fields
 * are its unbounded sequences of numbers, as in the generated types.
 * Registering a type again with the same definition does nothing; with another
 * one it fails with FREIGHT_ERROR_TYPE, as does a definition that does not
 * parse. Built-in types need no registration (registering one does nothing).
 * The C++ API registers each type before its first endpoint. */
freight_status freight_type_register(const char *type_name, const char *definition);

/* ---- Publisher and loan -------------------------------------------------- */

typedef struct freight_publisher freight_publisher;
typedef struct freight_loan freight_loan;

/* A buffer given to freight_publisher_publish_copy. */
typedef struct freight_buffer {
  const void *data; /* may be NULL when len is 0 */
  size_t len;       /* bytes */
} freight_buffer;

/* A publisher of `type_name` ("sensor_msgs/msg/Image") on `topic`; `qos` NULL
 * is freight_qos_keep_last(10). */
freight_status freight_publisher_create(const freight_node *node, const char *type_name, const char *topic,
                                        const freight_qos *qos, freight_publisher **out);

/* A publisher whose loans lend memory of `backend`: "shm" (the default),
 * "cuda" (device memory of this process's device), "cuda-host" (page-locked
 * shared memory mapped for it) or "fake-device". FREIGHT_ERROR_CREATE, saying
 * why, when this process cannot use it (no driver, no device). */
freight_status freight_publisher_create_with_backend(const freight_node *node, const char *type_name,
                                                     const char *topic, const freight_qos *qos, const char *backend,
                                                     freight_publisher **out);

/* Publishes the message whose small fields are the CDR `fields` (buffer
 * fields as ordinals) and whose buffers are buffers[0..count], each copied
 * into a Rust buffer and then into the frame (two copies; a loan makes none). */
freight_status freight_publisher_publish_copy(const freight_publisher *publisher, const uint8_t *fields,
                                              size_t fields_len, const freight_buffer *buffers, size_t count);

/* Lends lens[i] bytes for each of the message's `count` buffer fields. */
freight_status freight_publisher_loan(const freight_publisher *publisher, const size_t *lens, size_t count,
                                      freight_loan **out);

/* Buffer `index` of the loan: its first byte (NULL for device memory) and
 * length. The memory is not initialised: write all of it before publishing. */
freight_status freight_loan_buffer(const freight_loan *loan, size_t index, uint8_t **data, size_t *len);

/* Buffer `index` as a device addresses it (a CUdeviceptr: "cuda" device
 * memory, or "cuda-host" memory mapped for the device) and its length, for
 * the kernels and copies that write it; FREIGHT_ERROR_LOAN for memory no
 * device reaches. No CUDA header is needed: the address is an integer. */
freight_status freight_loan_device_buffer(const freight_loan *loan, size_t index, uint64_t *device_ptr, size_t *len);

/* The stream (a CUstream, or a cudaStream_t cast to an integer; 0 the legacy
 * default stream) the writes to the loan's device buffers went to:
 * publishing orders every reader after that stream's work, without blocking
 * the host. Buffers the CPU writes ignore it. */
freight_status freight_loan_set_write_stream(freight_loan *loan, uint64_t stream);

/* The memory the loan lends ("shm", "cpu", "cuda", ...): a static string. */
const char *freight_loan_backend(const freight_loan *loan);

/* Publishes a written loan with its small fields (CDR, buffer fields as
 * ordinals). The loan is consumed whatever the outcome. */
freight_status freight_publisher_publish_loan(const freight_publisher *publisher, freight_loan *loan,
                                              const uint8_t *fields, size_t fields_len);

/* Gives an unpublished loan's memory back. */
void freight_loan_destroy(freight_loan *loan);

/* Subscriptions matched (in this process, on this host, over the network). */
size_t freight_publisher_subscription_count(const freight_publisher *publisher);

/* What it published stays with its subscriptions: this waits until their
 * processes hold it, at most half a second. */
void freight_publisher_destroy(freight_publisher *publisher);

/* ---- Subscription and sample --------------------------------------------- */

typedef struct freight_subscription freight_subscription;
typedef struct freight_sample freight_sample;

/* How a message came. */
typedef struct freight_message_info {
  uint64_t publisher_id;
  uint64_t sequence;
  uint64_t publish_time_ns; /* CLOCK_MONOTONIC, the same on every process of a host */
  const char *transport;    /* "intra", "shm" or "network": a static string */
  const char *backend;      /* "shm", "cpu", "cuda", ...: a static string */
} freight_message_info;

/* A subscription of `type_name` on `topic`; `qos` NULL is freight_qos_keep_last(10). */
freight_status freight_subscription_create(const freight_node *node, const char *type_name, const char *topic,
                                           const freight_qos *qos, freight_subscription **out);

/* How a subscription waits in freight_subscription_take, and an executor
 * spinning it. */
typedef enum freight_wait_mode {
  /* Sleep in the OS until a publisher wakes it: no CPU while idle (the default). */
  FREIGHT_WAIT_BLOCK = 0,
  /* Busy-poll: the lowest latency, one core kept busy while waiting. */
  FREIGHT_WAIT_SPIN = 1,
} freight_wait_mode;

/* How a subscription is made; all zero is the default. */
typedef struct freight_subscription_options {
  /* The memory it takes as it is, accepted_backends[0..accepted_backend_count]
   * ("cuda": device memory of publishers on this process's device,
   * "cuda-host", "fake-device"; "cpu" always; none: "cpu" and "shm"); for any
   * other it receives a host copy. */
  const char *const *accepted_backends;
  size_t accepted_backend_count;
  freight_wait_mode wait;
} freight_subscription_options;

/* A subscription as freight_subscription_create's, made with `options` (NULL:
 * the defaults). FREIGHT_ERROR_CREATE, saying why, when this process cannot
 * use one of the accepted backends. */
freight_status freight_subscription_create_with_options(const freight_node *node, const char *type_name,
                                                        const char *topic, const freight_qos *qos,
                                                        const freight_subscription_options *options,
                                                        freight_subscription **out);

/* The next message, waiting up to timeout_ns (0: only look); *out is NULL
 * when none came in time (still FREIGHT_OK). */
freight_status freight_subscription_take(const freight_subscription *subscription, uint64_t timeout_ns,
                                         freight_sample **out);

size_t freight_subscription_publisher_count(const freight_subscription *subscription);

/* Its samples stay valid. */
void freight_subscription_destroy(freight_subscription *subscription);

/* The sample's small fields: CDR, buffer fields as ordinals. Valid while the
 * sample lives. */
freight_status freight_sample_fields(const freight_sample *sample, const uint8_t **data, size_t *len);

size_t freight_sample_buffer_count(const freight_sample *sample);

/* Buffer `index`: its first byte (NULL for device memory) and length;
 * read-only, valid while the sample lives. */
freight_status freight_sample_buffer(const freight_sample *sample, size_t index, const uint8_t **data, size_t *len);

/* Buffer `index` as a device addresses it (a CUdeviceptr) and its length,
 * for kernels that read it after freight_sample_order_on_stream;
 * FREIGHT_ERROR_TAKE for memory no device reaches. */
freight_status freight_sample_device_buffer(const freight_sample *sample, size_t index, uint64_t *device_ptr,
                                            size_t *len);

/* Orders the work later submitted to `stream` (as in
 * freight_loan_set_write_stream) after the publisher's writes to every
 * device buffer of the sample, without blocking the host: call it before
 * launching kernels that read them. Host memory needs none. */
freight_status freight_sample_order_on_stream(const freight_sample *sample, uint64_t stream);

freight_status freight_sample_info(const freight_sample *sample, freight_message_info *info);

/* One buffer of a received message. */
typedef struct freight_sample_buffer_view {
  const uint8_t *data; /* NULL for device memory */
  size_t len;
  uint64_t device; /* a CUdeviceptr where a device addresses it, else 0 */
} freight_sample_buffer_view;

/* Everything of a sample, read-only and valid while it lives: what
 * freight_sample_fields, _buffer_count, _buffer, _device_buffer and _info
 * give one call each. */
typedef struct freight_sample_contents {
  const uint8_t *fields; /* small fields as CDR, buffer fields as ordinals */
  size_t fields_len;
  const freight_sample_buffer_view *buffers; /* buffer_count, in ordinal order */
  size_t buffer_count;
  freight_message_info info;
} freight_sample_contents;

freight_status freight_sample_view(const freight_sample *sample, freight_sample_contents *out);

/* The memory goes back to the publisher once no other reader holds it. */
void freight_sample_destroy(freight_sample *sample);

/* ---- Callbacks and executor (rclcpp's SingleThreadedExecutor) ------------ */

typedef struct freight_callback_subscription freight_callback_subscription;
typedef struct freight_executor freight_executor;

/* A subscription's callback: it owns `sample` (destroy it when done) and
 * returns whether all went well; false stops the spin, which returns
 * FREIGHT_ERROR_CALLBACK. */
typedef bool (*freight_sample_callback)(freight_sample *sample, void *user_data);

/* A subscription of `type_name` on `topic` whose messages go to
 * callback(sample, user_data) when an executor that `node` was added to
 * spins; `user_data` must stay usable from the spinning thread until the
 * handle is destroyed. Destroying the handle ends it. */
freight_status freight_node_create_subscription_callback(const freight_node *node, const char *type_name,
                                                         const char *topic, const freight_qos *qos,
                                                         freight_sample_callback callback, void *user_data,
                                                         freight_callback_subscription **out);

/* As freight_node_create_subscription_callback, for a subscription made
 * with `options` (as freight_subscription_create_with_options's). */
freight_status freight_node_create_subscription_callback_with_options(const freight_node *node, const char *type_name,
                                                                      const char *topic, const freight_qos *qos,
                                                                      const freight_subscription_options *options,
                                                                      freight_sample_callback callback,
                                                                      void *user_data,
                                                                      freight_callback_subscription **out);

void freight_callback_subscription_destroy(freight_callback_subscription *subscription);

freight_status freight_executor_create(freight_executor **out);

/* Its callback subscriptions, those made later too, run when the executor
 * spins. Not while it spins; the executor does not keep the node alive. */
freight_status freight_executor_add_node(freight_executor *executor, const freight_node *node);

/* Waits up to timeout_ns for messages and runs their callbacks; *ran (if not
 * NULL) receives how many ran. */
freight_status freight_executor_spin_once(const freight_executor *executor, uint64_t timeout_ns, size_t *ran);

/* Runs callbacks until freight_executor_stop (from a callback or another
 * thread; it returns within 100 ms) or a callback fails. */
freight_status freight_executor_spin(const freight_executor *executor);

/* Makes a running freight_executor_spin return; safe from any thread. */
void freight_executor_stop(const freight_executor *executor);

/* Not while it spins. Its nodes and subscriptions stay. */
void freight_executor_destroy(freight_executor *executor);

/* ---- Services (rclcpp's create_service and create_client) --------------- */

/* A service `name` is requests and replies, carried as ROS 2 carries them;
 * a request or reply crosses as a message does (small fields in CDR with
 * buffer ordinals, buffers as memory ranges). Service types are named as ROS 2
 * names them ("std_srvs/srv/SetBool"): a built-in one, or one whose request
 * and response ("…/SetBool_Request", "…/SetBool_Response") are registered. */

typedef struct freight_service_server freight_service_server;
typedef struct freight_callback_service freight_callback_service;
typedef struct freight_client freight_client;
typedef struct freight_pending_call freight_pending_call;

/* Which call a request is: the client and its call's sequence number
 * (rmw_request_id_t). A response sent with it reaches that call. */
typedef struct freight_request_id {
  uint64_t client;
  int64_t sequence;
} freight_request_id;

/* A server of `srv_type` for the service `name`, with ROS 2's service QoS:
 * take each request, answer it when and from where you like. */
freight_status freight_service_server_create(const freight_node *node, const char *srv_type, const char *name,
                                             freight_service_server **out);

/* How a service server or client is made; all zero is the default. */
typedef struct freight_service_options {
  /* The memory the loans of what this end sends lend: "shm" (the default,
   * also for NULL), "cuda", "cuda-host", "fake-device". */
  const char *backend;
  /* The memory this end takes as it is in what it receives,
   * accepted_backends[0..accepted_backend_count] (none: "cpu" and "shm"); for
   * any other it receives a host copy. */
  const char *const *accepted_backends;
  size_t accepted_backend_count;
} freight_service_options;

/* A server as freight_service_server_create's, made with `options` (NULL:
 * the defaults). FREIGHT_ERROR_CREATE, saying why, when this process cannot
 * use one of the backends. */
freight_status freight_service_server_create_with_options(const freight_node *node, const char *srv_type,
                                                          const char *name, const freight_service_options *options,
                                                          freight_service_server **out);

/* The next request, waiting up to timeout_ns (0: only look); *request is NULL
 * when none came in time (still FREIGHT_OK), else it is the caller's, with
 * *id the call to answer. */
freight_status freight_service_server_take_request(const freight_service_server *server, uint64_t timeout_ns,
                                                   freight_sample **request, freight_request_id *id);

/* Sends the response whose small fields are `fields` (CDR, buffer fields as
 * ordinals) and whose buffers are buffers[0..count] (copied) to the call
 * `id`. A client that gave up on the call drops it. */
freight_status freight_service_server_send_response(const freight_service_server *server, freight_request_id id,
                                                    const uint8_t *fields, size_t fields_len,
                                                    const freight_buffer *buffers, size_t count);

/* Lends lens[i] bytes for each buffer field of a response, in field order:
 * write the loan (freight_loan_buffer, freight_loan_device_buffer), then send
 * it with freight_service_server_send_loaned_response (nothing is copied on
 * the way to the client) or give it back with freight_loan_destroy. */
freight_status freight_service_server_loan_response(const freight_service_server *server, const size_t *lens,
                                                    size_t count, freight_loan **out);

/* Sends `loan`, every byte written, with the response's small fields to the
 * call `id`. The loan is consumed whatever the outcome. */
freight_status freight_service_server_send_loaned_response(const freight_service_server *server,
                                                           freight_request_id id, freight_loan *loan,
                                                           const uint8_t *fields, size_t fields_len);

/* Requests taken from it stay valid, but can no longer be answered. */
void freight_service_server_destroy(freight_service_server *server);

/* A service's callback: it owns `request` (destroy it when done), answers
 * with freight_service_server_send_response(server, id, ...) (at once, or
 * later while the service lives) and returns whether all went well; false
 * stops the spin, which returns FREIGHT_ERROR_CALLBACK. */
typedef bool (*freight_request_callback)(freight_sample *request, freight_request_id id,
                                         const freight_service_server *server, void *user_data);

/* A service `name` of `srv_type` whose requests go to
 * callback(request, id, server, user_data) when an executor that `node` was
 * added to spins; `user_data` must stay usable from the spinning thread until
 * the handle is destroyed. Destroying the handle ends it. */
freight_status freight_node_create_service_callback(const freight_node *node, const char *srv_type, const char *name,
                                                    freight_request_callback callback, void *user_data,
                                                    freight_callback_service **out);

/* A callback service made with `options` (NULL: the defaults). */
freight_status freight_node_create_service_callback_with_options(const freight_node *node, const char *srv_type,
                                                                 const char *name,
                                                                 const freight_service_options *options,
                                                                 freight_request_callback callback, void *user_data,
                                                                 freight_callback_service **out);

void freight_callback_service_destroy(freight_callback_service *service);

/* A client of `srv_type` for the service `name`. */
freight_status freight_client_create(const freight_node *node, const char *srv_type, const char *name,
                                     freight_client **out);

/* A client made with `options` (NULL: the defaults). */
freight_status freight_client_create_with_options(const freight_node *node, const char *srv_type, const char *name,
                                                  const freight_service_options *options, freight_client **out);

/* Waits up to timeout_ns for a server; whether one is there (false for NULL). */
bool freight_client_wait_for_service(const freight_client *client, uint64_t timeout_ns);

/* Servers of the service matched now (0 for NULL). */
size_t freight_client_server_count(const freight_client *client);

/* Sends a request (small fields and buffers as in send_response, copied);
 * *out is the pending call. FREIGHT_ERROR_NO_SERVER when there is no server. */
freight_status freight_client_call_async(const freight_client *client, const uint8_t *fields, size_t fields_len,
                                         const freight_buffer *buffers, size_t count, freight_pending_call **out);

/* Lends lens[i] bytes for each buffer field of a request, in field order:
 * write it, then send it with freight_client_call_loaned (nothing is copied on
 * the way to the servers) or give it back with freight_loan_destroy. */
freight_status freight_client_loan_request(const freight_client *client, const size_t *lens, size_t count,
                                           freight_loan **out);

/* Sends `loan`, every byte written, with the request's small fields, as
 * freight_client_call_async does. The loan is consumed whatever the outcome. */
freight_status freight_client_call_loaned(const freight_client *client, freight_loan *loan, const uint8_t *fields,
                                          size_t fields_len, freight_pending_call **out);

/* Waits up to timeout_ns for the reply; *reply is the caller's.
 * FREIGHT_ERROR_TIMEOUT leaves the call pending (wait again, or destroy it);
 * FREIGHT_ERROR_NO_SERVER: every server went away before it answered. A call
 * hands out its reply once. One thread at a time. */
freight_status freight_pending_call_wait(freight_pending_call *call, uint64_t timeout_ns, freight_sample **reply);

/* Forgets the call: a reply that comes later is dropped. */
void freight_pending_call_destroy(freight_pending_call *call);

/* freight_client_call_async, then freight_pending_call_wait: *reply is the
 * reply. On FREIGHT_ERROR_TIMEOUT the call is forgotten. */
freight_status freight_client_call(const freight_client *client, const uint8_t *fields, size_t fields_len,
                                   const freight_buffer *buffers, size_t count, uint64_t timeout_ns,
                                   freight_sample **reply);

/* A call it sent stays pending, and can still be waited for. */
void freight_client_destroy(freight_client *client);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FREIGHT_FREIGHT_H */
