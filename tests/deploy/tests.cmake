# The alert rules and their promtool unit tests (deploy/prometheus/test-rules.sh): promtool check
# rules, promtool test rules, no rule on a job name, every alert tested firing and silent.
# Without promtool (Debian's prometheus package, in tests/run.sh's list) this FAILS, never skips.
# No binary involved: once is enough, in the normal build.
if(NOT OG_SANITIZE)
  add_test(NAME deploy_alerts COMMAND ${PROJECT_SOURCE_DIR}/deploy/prometheus/test-rules.sh)
  set_tests_properties(deploy_alerts PROPERTIES LABELS deploy TIMEOUT 600)
endif()

# The deployment files (deploy/: ordergate.conf, systemd units, compose, Kubernetes manifests,
# alert rules and their promtool tests, the Grafana dashboard) validated by deploy/validate.sh.
# The configs are also checked through a built binary's --check-config, hence --build-dir.
# First run on a machine may fetch promtool (Debian's prometheus package, extracted into the cache)
# and kubernetes-validate (PyPI, into a venv in the cache): hence the long timeout.
# Registered in the normal build only: it inspects the binaries' runtime libraries against the
# Dockerfile's runtime stage, and a sanitizer build links libasan, which no image ships.
if(NOT OG_SANITIZE)
  add_test(NAME deploy_validate
           COMMAND ${PROJECT_SOURCE_DIR}/deploy/validate.sh --build-dir ${PROJECT_BINARY_DIR})
  set_tests_properties(deploy_validate PROPERTIES LABELS deploy TIMEOUT 900)
endif()

# The Kafka cluster ids deploy/local/services.sh makes never start with '-' (the format tool would
# read one as an option and the broker would not start: 1 start in 64 failed so).
# No binary involved: once is enough, in the normal build.
if(NOT OG_SANITIZE)
  add_test(NAME deploy_cluster_id COMMAND ${CMAKE_CURRENT_LIST_DIR}/cluster_id.sh)
  set_tests_properties(deploy_cluster_id PROPERTIES LABELS deploy TIMEOUT 120)
endif()
