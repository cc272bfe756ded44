# The decoder under libFuzzer for a bounded time (tests/fuzz/run.sh builds it with clang in
# its own tiny project, under this build's folder).
# The fuzzer builds its own clang ASan+UBSan binary whatever the build: once per run is enough,
# so the sanitizer build leaves it to the other.
if(NOT OG_SANITIZE)
  add_test(NAME fuzz_codec COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh 10 ${PROJECT_BINARY_DIR}/fuzz)
  set_tests_properties(fuzz_codec PROPERTIES LABELS fuzz TIMEOUT 300)
endif()
