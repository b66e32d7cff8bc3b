/*
 * The tap's ISNs from the kernel's own TCP state: a cgroup sock_ops BPF
 * program, attached while the process is privileged to the cgroup it runs
 * in, which records at the moment a connection is established
 * (BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB for an accepted one,
 * _ACTIVE_ESTABLISHED_CB for a connected one) the socket's cookie, its
 * 4-tuple and the ISNs the kernel itself uses: rcv_nxt - 1 (the peer's) and
 * snd_una - 1 (ours). Nothing is captured: the control socket, which
 * otherwise clones every packet the host sends to find the same two numbers
 * in the SYN-ACK or the ACK our kernel sends, stays unbound, and the rest of
 * the host pays nothing per packet (the program runs once per connection
 * of this cgroup, at establishment).
 *
 * The record is a slot of an array map that the process maps into its own
 * memory (BPF_F_MMAPABLE) while privileged; reading it later needs no
 * syscall and no privilege, so a server keeps it after dropping root. The
 * slot is the socket cookie modulo UTLS_TAP_SOCKOPS_SLOTS (cookies are
 * handed out in increasing order, so a slot is reused only after that many
 * sockets on the host were given one). The program writes a slot as a
 * seqlock: the cookie is set to 0 (an atomic exchange), the fields are
 * written, then the cookie is set (another); a reader takes the fields only
 * if the cookie, read before and after, is the socket's (SO_COOKIE) and the
 * 4-tuple is its own. Anything else is a miss, and the connection runs in
 * order with a diagnostic.
 *
 * The program is attached with a BPF link, which goes when the last
 * descriptor of it closes (the process and its forked children exit, or
 * exec); it never outlives its users. It sees only sockets of the
 * process's own cgroup and its descendants: an unprivileged worker cannot
 * read the ISNs of other services' connections. Needs CAP_BPF and
 * CAP_NET_ADMIN (or root) at UTLS_tap_open(), a cgroup v2 hierarchy and a
 * kernel with BPF links for cgroups (5.7) and BPF atomics (5.12); where any
 * is missing, or UTLS_TAP_ISN=capture, the control socket does the work.
 */
#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* secure_getenv */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <linux/mount.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "bio/tap_local.h"

#ifndef SO_COOKIE
# define SO_COOKIE 57
#endif

/* The slot the program writes (72 bytes: the map's value). */
typedef struct {
    uint64_t cookie;            /* 0 while being written */
    uint32_t family, op;
    uint32_t local_isn, peer_isn;
    uint32_t remote_port;       /* the port as a 32-bit network-order number
                                 * (the raw 16 bits before Linux 4.20) */
    uint32_t local_port;        /* host order */
    uint32_t remote_ip4, local_ip4; /* network order */
    uint32_t remote_ip6[4], local_ip6[4];
} sockops_slot;

_Static_assert(sizeof(sockops_slot) == UTLS_TAP_SOCKOPS_SLOT_BYTES, "the map's value size");

static struct {
    int tried, active;
    int map_fd, prog_fd, link_fd;
    unsigned char *slots; /* the mapped array */
    size_t map_len;
    char why[160];        /* why it is not active */
} so = {0, 0, -1, -1, -1, NULL, 0, ""};

static long sys_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/* --- The program --------------------------------------------------------- */

#define INS(c, d, s, o, i) ((struct bpf_insn){(c), (d), (s), (o), (i)})
#define CTX(f) ((short)offsetof(struct bpf_sock_ops, f))
#define SLOT(f) ((short)offsetof(sockops_slot, f))

/* copy32: r1 = ctx->|ctx_off|; (add |add|;) slot->|slot_off| = r1 (r6 ctx,
 * r8 slot). */
static size_t copy32(struct bpf_insn *p, size_t n, short ctx_off, short slot_off, int add)
{
    p[n++] = INS(BPF_LDX | BPF_MEM | BPF_W, 1, 6, ctx_off, 0);
    if (add != 0)
        p[n++] = INS(BPF_ALU | BPF_ADD | BPF_K, 1, 0, 0, add);
    p[n++] = INS(BPF_STX | BPF_MEM | BPF_W, 8, 1, slot_off, 0);
    return n;
}

/* build_prog writes the program for the map |map_fd| into |p| (room for 64
 * instructions); returns its length. */
static size_t build_prog(struct bpf_insn *p, int map_fd)
{
    size_t n = 0, skip_at, miss_at, i;

    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0);                 /* r6 = ctx */
    p[n++] = INS(BPF_LDX | BPF_MEM | BPF_W, 2, 6, CTX(op), 0);
    p[n++] = INS(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 2, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB);
    p[n++] = INS(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 1, BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB);
    skip_at = n;
    p[n++] = INS(BPF_JMP | BPF_JA, 0, 0, 0, 0);                            /* to the end */
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0);
    p[n++] = INS(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_socket_cookie);
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_X, 7, 0, 0, 0);                 /* r7 = cookie */
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_X, 1, 0, 0, 0);
    p[n++] = INS(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, UTLS_TAP_SOCKOPS_SLOTS - 1);
    p[n++] = INS(BPF_STX | BPF_MEM | BPF_W, 10, 1, -4, 0);                 /* key */
    p[n++] = INS(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd);
    p[n++] = INS(0, 0, 0, 0, 0);
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0);
    p[n++] = INS(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -4);
    p[n++] = INS(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
    miss_at = n;
    p[n++] = INS(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0, 0);                   /* to the end */
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_X, 8, 0, 0, 0);                 /* r8 = slot */
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, 0);
    p[n++] = INS(BPF_STX | BPF_ATOMIC | BPF_DW, 8, 1, SLOT(cookie), BPF_XCHG);
    n = copy32(p, n, CTX(family), SLOT(family), 0);
    n = copy32(p, n, CTX(op), SLOT(op), 0);
    n = copy32(p, n, CTX(snd_una), SLOT(local_isn), -1);
    n = copy32(p, n, CTX(rcv_nxt), SLOT(peer_isn), -1);
    n = copy32(p, n, CTX(remote_port), SLOT(remote_port), 0);
    n = copy32(p, n, CTX(local_port), SLOT(local_port), 0);
    n = copy32(p, n, CTX(remote_ip4), SLOT(remote_ip4), 0);
    n = copy32(p, n, CTX(local_ip4), SLOT(local_ip4), 0);
    for (i = 0; i < 4; i++) {
        n = copy32(p, n, (short)(CTX(remote_ip6) + 4 * i), (short)(SLOT(remote_ip6) + 4 * i), 0);
        n = copy32(p, n, (short)(CTX(local_ip6) + 4 * i), (short)(SLOT(local_ip6) + 4 * i), 0);
    }
    p[n++] = INS(BPF_STX | BPF_ATOMIC | BPF_DW, 8, 7, SLOT(cookie), BPF_XCHG);
    p[skip_at].off = (short)(n - skip_at - 1);
    p[miss_at].off = (short)(n - miss_at - 1);
    p[n++] = INS(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1);
    p[n++] = INS(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    return n;
}

/* --- Loading and attaching ---------------------------------------------- */

/* cgroup2_root opens the root of the cgroup v2 hierarchy: where it is
 * mounted in this mount namespace, or else (ip netns exec remounts /sys, so
 * a process in a named network namespace often sees no cgroup2 mount) a
 * mount of it that is never attached to any directory and goes with its
 * descriptor (fsopen/fsmount: CAP_SYS_ADMIN, Linux 5.2). Returns a
 * descriptor, or -1. */
static int cgroup2_root(void)
{
    char line[1024], mnt[512] = "";
    FILE *f;
    int fs, fd;

    if ((f = fopen("/proc/self/mountinfo", "re")) != NULL) {
        while (mnt[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
            char *p = line;
            int field;

            if (strstr(line, " - cgroup2 ") == NULL)
                continue;
            for (field = 0; field < 4 && p != NULL; field++)
                p = strchr(p + 1, ' ');
            if (p != NULL && sscanf(p + 1, "%511s", mnt) != 1)
                mnt[0] = '\0';
        }
        fclose(f);
    }
    if (mnt[0] != '\0' && (fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0)
        return fd;
    if ((fs = (int)syscall(__NR_fsopen, "cgroup2", FSOPEN_CLOEXEC)) < 0)
        return -1;
    fd = -1;
    if (syscall(__NR_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
        fd = (int)syscall(__NR_fsmount, fs, FSMOUNT_CLOEXEC, 0);
    close(fs);
    return fd;
}

/* own_cgroup opens this process's cgroup v2 directory; returns a
 * descriptor, or -1 if there is no cgroup v2 hierarchy. */
static int own_cgroup(void)
{
    char line[1024], rel[512] = "";
    FILE *f;
    int root, fd;

    if ((f = fopen("/proc/self/cgroup", "re")) != NULL) {
        while (rel[0] == '\0' && fgets(line, sizeof(line), f) != NULL)
            if (strncmp(line, "0::", 3) == 0 && sscanf(line + 3, "%511s", rel) != 1)
                rel[0] = '\0';
        fclose(f);
    }
    if (rel[0] != '/' || (root = cgroup2_root()) < 0)
        return -1;
    fd = rel[1] == '\0' ? dup(root)
                        : openat(root, rel + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(root);
    return fd;
}

static int give_up(const char *what)
{
    snprintf(so.why, sizeof(so.why), "%s: %s", what, strerror(errno));
    if (so.slots != NULL)
        munmap(so.slots, so.map_len);
    so.slots = NULL;
    if (so.prog_fd >= 0)
        close(so.prog_fd);
    if (so.map_fd >= 0)
        close(so.map_fd);
    so.prog_fd = so.map_fd = -1;
    return 0;
}

static int sockops_open(void)
{
    static char log[4096];
    struct bpf_insn prog[64];
    union bpf_attr a;
    const char *want = secure_getenv("UTLS_TAP_ISN");
    int cg_fd;

    if (want != NULL && strcmp(want, "capture") == 0) {
        snprintf(so.why, sizeof(so.why), "UTLS_TAP_ISN=capture");
        return 0;
    }
    memset(&a, 0, sizeof(a));
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = sizeof(sockops_slot);
    a.max_entries = UTLS_TAP_SOCKOPS_SLOTS;
    a.map_flags = BPF_F_MMAPABLE;
    memcpy(a.map_name, "utls_tap_isns", sizeof("utls_tap_isns"));
    if ((so.map_fd = (int)sys_bpf(BPF_MAP_CREATE, &a)) < 0)
        return give_up("BPF map");
    so.map_len = (size_t)UTLS_TAP_SOCKOPS_SLOTS * sizeof(sockops_slot);
    so.slots = mmap(NULL, so.map_len, PROT_READ, MAP_SHARED, so.map_fd, 0);
    if (so.slots == MAP_FAILED) {
        so.slots = NULL;
        return give_up("mapping the BPF map");
    }
    memset(&a, 0, sizeof(a));
    a.prog_type = BPF_PROG_TYPE_SOCK_OPS;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = (uint32_t)build_prog(prog, so.map_fd);
    a.license = (uint64_t)(uintptr_t)"Apache-2.0";
    /* what bpftool prog list shows an administrator */
    memcpy(a.prog_name, "utls_tap_isn", sizeof("utls_tap_isn"));
    if ((so.prog_fd = (int)sys_bpf(BPF_PROG_LOAD, &a)) < 0) {
        /* again with the verifier's log, for its last words */
        int saved = errno;
        size_t l;

        log[0] = '\0';
        a.log_buf = (uint64_t)(uintptr_t)log;
        a.log_size = sizeof(log);
        a.log_level = 1;
        (void)sys_bpf(BPF_PROG_LOAD, &a);
        errno = saved;
        l = strlen(log);
        while (l > 0 && log[l - 1] == '\n')
            log[--l] = '\0';
        give_up("BPF program");
        snprintf(so.why + strlen(so.why), sizeof(so.why) - strlen(so.why), " (%s)",
                 l > 60 ? log + l - 60 : log);
        return 0;
    }
    if ((cg_fd = own_cgroup()) < 0)
        return give_up("this process's cgroup v2 directory");
    memset(&a, 0, sizeof(a));
    a.link_create.prog_fd = (uint32_t)so.prog_fd;
    a.link_create.target_fd = (uint32_t)cg_fd;
    a.link_create.attach_type = BPF_CGROUP_SOCK_OPS;
    so.link_fd = (int)sys_bpf(BPF_LINK_CREATE, &a);
    close(cg_fd);
    if (so.link_fd < 0)
        return give_up("attaching to the cgroup");
    /* (bpf() makes every descriptor close-on-exec itself) */
    close(so.prog_fd); /* the link holds the program */
    so.prog_fd = -1;
    return 1;
}

int utls_tap_sockops_start(void)
{
    if (!so.tried) {
        so.tried = 1;
        so.active = sockops_open();
    }
    return so.active;
}

const char *utls_tap_sockops_why(void)
{
    return so.active ? NULL : so.why;
}

/* --- Reading ------------------------------------------------------------- */

static int same_tuple(const sockops_slot *s, const tap_key *k)
{
    /* remote_port is the port in network order as a 32-bit number on
     * kernels since 4.20's conversion, the raw 16 bits before */
    uint32_t rp = ntohl(s->remote_port);

    if (rp > 0xffff)
        rp = ntohs((uint16_t)s->remote_port);
    if (s->local_port != k->lport || rp != k->pport)
        return 0;
    if (k->family == AF_INET) /* an IPv6 socket's IPv4 connection too */
        return (s->family == AF_INET || s->family == AF_INET6)
               && memcmp(&s->local_ip4, k->local, 4) == 0
               && memcmp(&s->remote_ip4, k->peer, 4) == 0;
    return k->family == AF_INET6 && s->family == AF_INET6
           && memcmp(s->local_ip6, k->local, 16) == 0
           && memcmp(s->remote_ip6, k->peer, 16) == 0;
}

int utls_tap_sockops_isn(int fd, const tap_key *k, uint32_t *out_local_isn,
                         uint32_t *out_peer_isn, int *out_local_connected)
{
    uint64_t cookie = 0, c1, c2;
    socklen_t len = sizeof(cookie);
    const sockops_slot *at;
    sockops_slot s;

    if (!so.active || getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0 || cookie == 0)
        return 0;
    at = (const sockops_slot *)(so.slots
                                + (size_t)(cookie & (UTLS_TAP_SOCKOPS_SLOTS - 1)) * sizeof(s));
    c1 = __atomic_load_n(&at->cookie, __ATOMIC_ACQUIRE);
    memcpy(&s, at, sizeof(s));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    c2 = __atomic_load_n(&at->cookie, __ATOMIC_RELAXED);
    if (c1 != cookie || c2 != cookie || !same_tuple(&s, k))
        return 0;
    *out_local_isn = s.local_isn;
    *out_peer_isn = s.peer_isn;
    *out_local_connected = s.op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB;
    return 1;
}
