/*
 * The uTCP BIO (UTLS_BIO_f_utcp): reads Minion's uTCP units (flags, 32-bit
 * TCP sequence offset, data) from the next BIO in its chain into a segment
 * store.
 */
#include <limits.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>

#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/segstore_local.h"

static CRYPTO_ONCE utcp_once = CRYPTO_ONCE_STATIC_INIT;

static BIO_METHOD *utcp_method = NULL;

int utls_utcp_bio_type = -1; /* BIO type of the uTCP BIO once made (seg_of) */

/* --- The uTCP BIO (filter) ----------------------------------------------- */

/* utcp_extend turns a 32-bit TCP sequence offset into the 64-bit stream
 * offset nearest the in-order end (RFC 1982 serial arithmetic). */
static int utcp_extend(const seg_ctx *c, uint32_t off32, uint64_t *out)
{
    uint64_t end = utls_seg_inorder_end(c);
    int32_t d = (int32_t)(off32 - (uint32_t)end);

    if (d < 0 && (uint64_t)(-(int64_t)d) > end)
        return 0;
    *out = end + (int64_t)d;
    return 1;
}

/* utcp_pump reads one unit from the next BIO. Returns 1 if a unit was
 * consumed, 0 at end of file, -1 when the next BIO has nothing (retry) or
 * failed. */
static int utcp_pump(BIO *b, seg_ctx *c)
{
    BIO *next = BIO_next(b);
    int n;
    uint64_t off;

    if (next == NULL)
        return -1;
    if (c->unit == NULL && (c->unit = OPENSSL_malloc(UTLS_UTCP_MAX_UNIT)) == NULL)
        return -1;
    n = BIO_read(next, c->unit, UTLS_UTCP_MAX_UNIT);
    if (n <= 0) {
        BIO_copy_next_retry(b);
        return n == 0 ? 0 : -1;
    }
    if (n < 5) {
        /*
         * Too short to carry an offset: skip it, like a segment outside the
         * window; the in-order stream is unaffected. Nothing goes on the
         * error queue: the SSL_read() under way goes on (or retries), and
         * SSL_get_error() would report any queued error as SSL_ERROR_SSL,
         * making a read that should retry look fatal.
         */
        return 1;
    }
    if (!utcp_extend(c, ((uint32_t)c->unit[1] << 24) | ((uint32_t)c->unit[2] << 16)
                            | ((uint32_t)c->unit[3] << 8) | c->unit[4], &off))
        return 1;
    if (c->unit[0] & UTLS_UTCP_FLAG_EOF) {
        c->eof_known = 1;
        c->eof_off = off;
        return 1;
    }
    ERR_set_mark();
    if (!utls_seg_push(c, off, c->unit + 5, (size_t)n - 5, 0))
        ERR_pop_to_mark(); /* outside the window: like TCP, drop it */
    else
        ERR_clear_last_mark();
    return 1;
}

static int utcp_read(BIO *b, char *out, int outl)
{
    seg_ctx *c = BIO_get_data(b);
    int r;

    BIO_clear_retry_flags(b);
    while (utls_seg_inorder_avail(c) == 0) {
        uint64_t before = c->ev_count;

        if (c->eof_known && c->read_off >= c->eof_off)
            return 0;
        r = utcp_pump(b, c);
        if (r == 0) {
            /* The next BIO ended: so does the stream, at the in-order end. */
            c->eof_known = 1;
            c->eof_off = utls_seg_inorder_end(c);
            continue;
        }
        if (r < 0)
            return -1; /* retry flags copied from the next BIO */
        if (utls_seg_inorder_avail(c) == 0 && c->ev_count > before) {
            /* Data past a hole: give the SSL a chance to deliver it. */
            c->woke = 1;
            c->sig.pending = c->ev_count + 1;
            BIO_set_retry_read(b);
            return -1;
        }
    }
    return seg_read_inorder(b, c, out, outl);
}

/* Filter BIOs (uTCP, tap): writes go straight to the next BIO. */
int utls_bio_filter_write(BIO *b, const char *in, int inl)
{
    BIO *next = BIO_next(b);
    int r;

    BIO_clear_retry_flags(b);
    if (next == NULL)
        return 0;
    r = BIO_write(next, in, inl);
    BIO_copy_next_retry(b);
    return r;
}

static long utcp_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    seg_ctx *c = BIO_get_data(b);
    BIO *next = BIO_next(b);

    switch (cmd) {
    case UTLS_BIO_CTRL_NEXT_FRAGMENT:
    case UTLS_BIO_CTRL_READ_OFFSET:
    case UTLS_BIO_CTRL_INORDER_END:
    case UTLS_BIO_CTRL_DISCARD:
    case UTLS_BIO_CTRL_TAKE_WAKEUP:
    case UTLS_BIO_CTRL_GET_SIGNALS:
    case BIO_CTRL_PENDING:
    case BIO_CTRL_EOF:
        return utls_seg_common_ctrl(c, cmd, num, ptr);
    default:
        return next != NULL ? BIO_ctrl(next, cmd, num, ptr) : 0;
    }
}

static void utcp_method_init(void)
{
    utcp_method = utls_bio_method_new(&utls_utcp_bio_type, BIO_TYPE_FILTER, "uTLS uTCP",
                                      utls_bio_filter_write, utcp_read, utcp_ctrl, utls_seg_bio_new,
                                      utls_seg_bio_free);
}

const BIO_METHOD *UTLS_BIO_f_utcp(void)
{
    if (!CRYPTO_THREAD_run_once(&utcp_once, utcp_method_init))
        return NULL;
    return utcp_method;
}
