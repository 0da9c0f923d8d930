# tessera_add_plugin(<name> KIND <backend|quant|draft|constraint> SOURCES ... [LIBRARIES ...])
#
# Builds the MODULE library libtessera_<kind>_<name>.so that the host's loader expects:
# hidden visibility (only tsr_plugin_query, marked TSR_EXPORT, is exported), no
# undefined symbols left for load time, linked with Tessera::sdk (which brings the C ABI
# headers). `install()` puts it in <prefix>/<libdir>/tessera, where `tessera` finds plugins.
include_guard(GLOBAL)
include(GNUInstallDirs)

function(tessera_add_plugin name)
  cmake_parse_arguments(P "" "KIND" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_KIND MATCHES "^(backend|quant|draft|constraint)$")
    message(FATAL_ERROR "tessera_add_plugin(${name}): KIND must be backend, quant, draft or constraint")
  endif()
  if(NOT name MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "tessera_add_plugin(${name}): names are lowercase letters, digits and _")
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "tessera_add_plugin(${name}): no SOURCES")
  endif()
  set(target tessera_${P_KIND}_${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE Tessera::sdk ${P_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "tessera_${P_KIND}_${name}" SUFFIX ".so"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  # A missing symbol should fail the build, not the dlopen on a user's machine.
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/tessera)
endfunction()

# tessera_add_conformance_test(<target>): a ctest entry running tessera-conformance on it.
function(tessera_add_conformance_test target)
  add_test(NAME conformance_${target} COMMAND Tessera::conformance $<TARGET_FILE:${target}>)
endfunction()
