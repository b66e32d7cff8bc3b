# check_json.cmake: runs bench_core --quick and checks that its JSON parses
# and carries the keys the issue names, with numeric values.
execute_process(COMMAND ${BENCH} --quick --out ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bench_core --quick failed: ${rc}")
endif()
file(READ ${OUT} json)
include(${CMAKE_CURRENT_LIST_DIR}/../json-numbers.cmake)
bench_check_numbers("${json}" core.json "scan_gbps" "reasm_inserts_per_s" "probes_per_record/cbr"
    "probes_per_record/vbr" "probes_per_record/mixed" "probes_per_record/by_loss/vbr/0.05"
    "scan_fp_predicted_per_position" "cobs_gbps/encode" "cobs_gbps/decode"
    "ucobs_rx_gbps/in_order" "ucobs_rx_gbps/loss_2pct" "ucobs_rx_gbps/loss_vs_in_order")
message(STATUS "core.json well-formed: ${OUT}")
