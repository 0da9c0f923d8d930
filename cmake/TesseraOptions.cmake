# Warnings and sanitizers shared by every Tessera target.
add_library(tessera_warnings INTERFACE)
target_compile_options(tessera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)

if(TESSERA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TESSERA_FUZZ needs clang (libFuzzer): CXX=clang++ CC=clang")
  endif()
  # Coverage for libFuzzer everywhere; the fuzz targets alone link its driver.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# tessera_add_plugin(<kind> <name> SOURCES ...): a correctly named MODULE library
# (libtessera_<kind>_<name>.so) that sees only the plugin_api headers.
function(tessera_add_plugin kind name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(target tessera_${kind}_${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE tessera_plugin_api tessera_warnings ${P_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "tessera_${kind}_${name}"
    LIBRARY_OUTPUT_DIRECTORY ${TESSERA_PLUGIN_OUTPUT_DIR}
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  # Plugins see only the stable ABI: linking any core library is a configuration error.
  # The constraint and quant-format libraries are not core: they are self-contained, and
  # what the constraint and quant plugins adapt.
  foreach(lib ${P_LIBRARIES})
    if(lib MATCHES "^tessera_" AND NOT lib MATCHES "^tessera_(plugin_api|sdk|constraints|quant_formats)$")
      message(FATAL_ERROR "plugin ${target} links ${lib}; plugins may use only plugin_api, sdk, constraints and quant_formats")
    endif()
  endforeach()
  install(TARGETS ${target} LIBRARY DESTINATION ${TESSERA_PLUGIN_INSTALL_DIR})
endfunction()

# tessera_add_test(<name> SOURCES ... LIBRARIES ... [DEFINITIONS ...] [DEPENDS ...]): a
# GoogleTest executable registered with ctest; nothing at all when tests are off, so
# callers pass everything here rather than touching the target afterwards. TESSERA_SHARED_DIR points at ../shared data.
function(tessera_add_test name)
  if(NOT TESSERA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBRARIES;DEFINITIONS;DEPENDS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  if(T_DEFINITIONS)
    target_compile_definitions(${name} PRIVATE ${T_DEFINITIONS})
  endif()
  if(T_DEPENDS)
    add_dependencies(${name} ${T_DEPENDS})
  endif()
  target_link_libraries(${name} PRIVATE tessera_warnings GTest::gtest_main ${T_LIBRARIES})
  target_compile_definitions(${name} PRIVATE
    TESSERA_SHARED_DIR="${TESSERA_SHARED_DIR}"
    TESSERA_PLUGIN_DIR="${TESSERA_PLUGIN_OUTPUT_DIR}"
    TESSERA_BIN_DIR="${PROJECT_BINARY_DIR}/bin")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
endfunction()
