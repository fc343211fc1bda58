# Sanitizer builds, on demand (`make test-sanitize`, never in .ci/run), each in its own build
# folder:
#   -DHANDOFF_SANITIZE=address  ASan + UBSan; undefined behaviour aborts, so it fails the test
#   -DHANDOFF_SANITIZE=thread   TSan; only the tests labelled `tsan` are meant to run (below)
# Every test of such a build gets the committed runtime options of tests/sanitize/, and so do
# the ranks that mpirun starts. Leak checking stays on: Open MPI's own leaks are suppressed by
# name (tests/sanitize/lsan.supp), nothing else.
set(HANDOFF_SANITIZE "" CACHE STRING "Sanitizer build: address (ASan + UBSan), thread or empty")
set_property(CACHE HANDOFF_SANITIZE PROPERTY STRINGS "" address thread)

# The gtest suites the TSan build runs: those that never enter OpenMP or oneDNN, whose
# uninstrumented runtimes TSan cannot see into (false races). Shell-style patterns on the suite
# name; a new thread-heavy suite that stays out of the kernels belongs here.
set(HANDOFF_TSAN_SUITES
    CommLocal CommLocalFailure CommTopology  # the local comm backend
    SchedulerTest BlockManager ThreadPool    # scheduling, cache blocks, the kernel thread pool
    Http* Serve*                             # the HTTP front
    SoakAudit SoakFakeServer                 # the soak client against an in-process fake
)

if(HANDOFF_SANITIZE STREQUAL "")
  return()
elseif(HANDOFF_SANITIZE STREQUAL "address")
  set(handoff_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(HANDOFF_SANITIZE STREQUAL "thread")
  set(handoff_sanitize_flags -fsanitize=thread)
else()
  message(FATAL_ERROR "HANDOFF_SANITIZE must be address, thread or empty, got '${HANDOFF_SANITIZE}'")
endif()
# -O1 with line tables (after the build type's flags, so these win): every report names file and
# line, at a fraction of the compile time of -O2 -g on a small machine.
add_compile_options(${handoff_sanitize_flags} -fno-omit-frame-pointer -O1 -g1)
add_link_options(${handoff_sanitize_flags})

set(handoff_sanitize_dir ${CMAKE_SOURCE_DIR}/tests/sanitize)
# Open MPI unloads its components at MPI_Finalize, so a leak they allocated is only named by the
# frames below them in libmpi/libopen-rte: the ranks unwind fully at malloc (slow, ranks only).
set(HANDOFF_SANITIZE_ENV
    "ASAN_OPTIONS=include=${handoff_sanitize_dir}/asan.options"
    "UBSAN_OPTIONS=include=${handoff_sanitize_dir}/ubsan.options"
    "LSAN_OPTIONS=suppressions=${handoff_sanitize_dir}/lsan.supp"
    "TSAN_OPTIONS=include=${handoff_sanitize_dir}/tsan.options"
    # mpirun -x for every rank, as MCA parameters (a ',' list: ';' would split CMake lists).
    "OMPI_MCA_mca_base_env_list_delimiter=,"
    "OMPI_MCA_mca_base_env_list=ASAN_OPTIONS,UBSAN_OPTIONS,TSAN_OPTIONS,LSAN_OPTIONS=suppressions=${handoff_sanitize_dir}/lsan.supp:fast_unwind_on_malloc=0")

# Runs once the top-level CMakeLists.txt is done, when every test has been declared.
function(handoff_sanitize_tests)
  get_property(plain_tests DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY TESTS)
  set(tsan_regex "")
  foreach(suite ${HANDOFF_TSAN_SUITES})
    string(REPLACE "*" ".*" suite_regex "${suite}")
    list(APPEND tsan_regex "${suite_regex}")
  endforeach()
  list(JOIN tsan_regex "|" tsan_regex)
  # gtest_discover_tests declares its tests when ctest reads its include file; this one is read
  # after it and labels them (their names are in handoff_tests_TESTS).
  set(script "set(handoff_sanitize_env [==[${HANDOFF_SANITIZE_ENV}]==])\n")
  string(APPEND script [==[
foreach(name IN LISTS handoff_tests_TESTS)
  set_tests_properties("${name}" PROPERTIES ENVIRONMENT "${handoff_sanitize_env}")
]==])
  string(APPEND script "  if(name MATCHES \"^([^/]*/)?(${tsan_regex})\\\\.\")\n")
  string(APPEND script [==[
    set_tests_properties("${name}" PROPERTIES LABELS tsan)
  endif()
endforeach()
]==])
  file(WRITE ${CMAKE_BINARY_DIR}/sanitize_tests.cmake "${script}")
  set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY TEST_INCLUDE_FILES
               ${CMAKE_BINARY_DIR}/sanitize_tests.cmake)
  # Appended: some tests set their own environment (the e2e launcher and recordings).
  if(plain_tests)
    set_property(TEST ${plain_tests} APPEND PROPERTY ENVIRONMENT ${HANDOFF_SANITIZE_ENV})
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL handoff_sanitize_tests)
