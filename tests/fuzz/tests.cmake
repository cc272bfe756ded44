# The decoder under libFuzzer for a bounded time (tests/fuzz/run.sh builds it with clang in
# its own tiny project, under this build's folder).
add_test(NAME fuzz_codec COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh 20 ${PROJECT_BINARY_DIR}/fuzz)
set_tests_properties(fuzz_codec PROPERTIES LABELS fuzz TIMEOUT 300)
