# The generated settings reference: docs/settings.md and deploy/ordergate.conf are what a built
# service prints with --list-settings=markdown and --list-settings=conf (common/cfg_doc.h).
#   cmake -DBIN=ordergate-scanner -DSRC=<repository> -DOUT=<scratch dir> -DMODE=check -P this
# fails, showing the difference, when a committed file is stale; MODE=write regenerates both
# (cmake --build build --target settings_doc).
foreach(pair "markdown=docs/settings.md" "conf=deploy/ordergate.conf")
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 format)
  list(GET pair 1 file)
  get_filename_component(name "${file}" NAME)
  set(fresh "${OUT}/${name}.generated")
  execute_process(COMMAND "${BIN}" --list-settings=${format} OUTPUT_FILE "${fresh}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${BIN} --list-settings=${format} exited ${rc}")
  endif()
  if(MODE STREQUAL "write")
    file(COPY_FILE "${fresh}" "${SRC}/${file}" ONLY_IF_DIFFERENT)
    message(STATUS "${file}: regenerated")
  else()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${SRC}/${file}" "${fresh}"
                    RESULT_VARIABLE same)
    if(NOT same EQUAL 0)
      execute_process(COMMAND diff -u "${SRC}/${file}" "${fresh}")
      list(APPEND stale "${file}")
    endif()
  endif()
endforeach()
if(stale)
  message(FATAL_ERROR "stale: ${stale}; regenerate with: cmake --build <build> --target settings_doc")
endif()
