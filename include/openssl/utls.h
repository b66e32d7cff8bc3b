/*
 * uTLS: out-of-order TLS record delivery in a drop-in libssl.so.3.
 *
 * Everything declared here is exported by the uTLS fork of libssl under the
 * symbol version nodes UTLS_0.1 and UTLS_0.2; nothing in OpenSSL's own OPENSSL_3.0.0 node
 * changes. A program that uses this header must run with the fork's
 * libssl.so.3 (link with `pkg-config --libs utls`); a program that does not
 * use it sees exactly OpenSSL 3.0's behaviour.
 *
 * This header is the umbrella over one header per part of the API, each of
 * which may also be included alone:
 *
 *   <openssl/utls_version.h>  the library's version
 *   <openssl/utls_record.h>   out-of-order delivery: mode bits, UTLS_read_record(),
 *                             statistics, limits
 *   <openssl/utls_ern.h>      explicit record numbers, out-of-sequence sending
 *   <openssl/utls_bio.h>      the segment and uTCP BIOs, the tap
 *   <openssl/utls_sched.h>    the send scheduler, TCP information
 *   <openssl/utls_streams.h>  sub-streams
 *   <openssl/utls_ucobs.h>    uCOBS datagrams over TCP
 *   <openssl/utls_err.h>      the error library and reason codes
 *   <openssl/utls_tunnel.h>   IP tunnels: inner TCP in order, datagrams early
 *   <openssl/utls_evloop.h>   event-loop readiness: what to poll, which
 *                             connections have records ready
 *   <openssl/utls_tapcheck.h> what the tap's validation of captured segments
 *                             rejected
 *
 * docs/api-conventions.md gives the conventions every part follows.
 */
#ifndef OPENSSL_UTLS_H
# define OPENSSL_UTLS_H

# include <openssl/utls_version.h>
# include <openssl/utls_record.h>
# include <openssl/utls_ern.h>
# include <openssl/utls_bio.h>
# include <openssl/utls_sched.h>
# include <openssl/utls_streams.h>
# include <openssl/utls_ucobs.h>
# include <openssl/utls_err.h>
# include <openssl/utls_tap.h>
# include <openssl/utls_tunnel.h>
# include <openssl/utls_evloop.h>
# include <openssl/utls_tapcheck.h>

#endif /* OPENSSL_UTLS_H */
