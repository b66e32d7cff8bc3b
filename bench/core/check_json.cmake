# check_json.cmake: runs bench_core --quick and checks that its JSON parses
# and carries the keys the issue names, with numeric values.
execute_process(COMMAND ${BENCH} --quick --out ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bench_core --quick failed: ${rc}")
endif()
file(READ ${OUT} json)
foreach(path "scan_gbps" "reasm_inserts_per_s" "probes_per_record;cbr"
        "probes_per_record;vbr" "probes_per_record;mixed"
        "probes_per_record;by_loss;vbr;0.05" "scan_fp_predicted_per_position"
        "cobs_gbps;encode" "cobs_gbps;decode" "ucobs_rx_gbps;in_order"
        "ucobs_rx_gbps;loss_2pct" "ucobs_rx_gbps;loss_vs_in_order")
    string(JSON value ERROR_VARIABLE err GET "${json}" ${path})
    if(err)
        message(FATAL_ERROR "core.json: ${path}: ${err}")
    endif()
    if(NOT value MATCHES "^[0-9.eE+-]+$")
        message(FATAL_ERROR "core.json: ${path} is not a number: ${value}")
    endif()
endforeach()
message(STATUS "core.json well-formed: ${OUT}")
