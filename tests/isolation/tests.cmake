# Deterministic interleavings of real sessions (PostgreSQL's isolationtester), one
# test per spec: the four race windows W1-W4 (schema/README.md, "Tests"), manual close and hold against
# payments, and overlapping batches that must not deadlock.
# PostgreSQL's isolationtester against the SQL: no C of this build is in them, so the sanitizer
# build (tests/run.sh runs both builds) would run the same interleavings again.
if(NOT OG_SANITIZE)
  file(GLOB OG_ISOLATION_SPECS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/specs/*.spec)
  foreach(spec ${OG_ISOLATION_SPECS})
    get_filename_component(name ${spec} NAME_WE)
    add_test(NAME isolation_${name} COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh ${name})
    set_tests_properties(isolation_${name} PROPERTIES
                         FIXTURES_REQUIRED db LABELS "db;isolation" TIMEOUT 120
                         ENVIRONMENT "ORDERGATE_ISOLATION_OUT=${PROJECT_BINARY_DIR}/isolation")
    # The same interleavings with a shop's hooks writing shop tables (tests/isolation/hooks.sql).
    add_test(NAME isolation_hooks_${name} COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh ${name})
    set_tests_properties(isolation_hooks_${name} PROPERTIES
                         FIXTURES_REQUIRED db LABELS "db;isolation" TIMEOUT 120
                         ENVIRONMENT "ORDERGATE_ISOLATION_OUT=${PROJECT_BINARY_DIR}/isolation-hooks;ORDERGATE_ISOLATION_HOOKS=1")
  endforeach()
endif()
