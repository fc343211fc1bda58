# Runs the MPI self-test in "timeout" mode and passes when the job stops non-zero, in time,
# with a rank naming the timed-out barrier. MPIRUN_CMD is the mpirun command with "|" between
# its words (a CMake list cannot cross the -D boundary intact).
string(REPLACE "|" ";" mpirun "${MPIRUN_CMD}")
string(TIMESTAMP start "%s")
execute_process(COMMAND ${mpirun} ${SELFTEST} timeout
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 45)
string(TIMESTAMP end "%s")
math(EXPR elapsed "${end} - ${start}")
message(STATUS "exit: ${rc}, ${elapsed} s\n${out}\n${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "mpirun exited 0 although a rank skipped the barrier")
endif()
if(NOT err MATCHES "failed: rank [0-2]: barrier on world group timed out after 300 ms")
  message(FATAL_ERROR "no rank reported the barrier timeout")
endif()
if(elapsed GREATER 20)
  message(FATAL_ERROR "the job took ${elapsed} s to stop")
endif()
