# unit_settings_doc: docs/settings.md and deploy/ordergate.conf are generated from the settings
# table; the test fails, with the difference, when a committed one is stale. The target
# settings_doc regenerates both in the source tree.
add_test(NAME unit_settings_doc
         COMMAND ${CMAKE_COMMAND} -DBIN=$<TARGET_FILE:ordergate-scanner>
                 -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${CMAKE_CURRENT_BINARY_DIR} -DMODE=check
                 -P ${CMAKE_CURRENT_LIST_DIR}/settings_doc.cmake)
set_tests_properties(unit_settings_doc PROPERTIES LABELS unit TIMEOUT 60)
# What it runs is built with the other unit tests (tests/run.sh --quick).
add_dependencies(unit_tests ordergate-scanner)
add_custom_target(settings_doc
                  COMMAND ${CMAKE_COMMAND} -DBIN=$<TARGET_FILE:ordergate-scanner>
                          -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${CMAKE_CURRENT_BINARY_DIR}
                          -DMODE=write -P ${CMAKE_CURRENT_LIST_DIR}/settings_doc.cmake
                  DEPENDS ordergate-scanner
                  COMMENT "Regenerating docs/settings.md and deploy/ordergate.conf")
