/*
 * Event-loop readiness over the tap (docs/evloop.md): which descriptor to poll
 * and which connections have records ready, per SSL and per TCP socket
 * descriptor. The descriptor-level calls serve the companion preload library
 * (evloop/), which knows a program's descriptors but not its SSL objects.
 *
 * A process-wide registry maps a tapped socket's descriptor number to its tap
 * BIO. The tap computes readiness per connection even when many connections
 * share one capture descriptor. Descriptor numbers are reused by the kernel:
 * each entry keeps the socket's device and inode, and a lookup whose
 * descriptor now names another file finds nothing.
 */
#include <stdint.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/utls_evloop.h>

#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/tap_local.h"

/*
 * The highest descriptor number the registry indexes. Bounds the registry's
 * memory (16 bytes a slot, grown on demand); a tapped socket above it gets no
 * early wake-ups and reads in order, as without the companion library.
 */
#define UTLS_EVLOOP_MAX_FD (1 << 20)

typedef struct {
    BIO *tap;
    dev_t dev;
    ino_t ino;
} evloop_slot;

static CRYPTO_ONCE evloop_once = CRYPTO_ONCE_STATIC_INIT;

static CRYPTO_RWLOCK *evloop_lock = NULL;

static evloop_slot *slots = NULL;

static size_t num_slots = 0;

static size_t num_tapped = 0;

static uint64_t generation = 1;

static void evloop_init(void)
{
    evloop_lock = CRYPTO_THREAD_lock_new();
}

static int evloop_ready_lock(void)
{
    return CRYPTO_THREAD_run_once(&evloop_once, evloop_init) && evloop_lock != NULL;
}

int utls_evloop_register(int fd, BIO *tap)
{
    struct stat st;
    int ok = 0;

    if (fd < 0 || fd >= UTLS_EVLOOP_MAX_FD || fstat(fd, &st) != 0 || !evloop_ready_lock()
        || !CRYPTO_THREAD_write_lock(evloop_lock))
        return 0;
    if ((size_t)fd >= num_slots) {
        size_t n = num_slots == 0 ? 256 : num_slots;
        evloop_slot *grown;

        while (n <= (size_t)fd)
            n *= 2;
        if (n > UTLS_EVLOOP_MAX_FD)
            n = UTLS_EVLOOP_MAX_FD;
        grown = OPENSSL_realloc(slots, n * sizeof(*slots));
        if (grown == NULL)
            goto end;
        memset(grown + num_slots, 0, (n - num_slots) * sizeof(*slots));
        slots = grown;
        num_slots = n;
    }
    if (slots[fd].tap == NULL)
        __atomic_store_n(&num_tapped, num_tapped + 1, __ATOMIC_RELEASE);
    slots[fd].tap = tap;
    slots[fd].dev = st.st_dev;
    slots[fd].ino = st.st_ino;
    __atomic_store_n(&generation, generation + 1, __ATOMIC_RELEASE);
    ok = 1;
end:
    CRYPTO_THREAD_unlock(evloop_lock);
    return ok;
}

void utls_evloop_unregister(int fd, BIO *tap)
{
    if (fd < 0 || !evloop_ready_lock() || !CRYPTO_THREAD_write_lock(evloop_lock))
        return;
    if ((size_t)fd < num_slots && slots[fd].tap == tap) {
        slots[fd].tap = NULL;
        __atomic_store_n(&num_tapped, num_tapped - 1, __ATOMIC_RELEASE);
        __atomic_store_n(&generation, generation + 1, __ATOMIC_RELEASE);
    }
    CRYPTO_THREAD_unlock(evloop_lock);
}

uint64_t UTLS_evloop_generation(void)
{
    if (__atomic_load_n(&num_tapped, __ATOMIC_ACQUIRE) == 0)
        return 0;
    return __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
}

/*
 * evloop_ctrl runs |cmd| on the tap of socket |fd| under the registry's read
 * lock (a tap is unregistered under the write lock before it is freed, so it
 * cannot go away meanwhile). Returns -1 if |fd| is not a registered socket.
 */
static long evloop_ctrl(int fd, int cmd, void *ptr)
{
    struct stat st;
    long r = -1;

    if (fd < 0 || UTLS_evloop_generation() == 0 || fstat(fd, &st) != 0
        || !CRYPTO_THREAD_read_lock(evloop_lock))
        return -1;
    if ((size_t)fd < num_slots && slots[fd].tap != NULL && slots[fd].dev == st.st_dev
        && slots[fd].ino == st.st_ino)
        r = BIO_ctrl(slots[fd].tap, cmd, 0, ptr);
    CRYPTO_THREAD_unlock(evloop_lock);
    return r;
}

int UTLS_evloop_fd_get_capture_fd(int fd)
{
    long r = evloop_ctrl(fd, UTLS_BIO_CTRL_GET_CAPTURE_FD, NULL);

    return r > 0 ? (int)r : -1;
}

int UTLS_evloop_fd_ready(int fd, uint64_t *out_token)
{
    utls_evloop_state st;
    long r;

    memset(&st, 0, sizeof(st));
    r = evloop_ctrl(fd, UTLS_BIO_CTRL_EVLOOP_READY, &st);
    if (out_token != NULL)
        *out_token = st.token;
    return r == 1;
}

int UTLS_evloop_get_wakeups(int fd, uint64_t *out_wakeups, uint64_t *out_spurious)
{
    utls_evloop_state st;

    memset(&st, 0, sizeof(st));
    if (out_wakeups == NULL || out_spurious == NULL
        || evloop_ctrl(fd, UTLS_BIO_CTRL_EVLOOP_READY, &st) < 0)
        return 0;
    *out_wakeups = st.wakeups;
    *out_spurious = st.spurious;
    return 1;
}

int UTLS_evloop_get_fd(const SSL *ssl)
{
    BIO *b = ssl != NULL ? SSL_get_rbio(ssl) : NULL;
    long r = b != NULL ? BIO_ctrl(b, UTLS_BIO_CTRL_GET_CAPTURE_FD, 0, NULL) : -1;

    return r > 0 ? (int)r : -1;
}

int UTLS_evloop_ready(SSL *ssl)
{
    BIO *b = ssl != NULL ? SSL_get_rbio(ssl) : NULL;

    return b != NULL && BIO_ctrl(b, UTLS_BIO_CTRL_EVLOOP_READY, 0, NULL) == 1;
}

int utls_tap_poll(struct pollfd *p, unsigned long n, int timeout_ms)
{
    struct timespec ts, *tsp = NULL;

    if (timeout_ms >= 0) {
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
        tsp = &ts;
    }
    return (int)syscall(SYS_ppoll, p, (nfds_t)n, tsp, NULL, (size_t)8);
}
