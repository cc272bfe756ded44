# The operator's console (ordergate-console) against real PostgreSQL: its JSON API with each role
# (console_api), and its pages in Debian's Chromium driven by Selenium (console_browser; the
# driver's virtualenv is made by the fixture_console_browser fixture, tests/console/browser_env.sh).
# Both run on Debian's python3 (psycopg2) and a sweep of the real ordergate-scanner, whose run the
# overview then shows. The unit tests of the request handling are
# unit_console (tests/unit/test_console.c).
set(OG_CONSOLE_VENV ${PROJECT_BINARY_DIR}/console-venv)
# The command line and --check-config: no database, no network.
add_test(NAME console_cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_cli.sh $<TARGET_FILE:ordergate-console>)
set_tests_properties(console_cli PROPERTIES LABELS "unit;console" TIMEOUT 30)
add_dependencies(unit_tests ordergate-console)
add_test(NAME console_api
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_api.py
                 $<TARGET_FILE:ordergate-console> $<TARGET_FILE:ordergate-scanner>)
set_tests_properties(console_api PROPERTIES LABELS "db;console" FIXTURES_REQUIRED db TIMEOUT 60)
# The browser test runs no C that console_api does not run too: once, outside the sanitizer build.
if(NOT OG_SANITIZE)
add_test(NAME fixture_console_browser
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/browser_env.sh ${OG_CONSOLE_VENV})
set_tests_properties(fixture_console_browser PROPERTIES FIXTURES_SETUP console_browser
                     LABELS "console" TIMEOUT 300)
add_test(NAME console_browser
         COMMAND ${OG_CONSOLE_VENV}/bin/python ${CMAKE_CURRENT_LIST_DIR}/test_browser.py
                 $<TARGET_FILE:ordergate-console> ${PROJECT_BINARY_DIR}/console-screenshots
                 $<TARGET_FILE:ordergate-scanner>)
set_tests_properties(console_browser PROPERTIES LABELS "db;console"
                     FIXTURES_REQUIRED "db;console_browser" TIMEOUT 120)
endif()
# TLS served by the console itself, with a certificate the test makes (openssl).
add_test(NAME console_tls
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_tls.py
                 $<TARGET_FILE:ordergate-console>)
set_tests_properties(console_tls PROPERTIES LABELS "db;console" FIXTURES_REQUIRED db TIMEOUT 60)
