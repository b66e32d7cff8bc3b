# check_json.cmake: runs bench_cpu --quick (a few MB, one repetition) and
# checks that its JSON parses and carries the keys issue 4 names, with numeric
# values. Speed targets are reported by the benchmark, never asserted here.
execute_process(COMMAND ${BENCH} --quick --fork-lib-dir ${FORK_LIB_DIR} --out ${OUT}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bench_cpu --quick failed: ${rc}")
endif()
file(READ ${OUT} json)
set(paths "transfer_bytes" "record_wire_bytes" "inorder_ratio" "offmode_ratio" "loss2_ratio"
    "inorder_nometa_ratio" "loss2_nometa_ratio")
foreach(variant stock fork_off fork_on fork_on_nometa)
    foreach(loss loss0 loss2)
        list(APPEND paths "runs/${variant}/${loss}/median_s" "runs/${variant}/${loss}/min_s"
             "runs/${variant}/${loss}/max_s" "runs/${variant}/${loss}/samples/0")
    endforeach()
endforeach()
foreach(cipher tls13_aes128gcm tls13_aes256gcm tls13_chacha20poly1305 tls13_aes128ccm
        tls12_ecdhe_ecdsa_aes128gcm tls12_ecdhe_ecdsa_chacha20poly1305
        tls12_ecdhe_ecdsa_aes128sha256_etm tls12_ecdhe_ecdsa_aes128sha256_mte)
    list(APPEND paths "probes_per_ooo_record/${cipher}"
         "ooo_records/${cipher}/records_out_of_order"
         "ooo_records/${cipher}/decryptions_saved")
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/../json-numbers.cmake)
bench_check_numbers("${json}" cpu.json ${paths})
string(JSON cipher GET "${json}" cipher)
if(NOT cipher STREQUAL "TLS_AES_128_GCM_SHA256")
    message(FATAL_ERROR "cpu.json: cipher is ${cipher}")
endif()
string(JSON loss_model TYPE "${json}" loss_model)
if(NOT loss_model STREQUAL "OBJECT")
    message(FATAL_ERROR "cpu.json: loss_model is not an object")
endif()
# Not a speed target but what the loss2 numbers mean: with one record per
# segment, every segment that arrives past a hole carries a record the fork
# must deliver out of order (a fork that dropped them would look cheap).
string(JSON past GET "${json}" loss_model segments_past_a_hole loss2)
string(JSON ooo GET "${json}" fork_on_stats loss2 records_out_of_order)
if(past EQUAL 0 OR NOT ooo EQUAL past)
    message(FATAL_ERROR "cpu.json: ${ooo} records out of order, ${past} arrived past a hole")
endif()
message(STATUS "cpu.json well-formed: ${OUT}")
