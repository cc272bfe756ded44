# Outbox relay against the real database and broker (gate rows in, topics out).
og_add_test(NAME outbox_relay SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_outbox.c
            LABELS kafka FIXTURES db kafka TIMEOUT 300)
