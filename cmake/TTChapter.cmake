# The chapter helper: one call declares a whole chapter.
#
#   tt_add_chapter(04_cpu_kernels [LIBRARIES <targets>...] [CUDA_LIBRARIES <targets>...]
#                  [DEFINITIONS <NAME=value>...] [MPI_PROCS <n>...] [CHAIN_TOP_APPS <app>...])
#
# declares, from the folder layout alone:
#   tt_chNN          static library: chapters/NN_topic/src/*.cc (+ *.cu when CUDA is on), where
#                    each file that also exists in solutions/NN_topic/ (an exercise file) is taken
#                    from solutions/ (solution mode, compiled with TT_SOLUTION=1) or from the
#                    generated starter in chapters/NN_topic/src/ (learner mode). It links the
#                    previous chapter's library, so chapter N can use everything before it.
#   tt_chNN_tests    gtest executable of chapters/NN_topic/tests/*.cc, discovered at test time
#                    (tests are labelled chNN, chNN.M from the name ChNN_M_What, and cpu|cuda).
#                    MPI_PROCS 2 4: every test whose name contains "Mpi" is registered once as
#                    a plain process and once per count under mpirun ("Suite.Case/np2", label
#                    mpi); without MPI (TT_WITH_MPI off) only the plain run is registered.
#   <app>            one executable per chapters/NN_topic/apps/<app>.cc (demos, tools); the
#                    tests depend on them (a test may run an app from the same bin/ folder).
#   DEFINITIONS      compile definitions of the chapter's code (library, tests, apps), e.g. a
#                    path of the source tree the chapter's library needs at run time.
#   CHAIN_TOP_APPS   apps of this chapter that link the top of the chapter chain (the last
#                    chapter's library, which holds every chapter) instead of their own
#                    chapter's, so that later chapters' registrations reach them: train_gpt2
#                    (chapter 09) finds chapter 10's "fast" operations and its profiler, and
#                    chapter 12's hooks, through registries. Resolved by tt_link_chain_top_apps()
#                    after the last tt_add_chapter (linking two chain libraries whole-archive
#                    would define every earlier chapter's symbols twice).
#   check-chNN       runs this chapter's tests and prints "chNN: k/n exercises passing — next: ...".
#   check-upto-chNN  the same for chapters 01..NN.
#
# Static libraries and static registration: kernels register themselves from static objects
# that nothing references by name, so a plain static link would drop them. Every chapter library
# is therefore linked with CMake's WHOLE_ARCHIVE feature (--whole-archive), which keeps every
# object file. See chapters/02_dispatcher/README.md, "Why registrations vanish".

set(TT_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." CACHE INTERNAL "")
get_filename_component(TT_SOURCE_ROOT "${TT_SOURCE_ROOT}" ABSOLUTE)
set(TT_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}" CACHE INTERNAL "")
# Test files (not the code they test) compile faster: GoogleTest's header is precompiled once per
# test target (parsing it took ~2 s of every test file), and optimized builds compile them at -O1
# (TT_TEST_COMPILE_OPTIONS; measured on chapter 09's model tests: -O3 13 s -> -O1 9 s, and under
# ASan + UBSan -O2 37 s -> -O1 12 s). The "asan" preset goes to -O0: there the test files were
# 45% of the build's compile time, and one of them (test_tools_lab.cc) took 27 s of CPU at -O1
# against 11 s at -O0. Their run time is in the kernels, which keep the build's -O. Debug builds
# keep -O0 -g for the tests too.
if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
  set(_tt_test_opt_default "-O1")
else()
  set(_tt_test_opt_default "")
endif()
set(TT_TEST_COMPILE_OPTIONS "${_tt_test_opt_default}" CACHE STRING
    "Extra compile options for the test files only (default -O1 in optimized builds)")

# Multi-process tests are registered for the process counts of MPI_PROCS up to this one (0: all).
# The "asan" preset sets 2: under ASan the 4-rank variants took 150 s of its 361 s of tests, and
# they run in the default build (every count) anyway.
set(TT_MPI_MAX_PROCS 0 CACHE STRING "Largest mpirun -np of the multi-process tests (0: all)")
# Whether a multi-process test ("Mpi" in its name) is also registered as one plain process when
# it runs under mpirun too. The "asan" preset sets OFF: its np 2 variant runs the same code with
# the collectives, the default build runs all three (one process, np 2, np 4), and the plain
# variants were 110 s of the sanitized tests' 650 s of test time (session 9's CI).
option(TT_MPI_PLAIN_TESTS "Register each Mpi test as one plain process too" ON)

# Applies the test-file settings above to a target made of test files.
function(tt_configure_test_objects target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${TT_TEST_COMPILE_OPTIONS}>)
  target_precompile_headers(${target} PRIVATE <gtest/gtest.h>)
endfunction()
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_custom_target(check-all)
# `tests`: every executable CTest runs (each one registered by tt_discover_tests, with the apps
# it calls), nothing else (no benchmarks): what a build needs before `ctest`. The sanitizer
# build of CI and the learner build of tools/exercise_coverage build only this target.
add_custom_target(tests)

function(tt_add_chapter dir)
  cmake_parse_arguments(ARG "" "" "LIBRARIES;CUDA_LIBRARIES;DEFINITIONS;MPI_PROCS;CHAIN_TOP_APPS"
                        ${ARGN})
  if(NOT dir MATCHES "^([0-9][0-9])_[a-z0-9_]+$")
    message(FATAL_ERROR "tt_add_chapter: '${dir}' is not of the form NN_topic")
  endif()
  set(num "${CMAKE_MATCH_1}")
  math(EXPR n "${num}")
  set(chdir "${TT_SOURCE_ROOT}/chapters/${dir}")
  set(soldir "${TT_SOURCE_ROOT}/solutions/${dir}")
  set(lib tt_ch${num})

  set(use_solution OFF)
  if(TT_IMPLEMENTATION STREQUAL "solution" OR n LESS_EQUAL TT_SOLUTIONS_UPTO)
    set(use_solution ON)
  endif()

  set(patterns "${chdir}/src/*.cc")
  set(sol_patterns "${soldir}/*.cc")
  if(TT_WITH_CUDA)
    list(APPEND patterns "${chdir}/src/*.cu")
    list(APPEND sol_patterns "${soldir}/*.cu")
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${patterns})
  file(GLOB solutions CONFIGURE_DEPENDS ${sol_patterns})
  set(starters "")
  foreach(sol IN LISTS solutions)
    get_filename_component(name "${sol}" NAME)
    if(NOT EXISTS "${chdir}/src/${name}")
      message(FATAL_ERROR "solutions/${dir}/${name} has no starter chapters/${dir}/src/${name}: "
                          "run tools/sync_starters")
    endif()
    list(REMOVE_ITEM sources "${chdir}/src/${name}")
    list(APPEND starters "${chdir}/src/${name}")
  endforeach()
  set_source_files_properties(${solutions} PROPERTIES COMPILE_DEFINITIONS TT_SOLUTION=1)
  # `sources` now holds the given files only; they are compiled once and shared.

  get_property(prev GLOBAL PROPERTY TT_LAST_CHAPTER_LIB)
  if(prev)
    set(prev_link "$<LINK_LIBRARY:WHOLE_ARCHIVE,${prev}>")
  else()
    set(prev_link "$<LINK_LIBRARY:WHOLE_ARCHIVE,tt_common>")
  endif()
  # Usage requirements shared by every library of this chapter.
  add_library(${lib}_usage INTERFACE)
  target_include_directories(${lib}_usage INTERFACE "${chdir}/include")
  target_link_libraries(${lib}_usage INTERFACE tt_flags ${ARG_LIBRARIES})
  target_compile_definitions(${lib}_usage INTERFACE ${ARG_DEFINITIONS})
  if(TT_WITH_CUDA)
    target_link_libraries(${lib}_usage INTERFACE ${ARG_CUDA_LIBRARIES})
  endif()
  # Given CUDA sources named *_sm90a.cu use Hopper's architecture-specific instructions (wgmma):
  # compiled for sm_90a only, whatever CMAKE_CUDA_ARCHITECTURES says; the code that launches
  # them checks the device's compute capability at run time.
  set(sm90a_sources ${sources})
  list(FILTER sm90a_sources INCLUDE REGEX "_sm90a\\.cu$")
  list(FILTER sources EXCLUDE REGEX "_sm90a\\.cu$")
  set(given_objects "")
  if(sources)
    add_library(${lib}_given OBJECT ${sources})
    target_link_libraries(${lib}_given PUBLIC ${lib}_usage ${prev_link})
    set(given_objects "$<TARGET_OBJECTS:${lib}_given>")
  endif()
  if(sm90a_sources)
    add_library(${lib}_sm90a OBJECT ${sm90a_sources})
    target_link_libraries(${lib}_sm90a PUBLIC ${lib}_usage ${prev_link})
    set_target_properties(${lib}_sm90a PROPERTIES CUDA_ARCHITECTURES OFF)
    target_compile_options(${lib}_sm90a PRIVATE -gencode=arch=compute_90a,code=sm_90a)
    list(APPEND given_objects "$<TARGET_OBJECTS:${lib}_sm90a>")
  endif()

  if(use_solution)
    add_library(${lib} STATIC ${given_objects} ${solutions})
  else()
    add_library(${lib} STATIC ${given_objects} ${starters})
  endif()
  # The fuzzers' chapters carry libFuzzer's coverage instrumentation (TTDependencies.cmake).
  if(NOT n GREATER TT_FUZZ_LAST_CHAPTER)
    foreach(target IN ITEMS ${lib}_given ${lib})
      if(TARGET ${target})
        target_link_libraries(${target} PRIVATE tt_fuzz_coverage)
      endif()
    endforeach()
  endif()
  target_link_libraries(${lib} PUBLIC ${lib}_usage ${prev_link})
  set_property(GLOBAL PROPERTY TT_LAST_CHAPTER_LIB ${lib})
  set_property(GLOBAL APPEND PROPERTY TT_CHAPTER_NUMBERS ${num})

  # Libraries for the exercise coverage tool (solution builds with TT_STARTER_TESTS only). The
  # starters are compiled once (an object library) and used twice, with the given objects:
  #   ${lib}_starter  this chapter's starters on top of the previous chapters' SOLUTIONS, i.e.
  #                   what a learner has when chapters 1..N-1 are done (tests in bin/starter/);
  #   ${lib}_learner  on top of the previous chapters' ${lib}_learner: every chapter a starter,
  #                   what the learner preset builds, without compiling anything again (tests
  #                   in bin/learner/; tools/exercise_coverage checks that none crashes).
  # Their tests are never registered with CTest (they are meant to fail).
  set(build_starter_tests OFF)
  set(build_learner_tests OFF)
  set(starter_objects "")
  if(TT_STARTER_TESTS AND TT_IMPLEMENTATION STREQUAL "solution")
    set(build_learner_tests ON)
    if(starters)
      set(build_starter_tests ON)
      add_library(${lib}_starter_objects OBJECT ${starters})
      target_link_libraries(${lib}_starter_objects PUBLIC ${lib}_usage ${prev_link})
      target_compile_options(${lib}_starter_objects PRIVATE
                             $<$<COMPILE_LANGUAGE:CXX>:-Wno-error>)
      set(starter_objects "$<TARGET_OBJECTS:${lib}_starter_objects>")
      add_library(${lib}_starter STATIC ${given_objects} ${starter_objects})
      target_link_libraries(${lib}_starter PUBLIC ${lib}_usage ${prev_link})
    endif()
    get_property(prev_learner GLOBAL PROPERTY TT_LAST_LEARNER_LIB)
    if(NOT prev_learner)
      set(prev_learner tt_common)
    endif()
    add_library(${lib}_learner STATIC ${given_objects} ${starter_objects})
    target_link_libraries(${lib}_learner PUBLIC ${lib}_usage
                          "$<LINK_LIBRARY:WHOLE_ARCHIVE,${prev_learner}>")
    set_property(GLOBAL PROPERTY TT_LAST_LEARNER_LIB ${lib}_learner)
  endif()

  # Tests (compiled once; linked against the chapter library, and against the starter library).
  file(GLOB tests CONFIGURE_DEPENDS "${chdir}/tests/*.cc")
  set(exe "")
  if(tests)
    set(exe tt_ch${num}_tests)
    add_library(${exe}_objects OBJECT ${tests})
    target_link_libraries(${exe}_objects PUBLIC ${lib}_usage ${prev_link} tt_test_support)
    target_compile_definitions(${exe}_objects PRIVATE
      TT_SOURCE_DIR="${TT_SOURCE_ROOT}" TT_REFERENCE_DIR="${TT_SOURCE_ROOT}/reference_data")
    tt_configure_test_objects(${exe}_objects)
    add_executable(${exe} $<TARGET_OBJECTS:${exe}_objects>)
    target_link_libraries(${exe} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${lib}>" tt_test_support)
    set(mpi_procs "")
    if(ARG_MPI_PROCS AND TT_WITH_MPI)
      foreach(np IN LISTS ARG_MPI_PROCS)
        if(TT_MPI_MAX_PROCS EQUAL 0 OR NOT np GREATER TT_MPI_MAX_PROCS)
          list(APPEND mpi_procs ${np})
        endif()
      endforeach()
    elseif(ARG_MPI_PROCS)
      string(REPLACE ";" ", " _tt_procs "${ARG_MPI_PROCS}")
      message(STATUS "ch${num}: no MPI, so its multi-process tests (mpirun -np ${_tt_procs}) "
                     "are not registered; its tests run as one process only")
    endif()
    tt_discover_tests(${exe} LABEL ch${num} MPI_PROCS ${mpi_procs})
    set_property(GLOBAL APPEND PROPERTY TT_TEST_TARGETS ${exe})
    # The same test objects against ${lib}_starter (bin/starter/) and ${lib}_learner
    # (bin/learner/).
    foreach(kind IN ITEMS starter learner)
      if(build_${kind}_tests)
        add_executable(${exe}_${kind} $<TARGET_OBJECTS:${exe}_objects>)
        target_link_libraries(${exe}_${kind} PRIVATE
                              "$<LINK_LIBRARY:WHOLE_ARCHIVE,${lib}_${kind}>" tt_test_support)
        set_target_properties(${exe}_${kind} PROPERTIES
          RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin/${kind}")
      endif()
    endforeach()
  endif()

  # Apps: one executable per file.
  file(GLOB apps CONFIGURE_DEPENDS "${chdir}/apps/*.cc")
  set(app_targets "")
  foreach(app IN LISTS apps)
    get_filename_component(app_name "${app}" NAME_WE)
    add_executable(${app_name} "${app}")
    if(app_name IN_LIST ARG_CHAIN_TOP_APPS)
      set_property(GLOBAL APPEND PROPERTY TT_CHAIN_TOP_APPS ${app_name})  # linked later
    else()
      target_link_libraries(${app_name} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${lib}>")
    endif()
    list(APPEND app_targets ${app_name})
  endforeach()
  foreach(app_name IN LISTS ARG_CHAIN_TOP_APPS)
    if(NOT TARGET ${app_name})
      message(FATAL_ERROR "tt_add_chapter(${dir}): CHAIN_TOP_APPS names '${app_name}', but there "
                          "is no chapters/${dir}/apps/${app_name}.cc")
    endif()
  endforeach()
  # Tests may run the chapter's apps (chapter 08 runs train_gpt2, found next to the test
  # binary): building the tests builds the apps.
  if(exe AND app_targets)
    add_dependencies(${exe} ${app_targets})
  endif()

  # check-chNN / check-upto-chNN.
  get_property(test_targets GLOBAL PROPERTY TT_TEST_TARGETS)
  set(check_cmd "${Python3_EXECUTABLE}" "${TT_SOURCE_ROOT}/tools/check_chapter"
                --build-dir "${CMAKE_BINARY_DIR}")
  add_custom_target(check-ch${num}
    COMMAND ${check_cmd} ${num}
    DEPENDS ${exe} USES_TERMINAL
    COMMENT "Checking chapter ${num}")
  add_custom_target(check-upto-ch${num}
    COMMAND ${check_cmd} --upto ${num}
    DEPENDS ${test_targets} USES_TERMINAL
    COMMENT "Checking chapters 01..${num}")
  add_dependencies(check-all check-ch${num})
endfunction()

# Links every app declared with CHAIN_TOP_APPS to the top of the chapter chain (the library of the
# last chapter added). Call once, after the last tt_add_chapter (chapters/CMakeLists.txt does).
function(tt_link_chain_top_apps)
  get_property(top GLOBAL PROPERTY TT_LAST_CHAPTER_LIB)
  get_property(apps GLOBAL PROPERTY TT_CHAIN_TOP_APPS)
  foreach(app IN LISTS apps)
    target_link_libraries(${app} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${top}>")
  endforeach()
endfunction()

# Registers the tests of a gtest executable with CTest at test time (never at build time, so
# CUDA binaries are never run while building):
#
#   tt_discover_tests(<target> LABEL <label> [MPI_PROCS <n>...])   e.g. LABEL ch04, LABEL common
#
# Each gtest becomes one CTest test with the labels <label>, chNN.M (from a name like
# ChNN_M_What.Case), and cuda (name contains "Cuda"/"CUDA") or cpu. The target `tests` builds
# <target>. With MPI_PROCS, a test whose
# name contains "Mpi" is also registered under `mpirun -np <n>` for each n (see TTAddTests.cmake).
function(tt_discover_tests target)
  cmake_parse_arguments(ARG "" "LABEL" "MPI_PROCS" ${ARGN})
  if(NOT ARG_LABEL)
    message(FATAL_ERROR "tt_discover_tests(${target}): LABEL is required")
  endif()
  add_dependencies(tests ${target})
  string(REPLACE ";" " " mpi_procs "${ARG_MPI_PROCS}")
  string(REPLACE ";" " " mpi_flags "${TT_MPIEXEC_FLAGS}")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  file(GENERATE OUTPUT "${include_file}" CONTENT
"set(TT_TEST_EXE [==[$<TARGET_FILE:${target}>]==])
set(TT_TEST_TARGET [==[${target}]==])
set(TT_TEST_LABEL [==[${ARG_LABEL}]==])
set(TT_TEST_WORKDIR [==[${TT_SOURCE_ROOT}]==])
set(TT_TEST_MPI_PROCS [==[${mpi_procs}]==])
set(TT_TEST_MPI_PLAIN [==[${TT_MPI_PLAIN_TESTS}]==])
set(TT_TEST_MPIEXEC [==[${MPIEXEC_EXECUTABLE}]==])
set(TT_TEST_MPIEXEC_FLAGS [==[${mpi_flags}]==])
include([==[${TT_CMAKE_DIR}/TTAddTests.cmake]==])
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
