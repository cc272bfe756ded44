# SQL-level tests of the schema (validation, the state-machine trigger, least privilege, every
# gate outcome and side effect, reconcile and its repair), in a database built with plain psql.
# sql_schema and sql_roles run psql only: no C of this build is in them, so the sanitizer build
# (tests/run.sh runs both builds) would run the same thing again; they run in the other builds.
if(NOT OG_SANITIZE)
  add_test(NAME sql_schema COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh)
  set_tests_properties(sql_schema PROPERTIES FIXTURES_REQUIRED db LABELS db TIMEOUT 300)
endif()
# A fresh install (install.sql, ordergatectl migrate), upgraded 0.1.0 databases and an upgraded
# database of the previous layout dump the same schema, and schema/current.sql is current; the
# older schemas come from the repository's history.
add_test(NAME sql_schema_upgrade COMMAND ${CMAKE_CURRENT_LIST_DIR}/schema_upgrade.sh $<TARGET_FILE:ordergatectl>)
set_tests_properties(sql_schema_upgrade PROPERTIES LABELS db TIMEOUT 300)
# Least privilege between the kinds of callers (tests/sql/130_roles.sql): each login role kind
# tries the others' functions, the deprecated ordergate_service, the sweep lease's bound and run
# token.
if(NOT OG_SANITIZE)
  add_test(NAME sql_roles COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh 130_roles.sql)
  set_tests_properties(sql_roles PROPERTIES LABELS db TIMEOUT 120)
endif()
