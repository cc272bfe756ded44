# The peers' harness (tools/bench/peers/, og_bench_consumer --peer) with a peer over psql: the
# peers themselves need Go and Node and fetch their dependencies, so tools/bench/peers/run.sh
# runs them by hand, never here.
add_test(NAME bench_peers COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_peers.sh ${PROJECT_BINARY_DIR})
set_tests_properties(bench_peers PROPERTIES FIXTURES_REQUIRED db LABELS db TIMEOUT 120)
