# ordergate-scanner: each test (scanner_X, from test_scanner_X.c) runs the built binary against
# its own database.
set(OG_SCANNER_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})
function(og_scanner_test name)
  cmake_parse_arguments(S "" "TIMEOUT" "LABELS;FIXTURES" ${ARGN})
  if(NOT S_TIMEOUT)
    set(S_TIMEOUT 300)
  endif()
  og_add_test(NAME ${name}
              SOURCES ${OG_SCANNER_TEST_DIR}/test_${name}.c ${OG_SCANNER_TEST_DIR}/scanner_child.c
              LABELS ${S_LABELS} FIXTURES ${S_FIXTURES} TIMEOUT ${S_TIMEOUT})
  target_include_directories(${name} PRIVATE ${OG_SCANNER_TEST_DIR})
  add_dependencies(${name} ordergate-scanner)
endfunction()

og_scanner_test(scanner_cli LABELS unit)
og_scanner_test(scanner_sweep LABELS db FIXTURES db)
og_scanner_test(scanner_busy LABELS db FIXTURES db TIMEOUT 120)
og_scanner_test(scanner_hooks LABELS db FIXTURES db TIMEOUT 120)
og_scanner_test(scanner_lock LABELS db FIXTURES db)
og_scanner_test(scanner_fault LABELS db FIXTURES db)
og_scanner_test(scanner_every LABELS db FIXTURES db)
og_scanner_test(scanner_reconcile LABELS db FIXTURES db)
# The payment reminders' fallback: overdue unsent reminders sent once.
og_scanner_test(scanner_reminders LABELS db FIXTURES db)
# The plans of the sweep's queries over a million orders: SQL and the planner, run once (the
# sanitizer build runs the same scanner C in the other scanner tests).
if(NOT OG_SANITIZE)
  og_scanner_test(scanner_plan LABELS db FIXTURES db TIMEOUT 600)
endif()
# Through the transaction-pooling PgBouncer of deploy/local/services.sh (--pool-mode transaction).
og_scanner_test(scanner_pgbouncer LABELS "db;pgbouncer" FIXTURES db pgbouncer)
# scanner/runlog.c against the database, a start's reply lost after its commit (db_call wrapped).
og_add_test(NAME scanner_runlog
            SOURCES ${OG_SCANNER_TEST_DIR}/test_scanner_runlog.c ${PROJECT_SOURCE_DIR}/scanner/runlog.c
            LABELS db FIXTURES db TIMEOUT 120)
target_link_options(scanner_runlog PRIVATE -Wl,--wrap=db_call)
