/*
 * Mocks for test/tls13secretstest (run-upstream.sh links them in).
 *
 * Upstream's tls13secretstest compiles ssl/tls13_enc.c into itself and mocks
 * the libssl internals that file calls (see test/tls13secretstest.c), since
 * libssl.so does not export them. The uTLS patches make tls13_enc.c call the
 * uTLS hooks below, which libssl.so does not export either: without these
 * mocks the test does not link. They are weak, so a mock added to the patched
 * test source itself takes precedence. The test only derives TLS 1.3 secrets
 * from a fake SSL object; a hook that does nothing is what it needs.
 */
struct ssl_st;

__attribute__((weak)) void utls_hook_read_key_changed(struct ssl_st *s)
{
    (void)s;
}
