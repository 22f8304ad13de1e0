# planrt_layer(NAME DIR DEPS...): one static library per layer of docs/design.md §2, from every
# source file in src/DIR. Deps name the lower layers it may use; a layer never lists a
# higher one, so a call into a higher layer fails to link. Every layer sees both include
# roots, so an include of a higher layer's header-only code would still compile: the ctest
# layers.include_order (scripts/check_layers.py) is what refuses that.
function(planrt_layer name dir)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/${dir}/*.cpp)
  if(PLANRT_HAVE_CUDA)
    file(GLOB_RECURSE cu_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*.cu)
    list(APPEND srcs ${cu_srcs})
  else()
    # A cuda/ folder holds code that needs the CUDA toolkit: left out of a CPU-only build.
    list(FILTER srcs EXCLUDE REGEX "/cuda/")
  endif()
  if(NOT srcs)
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty.cpp)  # a layer not written yet
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PLANRT_WARNINGS}>)
  target_link_libraries(${name} PUBLIC ${ARGN})
endfunction()

# planrt_test(NAME DIR LIBS...): one GoogleTest binary from every tests/DIR/*.cpp.
function(planrt_test name dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${dir}/*.cpp)
  if(NOT srcs)
    return()
  endif()
  add_executable(${name} ${srcs})
  target_compile_options(${name} PRIVATE ${PLANRT_WARNINGS} ${PLANRT_TEST_COMPILE_OPTIONS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARGN} planrt_test_support GTest::gtest GTest::gtest_main)
  set(props ENVIRONMENT "PLANRT_TEST_DATA=${PROJECT_SOURCE_DIR}/tests/data")
  if(name MATCHES "cuda")
    # GPU tests read device-wide memory figures (cudaMemGetInfo): no other test process
    # may allocate on the GPU beside them (two failed that way under ctest -j6).
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  # Tests that start threads say so in their name (PLANRT_CONCURRENCY_TESTS): they carry the
  # ctest label "concurrency", which the ThreadSanitizer lane runs (scripts/tsan-test.sh).
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "${PLANRT_CONCURRENCY_TESTS}"
                       PROPERTIES ${props} LABELS concurrency)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_FILTER "-${PLANRT_CONCURRENCY_TESTS}"
                       PROPERTIES ${props})
  # A binary whose sources start threads joins planrt_concurrency_tests, the target the
  # ThreadSanitizer lane builds (only those binaries, not every test).
  foreach(src IN LISTS srcs)
    file(STRINGS ${src} starts_threads REGEX "std::(thread|jthread|async)")
    if(starts_threads)
      add_dependencies(planrt_concurrency_tests ${name})
      break()
    endif()
  endforeach()
endfunction()

# gtest filter of the tests that start threads: "Thread" or "Concurren" in the suite or test
# name (TwoThreadsWithPooledEnginesMatchASerialRun, ConcurrentRegistrationsLetExactlyOneWin).
set(PLANRT_CONCURRENCY_TESTS "*Thread*:*Concurren*")
