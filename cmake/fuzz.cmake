# libFuzzer targets, one per tests/fuzz/<name>_fuzz.cpp (seed corpora in tests/fuzz/corpus/<name>).
# They need clang and a build folder of their own:
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
# The modules the targets reach (text, request parsing, checkpoint loading, tensors), built
# again with coverage and the sanitizers. The rest of the core (CLI, kernels, engine) is never
# called by a target and takes many minutes per file under the sanitizers, so it is left out.
set(HANDOFF_FUZZ_CORE_SOURCES ${HANDOFF_SOURCES})
list(FILTER HANDOFF_FUZZ_CORE_SOURCES INCLUDE REGEX
  "src/handoff/(log|text/.*|tensor/.*|serve/(openai_protocol|chat_output|tool_request|tokenize_api|http_request_parser)|engine/request|model/(safetensors|config|checkpoint|checkpoint_layout))\\.cpp$")
add_library(handoff_fuzz_core STATIC ${HANDOFF_FUZZ_CORE_SOURCES})
target_include_directories(handoff_fuzz_core PUBLIC src)
target_link_libraries(handoff_fuzz_core PUBLIC OpenMP::OpenMP_CXX fmt::fmt
  nlohmann_json::nlohmann_json PkgConfig::PCRE2)
target_compile_definitions(handoff_fuzz_core PUBLIC PCRE2_CODE_UNIT_WIDTH=8)
target_compile_options(handoff_fuzz_core PRIVATE -fsanitize=fuzzer-no-link ${HANDOFF_SANITIZERS})
target_link_options(handoff_fuzz_core INTERFACE ${HANDOFF_SANITIZERS})

file(GLOB HANDOFF_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/*_fuzz.cpp)
set(HANDOFF_FUZZ_TARGETS)
foreach(fuzz_src ${HANDOFF_FUZZ_SOURCES})
  get_filename_component(fuzz_name ${fuzz_src} NAME_WE)
  add_executable(${fuzz_name} ${fuzz_src})
  target_compile_options(${fuzz_name} PRIVATE -fsanitize=fuzzer ${HANDOFF_SANITIZERS})
  target_link_options(${fuzz_name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(${fuzz_name} PRIVATE handoff_fuzz_core)
  target_compile_definitions(${fuzz_name} PRIVATE HANDOFF_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data")
  list(APPEND HANDOFF_FUZZ_TARGETS ${fuzz_name})
endforeach()
add_custom_target(fuzz_targets DEPENDS ${HANDOFF_FUZZ_TARGETS})
