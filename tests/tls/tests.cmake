# Kafka over SASL_SSL with SCRAM-SHA-512: the SASL_SSL listener of the broker that
# deploy/local/services.sh starts with ORDERGATE_KAFKA_TLS=1 (tests/run.sh does). The tests fail,
# never skip, without its exports (ORDERGATE_KAFKA_TLS_BROKERS, _CA, _USER, _PASSWORD_FILE).
# They reuse the consumer tests' harness (tests/consumer/ct.h) for the database, the topics and
# the checks, which go through the PLAINTEXT listener.
add_library(ogtlstest STATIC ${CMAKE_CURRENT_LIST_DIR}/tls.c)
target_link_libraries(ogtlstest PUBLIC ogconsumertest)
target_include_directories(ogtlstest PUBLIC ${CMAKE_CURRENT_LIST_DIR})
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/tests/tls)

function(og_tls_test name)
  og_add_test(NAME ${name} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_${name}.c ${ARGN})
  target_link_libraries(${name} PRIVATE ogtlstest)
  # The programs under test must be built before the test runs.
  add_dependencies(${name} ordergate-consumer ordergatectl)
endfunction()

# topics, schedule, consume, re-schedule, commit and relay over SASL_SSL.
og_tls_test(tls_flow LABELS kafka FIXTURES db kafka TIMEOUT 150)
# A wrong password or an untrusted CA: one line, exit 2, nothing changed.
og_tls_test(tls_refused LABELS kafka FIXTURES db kafka TIMEOUT 120)
# Restarts the shared broker (services.sh restart-kafka): nothing else may run meanwhile.
og_tls_test(tls_restart LABELS kafka FIXTURES db kafka TIMEOUT 180)
set_tests_properties(tls_restart PROPERTIES RUN_SERIAL TRUE)
