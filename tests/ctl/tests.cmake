# ordergatectl, run as a child process (tools/ordergatectl) against a database of each
# test's own, copied from the db fixture's template (built with schema/install.sql).
og_add_test(NAME ctl_db
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_db.c ${CMAKE_CURRENT_LIST_DIR}/ctl_run.c
            LABELS db FIXTURES db TIMEOUT 300)
og_add_test(NAME ctl_archive
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_archive.c ${CMAKE_CURRENT_LIST_DIR}/ctl_run.c
            LABELS db FIXTURES db TIMEOUT 120)
og_add_test(NAME ctl_outbox
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_outbox.c ${CMAKE_CURRENT_LIST_DIR}/ctl_run.c
            LABELS db FIXTURES db TIMEOUT 120)
og_add_test(NAME ctl_checks
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_checks.c ${CMAKE_CURRENT_LIST_DIR}/ctl_run.c
            LABELS db FIXTURES db TIMEOUT 120)
og_add_test(NAME ctl_kafka
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_kafka.c ${CMAKE_CURRENT_LIST_DIR}/ctl_run.c
            LABELS kafka FIXTURES db kafka TIMEOUT 180)
# The tests run the program: build it first.
add_dependencies(ctl_db ordergatectl)
add_dependencies(ctl_kafka ordergatectl)
add_dependencies(ctl_archive ordergatectl)
add_dependencies(ctl_outbox ordergatectl)
add_dependencies(ctl_checks ordergatectl)
# Through the transaction-pooling PgBouncer of deploy/local/services.sh (--pool-mode transaction).
og_add_test(NAME ctl_pgbouncer
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_pgbouncer.c ${CMAKE_CURRENT_LIST_DIR}/ctl_run.c
            LABELS "db;pgbouncer" FIXTURES db pgbouncer TIMEOUT 180)
add_dependencies(ctl_pgbouncer ordergatectl)
