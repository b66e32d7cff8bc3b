# json-numbers.cmake: bench_check_numbers(JSON NAME PATH...) fails (FATAL_ERROR)
# unless every PATH of the JSON text JSON is a number. A PATH names nested
# members with '/' ("probes_per_record/cbr"): a CMake list would split them.
# Included by the benchmarks' check_json.cmake scripts (cmake -P).
function(bench_check_numbers json name)
    foreach(path ${ARGN})
        string(REPLACE "/" ";" members "${path}")
        string(JSON value ERROR_VARIABLE err GET "${json}" ${members})
        if(err)
            message(FATAL_ERROR "${name}: ${path}: ${err}")
        endif()
        if(NOT value MATCHES "^[0-9.eE+-]+$")
            message(FATAL_ERROR "${name}: ${path} is not a number: ${value}")
        endif()
    endforeach()
endfunction()
