# stream_example.cmake: the build of a streaming example (utls-stream,
# utls-substreams), included by its CMakeLists.txt after project().
#
# Standalone (a user's build), find_package(utls) finds the fork through
# utls_DIR; inside the uTLS tree (examples/CMakeLists.txt adds the example's
# directory) the fork's target utls::ssl exists already and is used directly.
if(NOT TARGET utls::ssl)
    find_package(utls 0.1 REQUIRED)
endif()
find_package(OpenSSL 3.0 REQUIRED COMPONENTS SSL Crypto)
# example_util.c: the plumbing the streaming examples share (messages,
# clocks, sockets, certificate, options); no uTLS API in it.
set(EXAMPLE_COMMON ${CMAKE_CURRENT_LIST_DIR})

# stream_example(NAME STOCK_DEFINE): two builds of NAME.c with
# example_util.c: NAME linked with the uTLS fork (utls::ssl), and NAME-stock
# linked with the system libssl and compiled with STOCK_DEFINE (no uTLS API).
function(stream_example name stock_define)
    add_executable(${name} ${name}.c ${EXAMPLE_COMMON}/example_util.c)
    target_link_libraries(${name} PRIVATE utls::ssl ${CMAKE_DL_LIBS})
    add_executable(${name}-stock ${name}.c ${EXAMPLE_COMMON}/example_util.c)
    target_compile_definitions(${name}-stock PRIVATE ${stock_define})
    target_link_libraries(${name}-stock PRIVATE OpenSSL::SSL OpenSSL::Crypto ${CMAKE_DL_LIBS})
    foreach(target ${name} ${name}-stock)
        target_compile_options(${target} PRIVATE -Wall -Wextra)
        target_include_directories(${target} PRIVATE ${EXAMPLE_COMMON})
    endforeach()
    if(UTLS_BASE STREQUAL "3.5")
        # In the 3.5 tree OpenSSL::Crypto is the 3.5 build's libcrypto, whose
        # rpath (build-3.5/lib, beside the fork) would make the stock build
        # load the fork. Without it, it runs on the system's libssl and
        # libcrypto, a stock peer as on 3.0 (tests/sched does the same).
        set_target_properties(${name}-stock PROPERTIES SKIP_BUILD_RPATH ON)
    endif()
endfunction()
