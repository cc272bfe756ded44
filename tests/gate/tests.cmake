# The gate client (common/gate.c, common/db.c) against the real schema: every outcome with its
# side effects, bad arguments and privileges, retries in db_call, and a concurrent stress run.
set(OG_GATE_FIXTURE ${CMAKE_CURRENT_LIST_DIR}/gate_fixture.c)
og_add_test(NAME gate_outcomes
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gate_outcomes.c ${OG_GATE_FIXTURE}
            LABELS db FIXTURES db)
og_add_test(NAME gate_guard
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gate_guard.c ${OG_GATE_FIXTURE}
            LABELS db FIXTURES db)
og_add_test(NAME gate_retry
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gate_retry.c ${OG_GATE_FIXTURE}
            LABELS db FIXTURES db TIMEOUT 120)
og_add_test(NAME gate_stress
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gate_stress.c ${OG_GATE_FIXTURE}
            LABELS db FIXTURES db TIMEOUT 120)
og_add_test(NAME gate_money
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gate_money.c ${OG_GATE_FIXTURE}
            LABELS db FIXTURES db)
