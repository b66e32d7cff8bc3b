/*
 * The tap's internals (lib/bio/): the process-wide capture (tap_hub.c: one
 * data ring, one control socket, the flow table that demultiplexes by
 * 4-tuple, the ISNs taken from the kernel's BPF record (tap_sockops.c) or
 * from what the local kernel sends), the classic BPF
 * filters and the packet parser (tap_capture.c), and the per-connection tap
 * BIO (tap.c) that reads what the hub handed to its connection.
 */
#ifndef UTLS_LIB_TAP_LOCAL_H
#define UTLS_LIB_TAP_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

/*
 * The data ring, one per process whatever the number of connections: a
 * TPACKET_V2 ring of 8,192 frames of 2 KiB (64 blocks of 256 KiB, 16 MiB of
 * kernel memory). The kernel hands each frame over as it fills it: there is
 * no block and no retire timer (a TPACKET_V3 ring's timer fires every
 * millisecond for as long as the ring exists, and cost an unrelated bulk flow
 * on the host about 20% more CPU: bench/scale/ring_timer.py). A frame holds a
 * segment of up to about 1,990 bytes; a larger one (loopback, GRO, jumbo
 * frames) is cut off in its frame and its whole copy queued on the data
 * socket (PACKET_COPY_THRESH, at most UTLS_TAP_COPY_RCVBUF of them), read
 * back in frame order. The ring covers 8,192 segments that no reader has
 * drained yet (at 2,000 segments/s, about 4 s). When it is full the kernel
 * drops captured copies only (counted in ring_drops): those records come in
 * order.
 */
#define UTLS_TAP_BLOCK_SIZE (1u << 18)

#define UTLS_TAP_BLOCK_NR 64u

#define UTLS_TAP_FRAME_SIZE (1u << 11)

#define UTLS_TAP_FRAME_NR (UTLS_TAP_BLOCK_SIZE / UTLS_TAP_FRAME_SIZE * UTLS_TAP_BLOCK_NR)

/* The data socket's receive buffer for whole copies of segments larger than
 * a frame (the kernel accounts twice this). Past it the kernel keeps only
 * the cut-off frame, which the hub counts as a ring drop. */
#define UTLS_TAP_COPY_RCVBUF (2 << 20)

/* The largest whole copy the hub reads back (a 64 KiB GRO packet and its
 * headers); a larger one is counted as malformed. */
#define UTLS_TAP_COPY_MAX (1u << 17)

/*
 * A captured segment that starts at or before the kernel's in-order point
 * (or right after another such segment) is on its way into the socket: the
 * ring sees a packet before the kernel's TCP has queued it, in the same
 * softirq, and a reader on another CPU can drain it first. Such a segment
 * is past no hole. The tap holds it aside for at most this long: the
 * kernel queues it (it is then dropped, as a segment behind the read point
 * is), or it does not (the kernel rejected it: a forged copy, a full
 * receive buffer) and it enters the capture store as a segment past a hole.
 */
#define UTLS_TAP_INFLIGHT_GRACE_NS 2000000u

/* Bytes a connection holds aside in flight at most; past it the oldest go
 * to the store at once. */
#define UTLS_TAP_INFLIGHT_MAX_BYTES ((size_t)1 << 20)

/* What the control socket keeps of a packet: IPv4 (60) or IPv6 (40) header
 * plus a TCP header with options (60). Handshake and teardown segments only;
 * their payload is never needed. */
#define UTLS_TAP_CTL_SNAPLEN 128

/* The control socket's receive buffer. Attack bound: a SYN flood makes the
 * kernel send one SYN-ACK per SYN, each copied here (about 768 bytes of
 * truesize); past this the kernel drops copies (those connections get no ISN
 * and run in order). */
#define UTLS_TAP_CTL_RCVBUF (1 << 20)

/*
 * Flows (4-tuples) the process-wide table holds: attached connections plus
 * handshakes whose ISN is known but which no tap BIO has taken yet. Attack
 * bound: a SYN flood against a tapped listener (each SYN-ACK our kernel
 * sends makes an unattached flow); past UTLS_TAP_MAX_UNATTACHED the oldest
 * unattached flow is forgotten (that connection then runs in order). About
 * 200 bytes a flow: at most 13 MiB for the table.
 */
#define UTLS_TAP_MAX_FLOWS 65536u

#define UTLS_TAP_MAX_UNATTACHED 32768u

/* Distinct local ports in the kernel filters (listeners, and the local ports
 * of connections set up with UTLS_tap_connect or tapped in preload mode).
 * The filters test a port with a binary search: a packet costs about
 * 2 log2(ports) instructions, whatever the number of connections. A
 * listener's connections share its port. */
#define UTLS_TAP_MAX_PORTS 512u

/* Memory held by captured segments waiting for one connection's reader
 * (UTLS_TAP_PKT_COST each). Attack bound:
 * segments sprayed at one 4-tuple between two reads; past it new copies
 * are dropped (counted; those records come in order). */
#define UTLS_TAP_INBOX_MAX_BYTES ((size_t)4 << 20)

/* The same, summed over every connection of the process: bounds what
 * injected segments spread over many connections can hold. */
#define UTLS_TAP_INBOX_TOTAL_MAX_BYTES ((size_t)64 << 20)

/* How long a tap waits for the ACK its kernel sends to complete a handshake
 * (UTLS_tap_connect), from which the peer's ISN is read. */
#define UTLS_TAP_ISN_WAIT_MS 200

/* Slots of the sock_ops program's record of established connections
 * (tap_sockops.c): 72 bytes each, 1.1 MiB of kernel memory mapped into the
 * process. A connection's record is lost when this many sockets on the
 * host were given a cookie between its establishment and its tap; it then
 * runs in order. */
#define UTLS_TAP_SOCKOPS_SLOTS 16384u

#define UTLS_TAP_SOCKOPS_SLOT_BYTES 72u

/* --- Addresses ------------------------------------------------------------ */

typedef struct {
    int family;
    unsigned char local[16], peer[16];
    uint16_t lport, pport; /* host order */
} tap_key;

/* --- Packet parsing ------------------------------------------------------ */

typedef struct {
    tap_key key;        /* local = destination (incoming) or source (outgoing) */
    uint32_t seq, ack;
    uint8_t flags;
    const unsigned char *payload; /* NULL when the capture cut it off */
    size_t payload_len;
    const unsigned char *ip;      /* the network header */
    size_t ip_len;                /* bytes captured from it */
} tap_segment;

#define TCP_FLAG_FIN 0x01

#define TCP_FLAG_SYN 0x02

#define TCP_FLAG_RST 0x04

#define TCP_FLAG_ACK 0x10

/* utls_tap_parse_segment parses the IPv4/IPv6 + TCP packet |p| (|len| bytes)
 * into |*out|, |outgoing| if the local host sent it (the key's local side is
 * then the source). With |headers_only| a payload cut off by the capture is
 * accepted (payload NULL). Returns 1 if it is a TCP segment, 0 otherwise. */
int utls_tap_parse_segment(const unsigned char *p, size_t len, int outgoing, int headers_only,
                           tap_segment *out);

/* utls_tap_tcp_checksum_ok returns 1 if the TCP checksum of the whole
 * captured segment |s| is right, 0 if it is wrong or not all captured. */
int utls_tap_tcp_checksum_ok(const tap_segment *s);

/* The port sets the filters are built from, each sorted and distinct. */
typedef struct {
    const uint16_t *data;   /* incoming segments to these local ports: the ring */
    size_t num_data;
    const uint16_t *ctl;    /* outgoing SYN, FIN, RST from these ports */
    size_t num_ctl;
    const uint16_t *hs;     /* every outgoing segment from these ports (handshakes
                             * of UTLS_tap_connect, for the ACK) */
    size_t num_hs;
    int watch;              /* any port: outgoing SYN/FIN/RST, incoming SYN-ACK */
} tap_ports;

/* utls_tap_set_filters builds the two classic BPF programs for |p| and puts
 * them on |data_fd| and |ctl_fd| (replacing a program needs no privilege).
 * Returns 1, or 0 with an error raised. */
int utls_tap_set_filters(int data_fd, int ctl_fd, const tap_ports *p);

/* utls_tap_open_sockets opens the data socket (with its ring mapped into
 * |*out_ring|) and the control socket, with filters that accept nothing
 * until utls_tap_set_filters. Without |bind_ctl| the control socket is left
 * unbound: it captures nothing and costs no packet anything (the ISNs come
 * from tap_sockops.c). Returns 1, or 0 with an error raised
 * (UTLS_R_TAP_PERMISSION without CAP_NET_RAW). */
int utls_tap_open_sockets(int *out_data_fd, int *out_ctl_fd, void **out_ring, int bind_ctl);

/* --- The hub (tap_hub.c) and the tap BIO (tap.c) -------------------------- */

typedef struct tap_ctx_st tap_ctx;

/* How a captured segment's TCP checksum stands (tap_validate.h). */
enum {
    UTLS_TAP_CSUM_BAD = 0,   /* wrong, or the headers could not be read */
    UTLS_TAP_CSUM_OK,        /* checked by the tap: right */
    UTLS_TAP_CSUM_UNCHECKED, /* CHECKSUM_PARTIAL: the kernel trusts it too */
    UTLS_TAP_CSUM_BY_DEVICE  /* the device verified it */
};

/* What the per-connection validation (utls_tap_validate_hdr) needs of a
 * captured segment's headers. The hub fills it in where the raw packet and
 * the ring's status word are at hand (utls_tap_inspect); the packet itself
 * is not kept. */
typedef struct {
    uint8_t csum;   /* UTLS_TAP_CSUM_* */
    uint8_t flags;  /* TCP flags */
    uint8_t has_ts; /* a timestamp option was present */
    uint32_t ack;
    uint32_t tsval;
} utls_tap_hdr;

/* One captured segment waiting for its connection's reader. */
typedef struct tap_pkt_st {
    struct tap_pkt_st *next;
    uint32_t seq;
    utls_tap_hdr hdr; /* for the connection's validator (tap_validate.h) */
    uint64_t arrival_ns; /* CLOCK_MONOTONIC, from the ring's timestamp */
    uint64_t seen_ns;    /* CLOCK_MONOTONIC, when the hub drained it */
    uint64_t off;        /* its stream offset (the tap BIO's) */
    size_t len;
    /* Every byte was behind the connection's socket read point when the hub
     * took it (the kernel had delivered them in order): |data| is not kept,
     * only |hdr| and |len|, for the validator's timestamp and counts. */
    int behind;
    unsigned char data[];
} tap_pkt;

/* What a captured segment counts against the bounds on memory it may hold
 * (the inboxes, the in-flight hold): its payload, kept or not (a segment
 * behind the read point keeps none), plus the record that carries it and the
 * allocator's own header. A spray of 1-byte segments is then bounded by the
 * memory it really takes, not by its payload bytes alone (which would let
 * each byte hold a hundred). */
#define UTLS_TAP_PKT_COST(payload) (sizeof(tap_pkt) + 16u + (payload))

/* utls_tap_hub_open opens the process-wide tap if it is not open. Returns 1,
 * or 0 with an error raised. */
int utls_tap_hub_open(void);
/* utls_tap_hub_listen adds (|add| 1) or removes (0) a listener's port. */
int utls_tap_hub_listen(uint16_t port, int add);
/* utls_tap_hub_set_watch turns the any-port handshake watch on. */
int utls_tap_hub_set_watch(void);
/* utls_tap_hub_handshake adds or removes |port| from the ports whose every
 * outgoing segment is captured (UTLS_tap_connect's handshake). */
int utls_tap_hub_handshake(uint16_t port, int add);
/* utls_tap_hub_wait_isn drains the control socket until the ISN of |k| is
 * known or |timeout_ms| passed; returns 1 if known. */
int utls_tap_hub_wait_isn(const tap_key *k, int timeout_ms);
/* utls_tap_sockops_start loads and attaches the sock_ops program once
 * (tap_sockops.c); returns 1 if the ISNs come from it, 0 if the control
 * socket must capture them (utls_tap_sockops_why says why). Raises nothing. */
int utls_tap_sockops_start(void);
const char *utls_tap_sockops_why(void);
/* utls_tap_sockops_isn reads the ISNs the kernel recorded for the
 * established socket |fd| (4-tuple |k|); returns 1, or 0 if there is no
 * record of it. */
int utls_tap_sockops_isn(int fd, const tap_key *k, uint32_t *out_local_isn,
                         uint32_t *out_peer_isn, int *out_local_connected);
/* utls_tap_key_of_socket fills |k| from the connected TCP socket |fd|
 * (tap_connect.c). Returns 1, or 0 if it is not one. */
int utls_tap_key_of_socket(int fd, tap_key *k);
/* utls_tap_hub_attach gives the flow |k| (the connected socket |fd|) to
 * |t|, stores the peer's ISN in |*out_isn|, our own in |*out_local_isn|
 * (with |*out_local_connected| 1 if our kernel sent the SYN, 0 if it
 * answered one) and the hub's generation (which a child of fork() changes)
 * in |*out_gen|; returns the attachment, or NULL with an error raised. */
void *utls_tap_hub_attach(const tap_key *k, tap_ctx *t, int fd, uint64_t *out_gen,
                          uint32_t *out_isn, uint32_t *out_local_isn, int *out_local_connected);
/* utls_tap_hub_detach removes the flow |att| from the table (nothing if the
 * hub's generation is no longer |gen|). */
void utls_tap_hub_detach(void *att, uint64_t gen);
/* utls_tap_hub_take drains the ring and returns the segments waiting for
 * the flow |att|, oldest first (the caller frees each with OPENSSL_free), or
 * NULL. */
tap_pkt *utls_tap_hub_take(void *att, uint64_t gen);
/* utls_tap_hub_idle looks, without the hub's lock, whether a take for the
 * flow |att| would find nothing: its inbox is empty and the ring has no
 * frame to hand over (for any flow). A hint for skipping a take: a frame
 * that arrives right after is taken by the next look. */
int utls_tap_hub_idle(void *att, uint64_t gen);
/* utls_tap_hub_note_read tells the hub the sequence number of the next byte
 * the connection |att| will read from its socket: a captured segment wholly
 * before it is kept without its payload and wakes nobody (no lock: one
 * atomic store per read). */
void utls_tap_hub_note_read(void *att, uint32_t next_seq);
/* utls_tap_hub_pending: 1 if segments wait for |att| (no lock: a hint). */
int utls_tap_hub_pending(void *att);
/* utls_tap_hub_fd: the descriptor that is readable when the ring holds
 * blocks to drain, or -1. */
int utls_tap_hub_fd(void);
/* utls_tap_hub_num_attached: connections attached now. */
size_t utls_tap_hub_num_attached(void);
/* utls_tap_hub_ring_drops: the kernel's ring drops since the hub opened. */
uint64_t utls_tap_hub_ring_drops(void);


/*
 * After this many readiness reports in a row for captured fragments that
 * completed no record (spurious wake-ups), fragments alone stop making the
 * connection ready until an early record is delivered or the socket's
 * in-order stream moves. Attack bounded: segments injected past a hole
 * (headers that never verify) wake an event loop at most this many times per
 * genuine in-order read; the records then come in order as with stock TLS.
 */
#define UTLS_EVLOOP_MAX_SPURIOUS_RUN 16

/* utls_tap_poll is poll() through the system call itself (lib/bio/evloop.c):
 * a companion library that interposes poll() for event loops
 * (docs/evloop.md) must not see the tap's own wait on its socket and ring. */
struct pollfd;
int utls_tap_poll(struct pollfd *p, unsigned long n, int timeout_ms);

#endif
