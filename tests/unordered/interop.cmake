# Legacy senders (not the fork) into the fork's receiver, through the lossy
# segment network: stock OpenSSL (the system `openssl s_client`, system
# libssl.so.3), GnuTLS (`gnutls-cli`), NSS (`tstclnt`, libnss3-tools) and Go's
# crypto/tls (tests/interop-peers/go, built at test time with the standard
# library only). One ctest per peer and
# version, every cipher of the issue's list the peer offers; label unordered.
add_executable(utls_interop utls_interop.c ${UTLS_TEST_COMMON}/uharness.c)
target_link_libraries(utls_interop PRIVATE utls_lossy utls::ssl)
target_compile_options(utls_interop PRIVATE -Wall -Wextra)
set_target_properties(utls_interop PROPERTIES BUILD_RPATH ${UTLS_LIB_DIR})

find_program(UTLS_SYSTEM_OPENSSL_CLI openssl PATHS /usr/bin NO_DEFAULT_PATH)
find_program(UTLS_GNUTLS_CLI gnutls-cli PATHS /usr/bin NO_DEFAULT_PATH)
find_program(UTLS_NSS_TSTCLNT tstclnt PATHS /usr/bin NO_DEFAULT_PATH)
find_program(UTLS_GO go PATHS /usr/local/go/bin /usr/lib/go/bin /usr/bin NO_DEFAULT_PATH)

set(interop_logs ${CMAKE_CURRENT_BINARY_DIR}/interop-logs)
file(MAKE_DIRECTORY ${interop_logs})
set(interop_legacy_tests)

function(legacy_peer_test peer bin)
    foreach(v 1.2 1.3)
        string(REPLACE "." "" vv ${v})
        set(name unordered.interop.${peer}.tls${vv})
        add_test(NAME ${name}
            COMMAND utls_interop --peer ${peer} --bin ${bin} --tls ${v} --logdir ${interop_logs})
        list(APPEND interop_legacy_tests ${name})
    endforeach()
    set(interop_legacy_tests ${interop_legacy_tests} PARENT_SCOPE)
endfunction()

if(UTLS_SYSTEM_OPENSSL_CLI)
    legacy_peer_test(openssl ${UTLS_SYSTEM_OPENSSL_CLI})
else()
    message(WARNING "tests/unordered: /usr/bin/openssl not found: no stock OpenSSL sender test")
endif()
if(UTLS_GNUTLS_CLI)
    legacy_peer_test(gnutls ${UTLS_GNUTLS_CLI})
else()
    message(WARNING "tests/unordered: gnutls-cli not found (apt-get install gnutls-bin): no GnuTLS sender test")
endif()
if(UTLS_NSS_TSTCLNT)
    legacy_peer_test(nss ${UTLS_NSS_TSTCLNT})
else()
    message(WARNING "tests/unordered: tstclnt not found (apt-get install libnss3-tools): no NSS sender test")
endif()
if(UTLS_GO)
    # Built at test time, standard library only, caches inside the build tree.
    set(gopeer ${CMAKE_CURRENT_BINARY_DIR}/gopeer)
    add_test(NAME unordered.interop.go.build
        COMMAND ${CMAKE_COMMAND} -E env GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off
                GOCACHE=${CMAKE_CURRENT_BINARY_DIR}/go-cache GOPATH=${CMAKE_CURRENT_BINARY_DIR}/go-path
                ${UTLS_GO} build -o ${gopeer} .
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/interop-peers/go)
    set_tests_properties(unordered.interop.go.build PROPERTIES
        LABELS unordered TIMEOUT 120 FIXTURES_SETUP utls_gopeer)
    legacy_peer_test(go ${gopeer})
    set_tests_properties(unordered.interop.go.tls12 unordered.interop.go.tls13 PROPERTIES
        FIXTURES_REQUIRED utls_gopeer)
else()
    message(WARNING "tests/unordered: Go not found (/usr/local/go/bin/go): no crypto/tls sender test")
endif()
set_tests_properties(${interop_legacy_tests} PROPERTIES LABELS unordered TIMEOUT 60)
