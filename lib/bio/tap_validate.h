/*
 * Captured-segment validation for the tap (lib/bio/tap_validate.c).
 *
 * The tap sees a segment before the kernel's TCP has checked it, so a
 * captured segment is only a claim. The kernel drops a segment whose TCP
 * checksum is wrong, that lies outside its receive window, whose ACK
 * acknowledges data never sent (or is far too old), or whose timestamp is
 * older than the last one it accepted (PAWS, RFC 7323 5). The tap applies
 * the same checks as far as a host can without the kernel's private state,
 * so that what the kernel would drop does not take the place of the genuine
 * copy in the out-of-order store. What passes is still untrusted: nothing
 * captured is delivered before the record layer authenticates it.
 *
 * Public OpenSSL headers only; no OpenSSL at all, in fact.
 */
#ifndef UTLS_LIB_TAP_VALIDATE_H
#define UTLS_LIB_TAP_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "bio/tap_local.h"

/*
 * UTLS_TAP_ACK_SLACK: how far past the highest ACK the tap accepted (plus
 * the bytes the local kernel still has to send, SIOCOUTQ) a captured
 * segment's ACK may lie when the tap does not know the local send sequence
 * exactly (utls_tap_validator_set_send_base not called: the connection's
 * own handshake was not seen). The kernel drops a segment that acknowledges
 * data it never sent (RFC 9293 3.10.7.4); without the send sequence the tap
 * learns it from the peer's ACKs, so it allows this much for ACK progress it
 * did not see (pure ACKs lost from the ring). Attack bounded: forged
 * segments with an ACK far ahead (the kernel drops them) that would
 * otherwise enter the out-of-order store ahead of the genuine copy. With the
 * send sequence known there is no slack: see utls_tap_validator.snd_base.
 */
#define UTLS_TAP_ACK_SLACK ((uint32_t)1 << 20)

/*
 * UTLS_TAP_ACK_MAX_BEHIND: how far behind the highest accepted ACK a
 * segment's ACK may lie. The kernel drops an ACK older than
 * SND.UNA - MAX.SND.WND (RFC 5961 5.2); the largest window a peer can offer
 * is 2^30 (RFC 7323 2.3), so this is the bound that never drops what the
 * kernel takes. Attack bounded: forged segments with an ACK from far in the
 * past.
 */
#define UTLS_TAP_ACK_MAX_BEHIND ((uint32_t)1 << 30)

/* UTLS_TAP_PAWS_WINDOW: a timestamp this much older than the newest accepted
 * one still passes, as in the kernel's PAWS check (TCP_PAWS_WINDOW). */
#define UTLS_TAP_PAWS_WINDOW 1

/* A captured segment's verdict. */
typedef enum {
    UTLS_TAP_SEG_OK = 0,
    UTLS_TAP_SEG_BAD_CHECKSUM, /* TCP checksum wrong (pseudo-header included) */
    UTLS_TAP_SEG_BAD_FLAGS,    /* SYN or RST with data, or data without ACK */
    UTLS_TAP_SEG_OUT_OF_WINDOW, /* starts past the receive window */
    UTLS_TAP_SEG_BAD_ACK,      /* acknowledges unsent data, or far too old */
    UTLS_TAP_SEG_PAWS          /* timestamp older than the newest accepted */
} utls_tap_verdict;

/* What one tap knows of its connection's TCP state, learned from the local
 * kernel (the in-order point, SIOCINQ; unsent and unacknowledged bytes,
 * SIOCOUTQ) and from segments that passed. Zero-initialised: nothing known. */
typedef struct {
    /* The newest timestamp (TSval) on a segment the kernel also took in
     * order (one that ended at or below its in-order point): what the
     * kernel's PAWS compares with. */
    uint32_t ts_recent;
    int ts_known;
    /* The highest ACK accepted, and the bytes the local kernel has sent or
     * will send past what the peer acknowledged (SIOCOUTQ) when last read. */
    uint32_t ack_max;
    int ack_known;
    uint32_t outq;
    /*
     * The local send sequence, exactly, when the tap saw the connection's
     * handshake (its local ISN): SND.UNA is |snd_base| plus the bytes the
     * peer acknowledged (TCP_INFO's tcpi_bytes_acked) and SND.NXT is that
     * plus the bytes sent and not acknowledged (SIOCOUTQ - SIOCOUTQNSD).
     * The kernel drops an ACK past SND.NXT; so does the tap then, with no
     * slack: a forged copy that acknowledges one byte the kernel has not
     * sent is rejected (net.inject_copies). |snd_nxt| is the bound when last
     * read; it is read again (once per drain) when an ACK goes past it.
     */
    uint32_t snd_base, snd_nxt;
    int snd_exact, snd_known;
    /* The receive window bound: the socket's receive buffer (SO_RCVBUF);
     * TCP never advertises more than the buffer can hold. Autotuning only
     * grows it, so it is read again (at most once per drain) when a segment
     * lies past it. */
    uint64_t rcv_window;
    /* Set by utls_tap_validator_drain: the kernel may be asked again. */
    int outq_stale, rcvbuf_stale, snd_stale;
    /* Verdicts so far, indexed by utls_tap_verdict. */
    uint64_t counts[UTLS_TAP_SEG_PAWS + 1];
    /* Segments whose checksum the tap could not check (CHECKSUM_PARTIAL:
     * from this host or a virtual device, which the kernel trusts too) and
     * those the device had verified. */
    uint64_t csum_unchecked, csum_by_device;
} utls_tap_validator;

/* utls_tap_tcp_checksum_ok_pkt checks the TCP checksum of the IPv4 or IPv6
 * packet |pkt| (|len| bytes, network header first) that
 * utls_tap_parse_segment accepted: the ones'-complement sum over the
 * pseudo-header (RFC 9293 3.1, RFC 8200 8.1), the TCP header and the payload
 * must be 0xffff. Returns 1 if it is right. */
int utls_tap_tcp_checksum_ok_pkt(const unsigned char *pkt, size_t len);

/* utls_tap_kernel_query: how the validator asks the local kernel about the
 * socket *(int *)|sock_ptr| (SIOCOUTQ, SO_RCVBUF); each returns -1 if the
 * kernel does not say. */
typedef struct {
    long (*outq)(void *sock_ptr);
    long (*rcvbuf)(void *sock_ptr);
    /* SND.NXT minus the send base (see utls_tap_validator.snd_base) in
     * |*out|; returns 0 if the kernel does not say. */
    int (*snd_nxt_off)(void *sock_ptr, uint64_t *out);
    void *sock_ptr;
} utls_tap_kernel_query;

/*
 * utls_tap_validator_set_send_base gives |v| the local send sequence's base:
 * |local_isn| + 1 when the local kernel answered the peer's SYN (Linux does
 * not count the SYN in tcpi_bytes_acked there), |local_isn| when it sent the
 * SYN (the SYN-ACK's acknowledgement of the SYN is counted). From then on
 * the ACK check is exact (utls_tap_validator.snd_base).
 */
void utls_tap_validator_set_send_base(utls_tap_validator *v, uint32_t local_isn,
                                      int local_connected);

/* utls_tap_validator_drain starts a drain of the ring: the kernel may be
 * asked again, once each, when a segment needs it. Bounds the syscalls a
 * flood of forged segments can cause to two per drain. */
void utls_tap_validator_drain(utls_tap_validator *v);

/*
 * utls_tap_validate decides whether the captured segment |seg| (parsed from
 * |pkt|, |len| bytes, network header first; |tp_status| the ring's status
 * word for it) may enter the out-of-order store. |offset| is its stream
 * offset and |confirmed| the local kernel's in-order point (every stream
 * byte below it the kernel has taken). |q| (may be NULL) asks the kernel
 * when a segment lies past what |v| knows. Updates |v| (what passed teaches
 * it the timestamp and ACK) and its counts; returns the verdict.
 */
utls_tap_verdict utls_tap_validate(utls_tap_validator *v, const unsigned char *pkt, size_t len,
                                   unsigned int tp_status, const tap_segment *seg,
                                   uint64_t offset, uint64_t confirmed,
                                   const utls_tap_kernel_query *q);

/* utls_tap_inspect fills |*out| with what utls_tap_validate_hdr needs of
 * the captured IPv4 or IPv6 packet |pkt| (|len| bytes, network header
 * first; |tp_status| the ring's status word for it; |flags| its parsed TCP
 * flags): the checksum's standing, the ACK and the timestamp. The hub calls
 * it in its capture path, the only place the raw packet and the status word
 * exist. Returns 0 if the checksum is wrong or the headers unreadable. */
int utls_tap_inspect(const unsigned char *pkt, size_t len, unsigned int tp_status,
                     uint8_t flags, utls_tap_hdr *out);

/* utls_tap_validate_hdr is utls_tap_validate for a segment the hub already
 * inspected (|h|, |payload_len| bytes of payload): the per-connection
 * checks (window against |confirmed|, ACK, PAWS) on |v|. */
utls_tap_verdict utls_tap_validate_hdr(utls_tap_validator *v, const utls_tap_hdr *h,
                                       size_t payload_len, uint64_t offset, uint64_t confirmed,
                                       const utls_tap_kernel_query *q);

/* utls_tap_validator_learn takes the ACK and the timestamp of a segment that
 * passed utls_tap_validate_hdr and whose bytes the kernel has since taken in
 * order (a segment held in flight, lib/bio/tap.c), as utls_tap_validate_hdr
 * does for one below |confirmed|. */
void utls_tap_validator_learn(utls_tap_validator *v, const utls_tap_hdr *h);

/* utls_tap_kernel_inorder returns the stream offset up to which the local
 * kernel has taken the connection's bytes in order: |read_off| (the next
 * byte the socket |sock| returns) plus what it holds unread (SIOCINQ). One
 * ioctl; |read_off| if the kernel does not say. */
uint64_t utls_tap_kernel_inorder(int sock, uint64_t read_off);

/* utls_tap_kernel_snd_nxt_off: SND.NXT of the TCP socket |sock| minus the
 * send base (utls_tap_validator_set_send_base) in |*out|: tcpi_bytes_acked
 * plus SIOCOUTQ minus SIOCOUTQNSD. Returns 0 if the kernel does not say. */
int utls_tap_kernel_snd_nxt_off(int sock, uint64_t *out);

/* utls_tap_socket_query: the utls_tap_kernel_query of the TCP socket
 * *|sock| (which must outlive its use). */
utls_tap_kernel_query utls_tap_socket_query(int *sock);

#endif
