/*
 * The segment BIO (UTLS_BIO_s_segment): a fragment source whose segments
 * the caller pushes (tests, fuzzing, a user-space TCP stack), over the
 * segment store; and the BIO_METHOD helper of every uTLS BIO.
 */
#include <limits.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>

#include "common/utls_common.h"
#include "bio/utls_bio.h"
#include "bio/segstore_local.h"

/* --- BIO methods ------------------------------------------------------------ */

static int utls_bio_puts(BIO *b, const char *str)
{
    return BIO_write(b, str, (int)strlen(str));
}

BIO_METHOD *utls_bio_method_new(int *out_type, int kind, const char *name,
                                int (*bwrite)(BIO *, const char *, int),
                                int (*bread)(BIO *, char *, int),
                                long (*ctrl)(BIO *, int, long, void *), int (*create)(BIO *),
                                int (*destroy)(BIO *))
{
    BIO_METHOD *m;

    *out_type = BIO_get_new_index() | kind;
    m = BIO_meth_new(*out_type, name);
    if (m == NULL
        || !BIO_meth_set_write(m, bwrite) || !BIO_meth_set_read(m, bread)
        || !BIO_meth_set_puts(m, utls_bio_puts) || !BIO_meth_set_ctrl(m, ctrl)
        || !BIO_meth_set_create(m, create) || !BIO_meth_set_destroy(m, destroy)) {
        BIO_meth_free(m);
        return NULL;
    }
    return m;
}

/* --- The segment BIO ----------------------------------------------------- */

int utls_seg_bio_new(BIO *b)
{
    seg_ctx *c = utls_seg_ctx_new();

    if (c == NULL)
        return 0;
    /* The in-order stream is built from the store alone, and held bytes keep
     * their first values (utls_seg_push): the SSL may read fragments from it in
     * place. Not the tap's store (utls_segstore_new). */
    c->sig.store = c->ooo;
    c->sig.events = c;
    BIO_set_data(b, c);
    BIO_set_init(b, 1);
    return 1;
}

int utls_seg_bio_free(BIO *b)
{
    if (b == NULL)
        return 0;
    utls_seg_ctx_free(BIO_get_data(b));
    BIO_set_data(b, NULL);
    return 1;
}

static int seg_new_segment(BIO *b)
{
    seg_ctx *c;

    if (!utls_seg_bio_new(b))
        return 0;
    c = BIO_get_data(b);
    c->sig.read_is_push_only = 1;
    return 1;
}

static int seg_read(BIO *b, char *out, int outl)
{
    return seg_read_inorder(b, BIO_get_data(b), out, outl);
}

static int seg_write(BIO *b, const char *in, int inl)
{
    seg_ctx *c = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (inl <= 0)
        return 0;
    if (c->out_bio != NULL) {
        int r = BIO_write(c->out_bio, in, inl);

        if (r <= 0 && BIO_should_retry(c->out_bio))
            BIO_set_retry_write(b);
        return r;
    }
    if (!utls_seg_reserve(&c->out, &c->out_cap, c->out_len + (size_t)inl))
        return -1;
    memcpy(c->out + c->out_len, in, (size_t)inl);
    c->out_len += (size_t)inl;
    return inl;
}

static long seg_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    seg_ctx *c = BIO_get_data(b);

    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return c->out_bio != NULL ? BIO_flush(c->out_bio) : 1;
    case BIO_CTRL_WPENDING:
        return (long)c->out_len;
    default:
        return utls_seg_common_ctrl(c, cmd, num, ptr);
    }
}

static CRYPTO_ONCE seg_once = CRYPTO_ONCE_STATIC_INIT;

static BIO_METHOD *seg_method = NULL;

static int seg_type = -1;

static void seg_method_init(void)
{
    seg_method = utls_bio_method_new(&seg_type, BIO_TYPE_SOURCE_SINK, "uTLS segment", seg_write,
                                     seg_read, seg_ctrl, seg_new_segment, utls_seg_bio_free);
}

const BIO_METHOD *UTLS_BIO_s_segment(void)
{
    if (!CRYPTO_THREAD_run_once(&seg_once, seg_method_init))
        return NULL;
    return seg_method;
}

static seg_ctx *seg_of(BIO *b)
{
    int type = b != NULL ? BIO_method_type(b) : -1;

    /* No CRYPTO_THREAD_run_once() per push: a BIO of ours was made with a
     * method whose init set its type (before that the types are -1, which no
     * BIO has); any other BIO matches neither. */
    if (type == -1 || (type != seg_type && type != utls_utcp_bio_type)) {
        utls_raise(UTLS_R_NOT_A_SEGMENT_BIO, NULL);
        return NULL;
    }
    return BIO_get_data(b);
}

int UTLS_BIO_segment_push(BIO *b, uint64_t offset, const void *data, size_t len)
{
    seg_ctx *c = seg_of(b);

    return c != NULL && utls_seg_push(c, offset, data, len, 0);
}

int UTLS_BIO_segment_push_eof(BIO *b, uint64_t offset)
{
    seg_ctx *c = seg_of(b);

    if (c == NULL)
        return 0;
    c->eof_known = 1;
    c->eof_off = offset;
    return 1;
}

size_t UTLS_BIO_segment_take_output(BIO *b, void *buf, size_t len)
{
    seg_ctx *c = seg_of(b);
    size_t n;

    if (c == NULL)
        return 0;
    n = c->out_len < len ? c->out_len : len;
    if (n == 0)
        return 0; /* c->out may not exist yet: no pointer arithmetic on NULL */
    memcpy(buf, c->out, n);
    memmove(c->out, c->out + n, c->out_len - n);
    c->out_len -= n;
    return n;
}

int UTLS_BIO_segment_set_output(BIO *b, BIO *out)
{
    seg_ctx *c = seg_of(b);

    if (c == NULL)
        return 0;
    c->out_bio = out;
    return 1;
}

int UTLS_BIO_segment_set_window(BIO *b, uint64_t window)
{
    seg_ctx *c = seg_of(b);
    utls_reasm_limits lim;
    utls_reasm *n;

    if (c == NULL || window == 0)
        return 0;
    lim.max_bytes = window > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)window;
    lim.max_fragments = UTLS_SEG_MAX_RUNS;
    lim.max_window = window;
    utls_reasm_advance(c->ooo, c->read_off); /* what was read is not held */
    if (utls_reasm_bytes_held(c->ooo) != 0) {
        /* Held bytes would have to move; only allowed before data arrives. */
        return 0;
    }
    if ((n = utls_reasm_new(&lim, utls_seg_inorder_end(c))) == NULL)
        return 0;
    utls_reasm_free(c->ooo);
    c->ooo = n;
    if (c->sig.store != NULL)
        c->sig.store = n;
    c->sig.store_epoch++;
    c->window = window;
    return 1;
}
