# bench/cpu/probe_cost.cmake: probe_cost (issue 6): the cost of checking 1, 8,
# 32 and 128 candidate sequence numbers per 1448-byte record with the EVP
# fallback, the "utls" provider and explicit record numbers, per cipher, and
# the ratios to one ordinary decryption (probe_cost.provider_gcm_32_vs_single,
# target <= 1.5; evp_gcm_32_vs_single beside it). `bench_probe_cost` writes
# ${UTLS_BENCH_DIR}/probe_cost.json; ctest label bench-smoke runs a quick
# version, which checks every variant's answer but never a speed.
#
# Included from bench/cpu/CMakeLists.txt; needs provider/ (utls_aeadsearch,
# utls_provider).
if(TARGET utls_aeadsearch AND TARGET utls_provider)
    add_executable(utls_bench_probe_cost ${CMAKE_CURRENT_LIST_DIR}/probe_cost.c)
    target_link_libraries(utls_bench_probe_cost PRIVATE utls_aeadsearch OpenSSL::Crypto)
    target_compile_options(utls_bench_probe_cost PRIVATE -O2 -Wall -Wextra)

    add_custom_target(bench_probe_cost
        COMMAND utls_bench_probe_cost --module-dir ${UTLS_PROVIDER_MODULE_DIR}
                --out ${UTLS_BENCH_DIR}/probe_cost.json
        DEPENDS utls_bench_probe_cost utls_provider
        COMMENT "bench/cpu probe_cost -> ${UTLS_BENCH_DIR}/probe_cost.json"
        USES_TERMINAL)
    add_dependencies(bench_all bench_probe_cost)

    add_test(NAME bench.smoke_probe_cost
             COMMAND utls_bench_probe_cost --quick --module-dir ${UTLS_PROVIDER_MODULE_DIR}
                     --out ${CMAKE_CURRENT_BINARY_DIR}/probe_cost-smoke.json)
    set_tests_properties(bench.smoke_probe_cost PROPERTIES LABELS bench-smoke TIMEOUT 300)
endif()
