# The 3.5 base (included by openssl-patch/CMakeLists.txt with UTLS_BASE=3.5).
# Debian 12 has no 3.5 libcrypto, so the stock tree (the verified upstream
# source + Debian 13's series + security/, configured exactly as Debian 13's
# debian/rules does, prepare.sh --stock) builds libcrypto.so.3 once, with the
# stock libssl.so.3 beside it:
#   ${UTLS_LIB_DIR}/libcrypto.so.3        what the fork links and runs with
#   ${CMAKE_BINARY_DIR}/stock/libssl.so.3  stock 3.5 (parity, bench, interop)
# OpenSSL::Crypto then names that libcrypto for every target of the project:
# they keep compiling against the system's 3.0 headers (3.5 is
# backward-compatible: they are "Debian 12 programs") and run with 3.5's
# libcrypto through their build-tree RUNPATH.
execute_process(
    COMMAND ${utls_prepare} --stock ${UTLS_OPENSSL_DIR}
    RESULT_VARIABLE prepare_stock_rc)
if(NOT prepare_stock_rc EQUAL 0)
    message(FATAL_ERROR "uTLS: openssl-patch/prepare.sh --stock failed (its message is above)")
endif()
file(READ ${UTLS_BASE_DIR}/BASE utls_base35_text)
string(REGEX MATCH "UPSTREAM_VERSION=([0-9.]+)" _ "${utls_base35_text}")
set(UTLS_STOCK_BUILD_SHARED ${UTLS_OPENSSL_DIR}/openssl-${CMAKE_MATCH_1}-stock/build_shared
    CACHE INTERNAL "the stock tree's build directory")
set(UTLS_STOCK_LIB_DIR ${CMAKE_BINARY_DIR}/stock CACHE INTERNAL "the stock libssl.so.3 (3.5)")
set(UTLS_LIBCRYPTO ${UTLS_LIB_DIR}/libcrypto.so.3 CACHE INTERNAL "the libcrypto the fork runs with")
file(MAKE_DIRECTORY ${UTLS_STOCK_LIB_DIR})
include(ProcessorCount)
ProcessorCount(utls_ncpu)
if(utls_ncpu EQUAL 0)
    set(utls_ncpu 2)
endif()
# OpenSSL's own make: its dependency tracking decides what to rebuild (the
# stock tree changes only when BASE or security/ does, and prepare.sh then
# unpacks it afresh). libcrypto.so.3 is copied, not linked to: tests/upstream
# may rebuild the stock tree's programs while the fork runs.
add_custom_command(
    OUTPUT ${UTLS_LIBCRYPTO} ${UTLS_STOCK_LIB_DIR}/libssl.so.3
    COMMAND make -C ${UTLS_STOCK_BUILD_SHARED} -s -j${utls_ncpu} libcrypto.so.3 libssl.so.3
    COMMAND ${CMAKE_COMMAND} -E copy ${UTLS_STOCK_BUILD_SHARED}/libcrypto.so.3 ${UTLS_LIBCRYPTO}
    # For `-L build-3.5/lib -lcrypto` (pkg-config's utls.pc): this libcrypto,
    # not the system's 3.0 one, which lacks what 3.5's libssl needs.
    COMMAND ${CMAKE_COMMAND} -E create_symlink libcrypto.so.3 ${UTLS_LIB_DIR}/libcrypto.so
    COMMAND ${CMAKE_COMMAND} -E copy ${UTLS_STOCK_BUILD_SHARED}/libssl.so.3 ${UTLS_STOCK_LIB_DIR}/libssl.so.3
    DEPENDS ${UTLS_STOCK_BUILD_SHARED}/.utls-configured
    COMMENT "Building Debian 13's libcrypto.so.3 and stock libssl.so.3 (OpenSSL ${CMAKE_MATCH_1})"
    VERBATIM)
add_custom_target(utls_libcrypto ALL DEPENDS ${UTLS_LIBCRYPTO} ${UTLS_STOCK_LIB_DIR}/libssl.so.3)
set_target_properties(OpenSSL::Crypto PROPERTIES
    IMPORTED_LOCATION ${UTLS_LIBCRYPTO}
    IMPORTED_SONAME libcrypto.so.3)
