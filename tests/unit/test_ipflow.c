/* test_ipflow.c: unit tests for the IP-tunnel delivery policy
 * (core/include/utls/ipflow.h): which inner packets may overtake. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utls/ipflow.h"

static size_t ipv4(uint8_t *p, uint8_t proto, size_t len)
{
    memset(p, 0, len);
    p[0] = 0x45;
    p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
    p[8] = 64;
    p[9] = proto;
    return len;
}

static size_t ipv6(uint8_t *p, uint8_t next, size_t len)
{
    memset(p, 0, len);
    p[0] = 0x60;
    p[4] = (uint8_t)((len - 40) >> 8);
    p[5] = (uint8_t)(len - 40);
    p[6] = next;
    p[7] = 64;
    return len;
}

static void test_ipflow_datagrams_go_early(void **state)
{
    uint8_t p[200];

    (void)state;
    assert_int_equal(utls_ipflow_keeps_order(p, ipv4(p, 17, 200)), 0); /* UDP */
    assert_int_equal(utls_ipflow_keeps_order(p, ipv4(p, 1, 84)), 0);   /* ICMP */
    assert_int_equal(utls_ipflow_keeps_order(p, ipv4(p, 136, 60)), 0); /* UDP-Lite */
    assert_int_equal(utls_ipflow_keeps_order(p, ipv6(p, 17, 200)), 0);
    assert_int_equal(utls_ipflow_keeps_order(p, ipv6(p, 58, 64)), 0);  /* ICMPv6 */
}

static void test_ipflow_streams_keep_order(void **state)
{
    uint8_t p[200];

    (void)state;
    assert_int_equal(utls_ipflow_keeps_order(p, ipv4(p, 6, 200)), 1);   /* TCP */
    assert_int_equal(utls_ipflow_keeps_order(p, ipv4(p, 132, 200)), 1); /* SCTP */
    assert_int_equal(utls_ipflow_keeps_order(p, ipv4(p, 33, 200)), 1);  /* DCCP */
    assert_int_equal(utls_ipflow_keeps_order(p, ipv6(p, 6, 200)), 1);
    assert_int_equal(utls_ipflow_keeps_order(p, ipv6(p, 50, 200)), 1);  /* ESP: unknown inside */
}

static void test_ipflow_ipv6_extension_headers(void **state)
{
    uint8_t p[200];

    (void)state;
    /* hop-by-hop (8 bytes) then UDP: early */
    ipv6(p, 0, 200);
    p[40] = 17;
    p[41] = 0;
    assert_int_equal(utls_ipflow_keeps_order(p, 200), 0);
    /* destination options of 16 bytes, then a fragment header, then TCP */
    ipv6(p, 60, 200);
    p[40] = 44;
    p[41] = 1;
    p[56] = 6;
    assert_int_equal(utls_ipflow_keeps_order(p, 200), 1);
    /* the same with UDP behind the fragment header */
    p[56] = 17;
    assert_int_equal(utls_ipflow_keeps_order(p, 200), 0);
    /* an extension header that runs past the packet */
    ipv6(p, 0, 48);
    p[40] = 17;
    p[41] = 10;
    assert_int_equal(utls_ipflow_keeps_order(p, 48), 1);
    /* more extension headers than UTLS_IPFLOW_MAX_EXT_HEADERS: unknown */
    ipv6(p, 60, 200);
    for (size_t i = 0; i < UTLS_IPFLOW_MAX_EXT_HEADERS; i++) {
        p[40 + 8 * i] = i + 1 < UTLS_IPFLOW_MAX_EXT_HEADERS ? 60 : 17;
        p[41 + 8 * i] = 0;
    }
    assert_int_equal(utls_ipflow_keeps_order(p, 200), 1);
}

static void test_ipflow_not_ip_keeps_order(void **state)
{
    uint8_t p[200];

    (void)state;
    assert_int_equal(utls_ipflow_keeps_order(NULL, 0), 1);
    assert_int_equal(utls_ipflow_keeps_order(p, 0), 1);
    memset(p, 0, sizeof(p));
    assert_int_equal(utls_ipflow_keeps_order(p, sizeof(p)), 1); /* version 0 */
    ipv4(p, 17, 200);
    assert_int_equal(utls_ipflow_keeps_order(p, 19), 1); /* truncated header */
    p[0] = 0x44;                                          /* IHL below 5 */
    assert_int_equal(utls_ipflow_keeps_order(p, 200), 1);
    p[0] = 0x4f;                                          /* IHL past the data */
    assert_int_equal(utls_ipflow_keeps_order(p, 40), 1);
    ipv6(p, 17, 200);
    assert_int_equal(utls_ipflow_keeps_order(p, 39), 1);
    p[0] = 0x50;                                          /* version 5 */
    assert_int_equal(utls_ipflow_keeps_order(p, 200), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipflow_datagrams_go_early),
        cmocka_unit_test(test_ipflow_streams_keep_order),
        cmocka_unit_test(test_ipflow_ipv6_extension_headers),
        cmocka_unit_test(test_ipflow_not_ip_keeps_order),
    };

    return cmocka_run_group_tests_name("ipflow", tests, NULL, NULL);
}
