# examples/mall: the gate in front of a shop's own order tables through hooks, raced end to end
# by its Python and Java order services and the scanner, then checked against the shop's books;
# once with a planted hook bug (tests/examples/mall_planted_bug.sql) that the check must catch
# while ordergate's own reconcile passes; and the hooks and privileges case by case
# (tests/examples/mall_hooks.sql); and with Kafka and the consumer (examples_mall_kafka). Both create the cluster-wide roles mall_owner and
# mall_app when missing: one at a time (RESOURCE_LOCK).
set(OG_MALL ${PROJECT_SOURCE_DIR}/examples/mall/run.sh)
# The example is the shop's SQL and its Python and Java services around the scanner and the
# consumer, whose C the scanner and consumer tests run under the sanitizers: it runs once, in
# the normal build (tests/run.sh stays within its 15 minutes).
if(NOT OG_SANITIZE)
  add_test(NAME examples_mall COMMAND ${OG_MALL} --require-db ${PROJECT_BINARY_DIR})
  set_tests_properties(examples_mall PROPERTIES
                       FIXTURES_REQUIRED db LABELS db RESOURCE_LOCK mall_roles TIMEOUT 240)
  add_test(NAME examples_mall_planted_bug
           COMMAND ${OG_MALL} --require-db --planted-bug ${CMAKE_CURRENT_LIST_DIR}/mall_planted_bug.sql
                   stock_books ${PROJECT_BINARY_DIR})
  add_test(NAME examples_mall_hooks
           COMMAND ${OG_MALL} --require-db --sql ${CMAKE_CURRENT_LIST_DIR}/mall_hooks.sql ${PROJECT_BINARY_DIR})
  set_tests_properties(examples_mall_planted_bug examples_mall_hooks PROPERTIES
                       FIXTURES_REQUIRED db LABELS db RESOURCE_LOCK mall_roles TIMEOUT 240)
  # The second tier: cancel messages written by place_order (schedule_cancels = 1), relayed and
  # consumed by ordergate-consumer, the scanner as the fallback behind it.
  add_test(NAME examples_mall_kafka COMMAND ${OG_MALL} --require-db --kafka ${PROJECT_BINARY_DIR})
  set_tests_properties(examples_mall_kafka PROPERTIES
                       FIXTURES_REQUIRED "db;kafka" LABELS kafka RESOURCE_LOCK mall_roles TIMEOUT 240)
endif()

# examples/saleor: Saleor's own tables behind the gate (uuid keys, numeric(20,3) money in four
# currencies, allocations, voucher codes, transaction items), raced by its order service against
# the scanner, then checked by the shop's checks and ordergate's reconcile; once with a planted
# stock bug in the cancel hook (tests/examples/saleor_planted_bug.sql) that the shop's check
# stock_allocations must catch. Both create the cluster-wide role saleor when missing.
if(NOT OG_SANITIZE)
  set(OG_SALEOR ${PROJECT_SOURCE_DIR}/examples/saleor/run.sh)
  add_test(NAME examples_saleor COMMAND ${OG_SALEOR} --require-db ${PROJECT_BINARY_DIR})
  add_test(NAME examples_saleor_planted_bug
           COMMAND ${OG_SALEOR} --require-db --planted-bug ${CMAKE_CURRENT_LIST_DIR}/saleor_planted_bug.sql
                   stock_allocations ${PROJECT_BINARY_DIR})
  set_tests_properties(examples_saleor examples_saleor_planted_bug PROPERTIES
                       FIXTURES_REQUIRED db LABELS db RESOURCE_LOCK saleor_roles TIMEOUT 120)
  # The second tier: ordergate-consumer cancels (and reminds) from the messages place_order
  # wrote, the scanner behind it.
  add_test(NAME examples_saleor_kafka COMMAND ${OG_SALEOR} --require-db --kafka ${PROJECT_BINARY_DIR})
  set_tests_properties(examples_saleor_kafka PROPERTIES
                       FIXTURES_REQUIRED "db;kafka" LABELS kafka RESOURCE_LOCK saleor_roles TIMEOUT 120)
endif()
