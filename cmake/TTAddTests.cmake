# Runs inside ctest (included from the file tt_discover_tests generates): lists the tests of
# one gtest executable and declares one CTest test for each, with the project's labels.
# Inputs: TT_TEST_EXE, TT_TEST_TARGET, TT_TEST_LABEL (e.g. ch04, common), TT_TEST_WORKDIR, and
# for chapters with multi-process tests TT_TEST_MPI_PROCS ("2 4"), TT_TEST_MPIEXEC (mpirun) and
# TT_TEST_MPIEXEC_FLAGS: a test whose name contains "Mpi" is registered once as a plain process
# (not when it contains "MultiRankMpi") and once per count as "<name>/np<n>" run by `mpirun <flags> -np <n>`, labelled mpi, with
# PROCESSORS n (ctest -j schedules it as n jobs) and OMP_NUM_THREADS=1 (the ranks share the cores).
# With TT_TEST_MPI_PLAIN false (option TT_MPI_PLAIN_TESTS, the asan preset) an Mpi test that runs
# under mpirun is not registered as a plain process as well.
# Every test of such an executable also gets the LeakSanitizer suppressions of OpenMPI's
# never-freed allocations (lsan_openmpi.supp; ignored by builds without sanitizers).
if(NOT EXISTS "${TT_TEST_EXE}")
  add_test("${TT_TEST_TARGET}_NOT_BUILT" "${TT_TEST_EXE}")
  set_tests_properties("${TT_TEST_TARGET}_NOT_BUILT" PROPERTIES LABELS "${TT_TEST_LABEL}")
  return()
endif()
execute_process(COMMAND "${TT_TEST_EXE}" --gtest_list_tests
                OUTPUT_VARIABLE _tt_out ERROR_VARIABLE _tt_err RESULT_VARIABLE _tt_rc
                TIMEOUT 60)
if(NOT _tt_rc EQUAL 0)
  # Make the failure visible as a failing test rather than silently dropping the binary.
  add_test("${TT_TEST_TARGET}_LIST_FAILED" "${TT_TEST_EXE}" --gtest_list_tests)
  set_tests_properties("${TT_TEST_TARGET}_LIST_FAILED" PROPERTIES LABELS "${TT_TEST_LABEL}")
  return()
endif()
# (appended to the sanitizer options of the environment, e.g. the asan test preset's)
set(_tt_lsan_env
    "LSAN_OPTIONS=string_append::suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan_openmpi.supp")
string(REPLACE ";" "\\;" _tt_out "${_tt_out}")
string(REPLACE "\n" ";" _tt_lines "${_tt_out}")
set(_tt_suite "")
foreach(_tt_line IN LISTS _tt_lines)
  if(_tt_line MATCHES "^([^ #][^ ]*)\\.( *#.*)?$")
    set(_tt_suite "${CMAKE_MATCH_1}")
  elseif(_tt_line MATCHES "^  ([^ ]+)( *#.*)?$")
    set(_tt_name "${_tt_suite}.${CMAKE_MATCH_1}")
    if(_tt_name MATCHES "DISABLED_")
      continue()
    endif()
    set(_tt_labels "${TT_TEST_LABEL}")
    # Suite ChNN_M_What (optionally behind a parameterized-instantiation prefix "Prefix/").
    if(_tt_suite MATCHES "(^|/)Ch([0-9][0-9])_([0-9]+)_")
      list(APPEND _tt_labels "ch${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
    endif()
    if(_tt_name MATCHES "[Cc]uda|CUDA")
      list(APPEND _tt_labels cuda)
    else()
      list(APPEND _tt_labels cpu)
    endif()
    # A "MultiRankMpi" test needs 2+ ranks: it is registered under mpirun only (one process
    # would have nothing to check, and a skip would hide that).
    set(_tt_plain TRUE)
    if(_tt_name MATCHES "MultiRankMpi" OR
       (_tt_name MATCHES "Mpi" AND TT_TEST_MPI_PROCS AND NOT TT_TEST_MPI_PLAIN))
      set(_tt_plain FALSE)
    endif()
    if(_tt_plain)
      add_test("${_tt_name}" "${TT_TEST_EXE}" "--gtest_filter=${_tt_name}")
      set_tests_properties("${_tt_name}" PROPERTIES
        LABELS "${_tt_labels}"
        WORKING_DIRECTORY "${TT_TEST_WORKDIR}"
        SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
        TIMEOUT 600)
      if(TT_TEST_MPI_PROCS)  # the test may start mpirun itself (failure drills)
        set_tests_properties("${_tt_name}" PROPERTIES ENVIRONMENT_MODIFICATION "${_tt_lsan_env}")
      endif()
    endif()
    if(_tt_name MATCHES "Mpi" AND TT_TEST_MPI_PROCS)
      separate_arguments(_tt_procs UNIX_COMMAND "${TT_TEST_MPI_PROCS}")
      separate_arguments(_tt_flags UNIX_COMMAND "${TT_TEST_MPIEXEC_FLAGS}")
      foreach(_tt_np IN LISTS _tt_procs)
        add_test("${_tt_name}/np${_tt_np}" "${TT_TEST_MPIEXEC}" ${_tt_flags} -np ${_tt_np}
                 "${TT_TEST_EXE}" "--gtest_filter=${_tt_name}")
        set_tests_properties("${_tt_name}/np${_tt_np}" PROPERTIES
          LABELS "${_tt_labels};mpi"
          WORKING_DIRECTORY "${TT_TEST_WORKDIR}"
          SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
          PROCESSORS ${_tt_np}
          ENVIRONMENT "OMP_NUM_THREADS=1"
          ENVIRONMENT_MODIFICATION "${_tt_lsan_env}"
          TIMEOUT 300)
      endforeach()
    endif()
  endif()
endforeach()
