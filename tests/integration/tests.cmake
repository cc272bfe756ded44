# Ground tests: the real PostgreSQL and the real broker answer.
og_add_test(NAME integration_pg SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pg_ground.c
            LABELS db FIXTURES db)
og_add_test(NAME integration_kafka SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kafka_ground.c
            LABELS kafka FIXTURES kafka TIMEOUT 120)
