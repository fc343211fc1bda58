# libFuzzer targets, one per tests/fuzz/<name>_fuzz.cpp (seed corpora in tests/fuzz/corpus/<name>).
# They need clang and a build folder of their own, where the core library is instrumented too:
#   cmake -S . -B build-fuzz -DHANDOFF_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang
# `make fuzz` does that and runs each target for a bounded time.
option(HANDOFF_FUZZ "Build the libFuzzer targets with ASan + UBSan (clang only)" OFF)
if(NOT HANDOFF_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "HANDOFF_FUZZ needs clang (-DCMAKE_CXX_COMPILER=clang++), "
    "not ${CMAKE_CXX_COMPILER_ID}")
endif()

# UBSan findings abort like ASan's, so the fuzzer records them as crashes.
set(HANDOFF_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer)
# Everything linking the core (the CLI and the unit tests too) links the sanitizer runtimes.
target_compile_options(handoff_core PRIVATE -fsanitize=fuzzer-no-link ${HANDOFF_SANITIZERS})
target_link_options(handoff_core INTERFACE ${HANDOFF_SANITIZERS})

file(GLOB HANDOFF_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/*_fuzz.cpp)
set(HANDOFF_FUZZ_TARGETS)
foreach(fuzz_src ${HANDOFF_FUZZ_SOURCES})
  get_filename_component(fuzz_name ${fuzz_src} NAME_WE)
  add_executable(${fuzz_name} ${fuzz_src})
  target_compile_options(${fuzz_name} PRIVATE -fsanitize=fuzzer ${HANDOFF_SANITIZERS})
  target_link_options(${fuzz_name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${fuzz_name} PRIVATE handoff_core)
  target_compile_definitions(${fuzz_name} PRIVATE HANDOFF_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data")
  list(APPEND HANDOFF_FUZZ_TARGETS ${fuzz_name})
endforeach()
add_custom_target(fuzz_targets DEPENDS ${HANDOFF_FUZZ_TARGETS})
