# SQL-level tests of the schema (validation, the state-machine trigger, least privilege, every
# gate outcome and side effect, reconcile and its repair), in a database built with plain psql.
add_test(NAME sql_schema COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh)
set_tests_properties(sql_schema PROPERTIES FIXTURES_REQUIRED db LABELS db TIMEOUT 300)
