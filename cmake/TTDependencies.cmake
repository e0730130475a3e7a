# Finds every dependency through find_package (Debian packages + the CUDA toolkit).
find_package(Threads REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(OpenMP REQUIRED COMPONENTS CXX)
# Chapter 08 (tokenizer): PCRE2 for GPT-2's pre-tokenization regex (Debian libpcre2-dev) and
# nlohmann-json (Debian nlohmann-json3-dev) for GPT-2's encoder.json; chapter 05 also reads
# reference_data/ch05/MANIFEST.json with it.
# PCRE2 is found by header and library name (no pkg-config needed): target TT::pcre2.
find_path(TT_PCRE2_INCLUDE_DIR pcre2.h REQUIRED)
find_library(TT_PCRE2_LIBRARY NAMES pcre2-8 REQUIRED)
add_library(TT::pcre2 UNKNOWN IMPORTED)
set_target_properties(TT::pcre2 PROPERTIES IMPORTED_LOCATION "${TT_PCRE2_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TT_PCRE2_INCLUDE_DIR}")
find_package(nlohmann_json 3.2 REQUIRED)

# Chapter 12 (data parallelism): MPI (Debian libopenmpi-dev + openmpi-bin) is OPTIONAL. Target
# tt_mpi carries it: MPI::MPI_C and TT_WITH_MPI=1 when found, nothing otherwise (chapter 12 then
# builds the world-size-1 process group only and registers no multi-process test).
# TT_MPIEXEC_FLAGS are given to every mpirun the tests start: --oversubscribe allows more ranks
# than cores (CI runs 4 ranks on 2 cores), --allow-run-as-root lets CI containers run as root.
find_package(MPI COMPONENTS C)
set(TT_MPIEXEC_FLAGS "--oversubscribe;--allow-run-as-root" CACHE STRING
    "Flags of the mpirun that runs the multi-process tests")
add_library(tt_mpi INTERFACE)
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  set(TT_WITH_MPI ON)
  target_link_libraries(tt_mpi INTERFACE MPI::MPI_C)
  string(REPLACE ";" " " _tt_mpi_flags "${TT_MPIEXEC_FLAGS}")
  target_compile_definitions(tt_mpi INTERFACE TT_WITH_MPI=1
                             TT_MPIEXEC="${MPIEXEC_EXECUTABLE}" TT_MPIEXEC_FLAGS="${_tt_mpi_flags}")
  message(STATUS "TinyInfiniTrain: MPI ${MPI_C_VERSION} (${MPIEXEC_EXECUTABLE})")
else()
  set(TT_WITH_MPI OFF)
  message(STATUS "TinyInfiniTrain: MPI not found (install libopenmpi-dev openmpi-bin): chapter 12 "
                 "builds the world-size-1 process group only and registers no multi-process test")
endif()

# CUDA: AUTO turns it on when nvcc is found. When it is on, every CUDA source is compiled
# (so a CPU-only CI machine with nvcc still proves the CUDA code builds); CUDA tests skip at
# run time when no GPU is present.
set(TT_WITH_CUDA OFF)
if(NOT TT_ENABLE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # A GPU visible at configure time: build for it. Otherwise Hopper (sm_90, the H100/H200
      # the project is verified on); override with -DCMAKE_CUDA_ARCHITECTURES=86 etc.
      execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
                      OUTPUT_VARIABLE _tt_cc RESULT_VARIABLE _tt_smi ERROR_QUIET
                      OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(_tt_smi EQUAL 0 AND _tt_cc MATCHES "^[0-9]")
        set(CMAKE_CUDA_ARCHITECTURES native)
      else()
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows nvcc's dialect flags only up to C++17; nvcc >= 12 accepts -std=c++20.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(TT_WITH_CUDA ON)
    message(STATUS "TinyInfiniTrain: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(TT_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TT_ENABLE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

# Chapter 12 on GPUs: NCCL (in the CUDA toolkit under /usr/local/cuda, found by
# cmake/FindNCCL.cmake) is OPTIONAL and only looked for in CUDA builds. Target tt_nccl carries
# it: NCCL::NCCL, CUDA::cudart and TT_WITH_NCCL=1 when found, nothing otherwise (collectives on
# CUDA tensors then throw a tt::Error that says so).
add_library(tt_nccl INTERFACE)
set(TT_WITH_NCCL OFF)
if(TT_WITH_CUDA)
  find_package(NCCL)
  if(NCCL_FOUND)
    set(TT_WITH_NCCL ON)
    target_link_libraries(tt_nccl INTERFACE NCCL::NCCL CUDA::cudart)
    target_compile_definitions(tt_nccl INTERFACE TT_WITH_NCCL=1)
    message(STATUS "TinyInfiniTrain: NCCL ${NCCL_VERSION} (${NCCL_LIBRARY})")
  else()
    message(STATUS "TinyInfiniTrain: NCCL not found (set NCCL_ROOT): chapter 12's collectives "
                   "take CPU tensors only")
  endif()
endif()

# Flags shared by every target of the project.
add_library(tt_flags INTERFACE)
target_compile_options(tt_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${TT_WARNINGS_AS_ERRORS}>>:-Werror>
  # No code here reads errno after a math function, and with errno GCC must call sqrtf for a
  # negative argument, which stops it from vectorizing any loop with a square root (AdamW's).
  # The results do not change: a square root is correctly rounded either way.
  $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno>
  # GCC 12 reports false positives for std::string concatenation at -O3 (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
# The CPU kernels (chapter 04: Eigen's GEMM, the blocked matmul's micro-kernel) are only
# competitive with the vector units of the build machine (AVX2/FMA instead of x86-64's SSE2).
# Turn it off to build binaries that run on other x86-64 machines, and give the instruction set
# in CMAKE_CXX_FLAGS if you want one: the preset "asan" (CI) builds for x86-64-v2 (SSE4.2, no
# AVX), so every CPU-dependent path (Eigen's SIMD exp, GEMM micro-kernels) is tested twice in
# CI, once with the native vector units and once with SSE.
option(TT_NATIVE_ARCH "Compile C++ for the build machine's CPU (-march=native)" ON)
if(TT_NATIVE_ARCH)
  target_compile_options(tt_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
if(TT_WITH_CUDA)
  target_compile_definitions(tt_flags INTERFACE TT_WITH_CUDA=1)
  target_compile_options(tt_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)
endif()

# Sanitizers (preset "asan", clang): applied to every target of the project, every check of
# the groups on (alignment and null included: the fuzzed parsers read file bytes). With clang
# the whole sanitized build, tests and fuzzers, compiles in 13 minutes on 2 cores; GCC needed 14
# for the tests alone, and the fuzzers (clang only) were a second build of their libraries.
set(TT_SANITIZE "" CACHE STRING "Sanitizers for the project's code, e.g. address,undefined")
option(TT_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)
if(TT_SANITIZE)
  target_compile_options(tt_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${TT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(tt_flags INTERFACE -fsanitize=${TT_SANITIZE})
endif()
# libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link) goes only where the fuzzers
# look: tt_common, the libraries of chapters 01..TT_FUZZ_LAST_CHAPTER (the parsers; fuzz/ refuses
# a fuzzer on a later chapter's library) and the fuzzers' own files, through tt_fuzz_coverage
# (tt_add_chapter, common/, fuzz/). The tests and chapters 10-16 are compiled without it: the
# sanitized build's compile time fell by 7% (1,551 -> 1,447 CPU seconds, CI's ninja logs of
# 2026-11-27) for edges no fuzzer reaches.
set(TT_FUZZ_LAST_CHAPTER 9 CACHE INTERNAL "Last chapter whose library the fuzzers instrument")
add_library(tt_fuzz_coverage INTERFACE)
if(TT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TT_BUILD_FUZZERS needs clang (use the 'asan' preset)")
  endif()
  target_compile_options(tt_fuzz_coverage INTERFACE
                         $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()
